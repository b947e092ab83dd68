"""The report as files: GitHub-flavoured Markdown and JSON."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pytest_tpu import roundtimes
from pytest_tpu.report.comparison import (
    comparison_counts,
    comparison_notes,
    comparison_summary,
    comparison_table,
    one_pair_rows,
    sort_comparison,
)
from pytest_tpu.report.layout import tabulate_rows
from pytest_tpu.report.model import (
    OTHER_METRICS,
    SPREAD_LEGEND,
    Cell,
    ComparisonRow,
    WorkloadTable,
    interval_legend,
)
from pytest_tpu.report.notes import unchanged_is_not_none
from pytest_tpu.report.tables import cross_table, missing_line, speedup_table, table_notes
from pytest_tpu.roundtimes import RoundTime


def to_markdown(
    tables: Sequence[WorkloadTable],
    comparison: Sequence[ComparisonRow] | None = None,
    baseline: str | None = None,
    missing: dict[str, str] | None = None,
    gate: dict[str, Any] | None = None,
    plain: Sequence[RoundTime] = (),
    notes: Sequence[str] = (),
    head: str | None = None,
) -> str:
    """GitHub-flavoured Markdown for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment;
    devices missing from the machine are named once, under the heading. ``plain``: the round
    times of benchmarks without a device. ``notes``: what the comparison said beyond its rows
    (--compare-ref's re-measurements and their seconds, an interrupt). ``head``: what was
    measured against the baseline, where a git checkout names it."""
    out = ["## pytest-tpu benchmarks", ""]
    line = missing_line(missing or {})
    out += [line, ""] if line else []
    if not tables and not comparison and not plain:
        out += ["No benchmark ran.", ""]
    if plain:
        body = [roundtimes.cells(row) for row in plain]
        explained = (
            f"{roundtimes.EXPLAINED} {roundtimes.IN_TURNS}" if head else roundtimes.EXPLAINED
        )
        out += [f"### {roundtimes.TITLE}", "", explained, ""]
        out += [tabulate_rows(body, roundtimes.HEADERS, "github"), ""]
        out += [f"failed: {row.name}: {row.error}  " for row in plain if row.error]
    for table in tables:
        out += [f"### {table.title}", "", speedup_table(table, "github"), ""]
        out += [f"{note}  " for note in table_notes(table)]
        cross = cross_table(table, "github")
        if cross:
            out += ["", f"#### {table.workload} across configurations", "", cross]
        out.append("")
    # "±" under the tables it explains, "[a, b]" under the comparison that shows it: trial 75
    # read the intervals' legend, printed above the comparison's heading, as the round times'.
    out += [SPREAD_LEGEND, ""] if tables else []
    if comparison is not None:
        out += _markdown_comparison(comparison, baseline, head)
        out += ["", *(f"- {note}" for note in notes)] if notes else []
    if gate:
        out += ["", gate_text(gate)]
        # What the gate named, each regression and each row it could not resolve; its own
        # verdict line is the one above.
        said = [line for line in gate.get("lines", ()) if not line.startswith("regression gate")]
        out += [""] + [f"- {line}" for line in said] if said else []
    return "\n".join(out).rstrip() + "\n"


def gate_text(gate: dict[str, Any]) -> str:
    """``**Regression gate (time 5%): inconclusive** (no regression shown), 8 checked; ...``: the
    session's verdict in one line, with what the terminal's verdict line says after it (trial
    15: a pull request read only "passed" where the terminal named 5 inconclusive rows)."""
    limits = ", ".join(f"{m} {pct:g}%" for m, pct in gate.get("thresholds_pct", {}).items())
    head = f"**Regression gate ({limits or gate['threshold_pct']}): {gate['verdict']}**"
    line = next((x for x in gate.get("lines", ()) if x.startswith("regression gate")), "")
    words = "passed|FAILED|NOTHING CHECKED|INCONCLUSIVE"
    found = re.match(rf"regression gate \([^)]*\): (?:{words})[\s,:-]*(.*)$", line)
    if not found or not found.group(1):
        return head
    rest = found.group(1)  # "(no regression shown), 6 checked; ..." follows its word closely
    return f"{head} {rest}" if rest.startswith("(") else f"{head}, {rest}"


def _markdown_comparison(
    rows: Sequence[ComparisonRow], baseline: str | None, head: str | None
) -> list[str]:
    name = f" `{baseline}`" if baseline else ""
    out = [f"## Comparison with baseline{name}", ""]
    out += [f"Head: `{head}`", ""] if head else []
    out += [comparison_summary(rows), ""]
    if rows:
        out += [comparison_table(rows, "github"), ""]
        out += [interval_legend(one_pair_rows(rows)), ""]
        out += [f"- {note}" for note in comparison_notes(rows)]
        # The line the terminal prints under its notes (trial 70 read "+4.7% [+0.7, +8.9]
        # unchanged" as no change); a pull-request comment is read the same way.
        meaning = unchanged_is_not_none(rows)
        out += [f"- {meaning}"] if meaning else []
    return out


def _cell_json(cell: Cell) -> dict[str, Any]:
    data = asdict(cell)
    data["spread_pct"] = None if cell.spread is None else cell.spread * 100
    del data["spread"]
    return data


def to_json(
    tables: Sequence[WorkloadTable],
    comparison: Sequence[ComparisonRow] | None = None,
    baseline: str | None = None,
    missing: dict[str, str] | None = None,
    gate: dict[str, Any] | None = None,
    plain: Sequence[RoundTime] = (),
    notes: Sequence[str] = (),
    head: str | None = None,
) -> dict[str, Any]:
    """The same tables as JSON-able data, numbers unscaled in each metric's own unit."""
    data: dict[str, Any] = {"format": "pytest-tpu-report", "version": 1, "workloads": []}
    data["round_times"] = [asdict(row) for row in plain]  # seconds
    data["missing_devices"] = dict(missing or {})
    for table in tables:
        entry = {k: v for k, v in asdict(table).items() if k != "rows"}
        entry["rows"] = [
            {
                "id": row.key,
                "label": row.label,
                "config": row.config,
                "devices": {kind: _cell_json(cell) for kind, cell in row.cells.items()},
            }
            for row in table.rows
        ]
        data["workloads"].append(entry)
    if comparison is not None:
        data["comparison"] = {
            "baseline": baseline,
            "head": head,  # None outside --compare-ref
            "interval_pct": roundtimes.INTERVAL_PCT,  # what every row's ci_low..ci_high bounds
            # ... and of what noise, where a row's is one pair of processes' rounds' own.
            "intervals": interval_legend(one_pair_rows(comparison)),
            # The time rows' counts, as the terminal's counts line gives them; each other
            # metric's apart (trial 34: "3 inconclusive" here beside the terminal's 1 and the
            # first calls' 2).
            "counts": comparison_counts(r for r in comparison if r.metric not in OTHER_METRICS),
            "metric_counts": {
                metric: comparison_counts(r for r in comparison if r.metric == metric)
                for metric in OTHER_METRICS
                if any(r.metric == metric for r in comparison)
            },
            "rows": [asdict(row) for row in sort_comparison(comparison)],
            "notes": list(notes),
        }
    if gate:
        data["gate"] = dict(gate)
    return data
