"""The comparison table: baseline, current, change with its interval, verdict, and the notes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from pytest_tpu import units
from pytest_tpu.gate.stats import TAIL, by_one_pair, two_pairs_hide
from pytest_tpu.report.layout import fit, shorten_middle, tabulate_rows, widest
from pytest_tpu.report.model import (
    MAX_WIDTH,
    NAME_MIN,
    OTHER_METRICS,
    VERDICTS,
    ComparisonRow,
    display_name,
    interval_legend,
    legend,
    verdict_word,
)


def sort_comparison(rows: Iterable[ComparisonRow]) -> list[ComparisonRow]:
    """Regressions first, then the doubtful, then the rest; by name within a verdict."""
    order = {v: i for i, v in enumerate(VERDICTS)}
    return sorted(rows, key=lambda r: (order.get(r.verdict, len(order)), r.name, r.kind))


def _comparison_value(row: ComparisonRow, value: float | None) -> str:
    if value is None:
        return ""
    half = (
        (row.ci_high - row.ci_low) / 200
        if row.ci_low is not None and row.ci_high is not None
        else None
    )
    return units.format_quantity(value, row.unit, half)


def comparison_table(
    rows: Sequence[ComparisonRow], fmt: str = "simple", width: int = MAX_WIDTH
) -> str:
    """Baseline, current, change with its interval and verdict; regressions first, marked."""
    head, blocks = comparison_blocks(rows, fmt, width)
    return "\n".join([*head, *(line for block in blocks for line in block)])


def comparison_blocks(
    rows: Sequence[ComparisonRow], fmt: str = "simple", width: int = MAX_WIDTH
) -> tuple[list[str], list[list[str]]]:
    """The comparison table as its heading lines and each row's lines, in ``sort_comparison``
    order (so a caller can colour a row).

    The device column only where some benchmark has a device (its width goes to the names). In
    a terminal ``width`` wide the names are cut in the middle, but never below ``NAME_MIN``:
    where the figures leave less, every row's whole name takes a line above its figures, and
    the names' heading a line above the figures' headings.
    """
    devices = any(r.kind for r in rows)
    usual = _usual_thresholds(rows)
    headers = ["benchmark", "device", "baseline", "current", "change [interval]", "verdict"]
    body = [
        [
            display_name(r.name),
            r.kind,
            _comparison_value(r, r.baseline),
            _comparison_value(r, r.current),
            _change_cell(r),
            verdict_text(verdict_word(r.verdict, r.metric), fmt, r.regression)
            + _threshold_marker(r, usual)
            + _allowance_marker(r),
        ]
        for r in sort_comparison(rows)
    ]
    if not devices:
        headers.pop(1)
        body = [[row[0], *row[2:]] for row in body]
    label_cols = 2 if devices else 1
    whole = tabulate_rows(body, headers, fmt, label_cols)
    longest = max((len(row[0]) for row in body), default=0)
    # ``fit`` cuts the names by what the table is over the width: fine down to NAME_MIN.
    if fmt != "simple" or longest - (widest(whole) - width) >= min(longest, NAME_MIN):
        text = fit(body, headers, fmt, label_cols, shorten_middle, width)
        return _split_table(text.splitlines())
    # Stacked: the figures with an empty name column, each row's name on the line above.
    headers[0] = ""
    stacked = fit([["", *row[1:]] for row in body], headers, fmt, label_cols, width=width)
    head, lines = _split_table(stacked.splitlines())
    names = [row[0] for row in body]
    # The names' heading above the figures' headings, as each name is above its figures (trial
    # 45: a stacked table had no "benchmark" heading).
    blocks = [[name, line[0]] for name, line in zip(names, lines, strict=True)]
    return ["benchmark", *head], blocks


def _usual_thresholds(rows: Iterable[ComparisonRow]) -> dict[str, float | None]:
    """Each metric's most common threshold (in %), or None where two are as common."""
    by_metric: dict[str, Counter[float]] = {}
    for row in rows:
        if row.threshold_pct is not None:
            by_metric.setdefault(row.metric, Counter())[row.threshold_pct] += 1
    usual: dict[str, float | None] = {}
    for metric, counts in by_metric.items():
        (top, n), *rest = counts.most_common()
        usual[metric] = None if rest and rest[0][1] == n else top
    return usual


def _threshold_marker(row: ComparisonRow, usual: dict[str, float | None]) -> str:
    """`` (gate 10%)`` after the verdict of a row judged against a threshold of its own (a
    marker's), unlike most rows of its metric; on a tie every row says its own. (Trial 33: a
    row at +7 % read "unchanged" under a 5 % gate, its marker's 10 % said nowhere.)"""
    own = row.threshold_pct
    if own is None or usual.get(row.metric, own) == own:
        return ""
    return f" (gate {own:g}%)"


def _allowance_marker(row: ComparisonRow) -> str:
    """`` (within 1.00 MiB)`` after an unchanged memory row whose change passes its threshold in
    percent but not the allowance in bytes (trial 34: ``64.0 KiB -> 204 KiB +218.8% unchanged``
    read as a contradiction, its reason only in the notes below)."""
    change, allowance = row.change_pct, row.allowance_bytes
    if row.metric != "memory" or row.verdict != "unchanged" or change is None or not allowance:
        return ""
    if abs(change) <= (row.threshold_pct or 0.0):
        return ""
    return f" (within {units.format_quantity(allowance, row.unit)})"


def _split_table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """A table's heading lines (two in every format used here) and its rows, one line each."""
    return lines[:2], [[line] for line in lines[2:]]


def _change_cell(row: ComparisonRow) -> str:
    """The change with its interval; ``(mean)`` after a row on the mean of all rounds (trial 19:
    its baseline read 169 µs beside 163 µs for the same benchmark elsewhere, unmarked); a
    calibrated one gives the raw change of the baseline and current beside it, which are raw
    times (52 ms -> 71 ms, +12 %). (The machine's drift alone did not explain the difference: a
    ratio of each round to its own kernel run is not the ratio of their locations. Trial 17:
    404 µs -> 375 µs read +6 % "(machine -5 %)".)"""
    change = units.format_change(row.change_pct, row.ci_low, row.ci_high)
    if row.statistic == TAIL:  # baseline, current and change are means, unlike the rows around
        return f"{change} (mean)"
    if row.mode != "calibrated" or row.change_pct is None:
        return change
    if not row.baseline or row.current is None:
        return f"{change} (calibrated)"
    raw = units.signed_rounded((row.current / row.baseline - 1) * 100, 0)
    return f"{change} (raw {raw}%)"  # no wider than the cell was: a wider one stacks the table


def verdict_text(verdict: str, fmt: str, regression: bool) -> str:
    """A regression stands out in plain text (capitals) and in Markdown (bold and a sign); a
    slowdown the threshold tolerates is said plainly, not shouted."""
    if not regression:
        return verdict
    # Capitals in Markdown too: lowercase "slower" is a slowdown that does not fail (trial 35).
    return verdict.upper() if fmt == "simple" else f"⚠️ **{verdict.upper()}**"


def comparison_notes(rows: Sequence[ComparisonRow]) -> list[str]:
    """A note per row that has something to say (how it was measured, why its verdict), once
    for rows that say the same.

    Whole, never cut to the table's width: the end of a note (the smallest change it could
    detect, what a re-measurement found) is the part a reader needs.
    """
    return [f"{who}: {text}" for who, text in noted(rows)]


def noted(rows: Sequence[ComparisonRow]) -> list[tuple[str, str]]:
    """``(who, note)`` per note, in table order: the rows a note is about, and the note."""
    said: dict[str, list[str]] = {}  # note -> the rows that have it, in table order
    for r in sort_comparison(rows):
        if text := note_of(r):
            said.setdefault(text, []).append(row_label(r))
    return [(_who(names), text) for text, names in said.items()]


def row_label(row: ComparisonRow) -> str:
    """A row as the notes name it: its benchmark's name, and its device where it has one."""
    return f"{display_name(row.name)}{f' on {row.kind}' if row.kind else ''}"


def note_of(row: ComparisonRow) -> str:
    """A row's whole note: why its verdict, then how it was measured."""
    return "; ".join(part for part in (row.note, row_details(row)) if part)


def _who(names: Sequence[str]) -> str:
    """The rows a note is about; a note the same for many rows (``--benchmark-disable``) is said
    once, for their number, not once per row."""
    return ", ".join(names) if len(names) <= 2 else f"{len(names)} benchmarks"


def comparison_counts(rows: Iterable[ComparisonRow]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return counts


def comparison_summary(rows: Iterable[ComparisonRow]) -> str:
    """``"1 slower, 2 faster, 5 unchanged, 0 inconclusive, 1 new, 0 missing"`` of the time rows
    (what the gate judges by default); each other metric counted apart, in its own words
    (``"; compile: 2 inconclusive; memory: 1 smaller"``): trial 22 read "7 inconclusive" here
    beside the gate's "5", two of them first calls the gate did not judge."""
    rows = list(rows)
    counts = comparison_counts(r for r in rows if r.metric not in OTHER_METRICS)
    shown = ("slower", "faster", "unchanged", "inconclusive", "new", "missing")
    parts = [f"{counts.pop(v)} {v}" for v in shown]
    parts += [f"{n} {v}" for v, n in counts.items() if n]
    text = ", ".join(parts)
    for metric in OTHER_METRICS:
        of = comparison_counts(r for r in rows if r.metric == metric)
        said = [f"{n} {verdict_word(v, metric)}" for v, n in of.items() if n]
        text += f"; {metric}: {', '.join(said)}" if said else ""
    return text


def row_details(row: ComparisonRow) -> str:
    """How a row was measured, for the notes under a comparison table."""
    said = row.note or ""  # what the verdict's reason already says is not said twice
    # "paired" after a reason that names the paired rounds read as a dangling word.
    repeated = row.mode == "paired" and "paired rounds" in said
    parts = [row.mode] if row.mode and not repeated else []
    if row.statistic == TAIL and TAIL not in said:  # not the statistic of the rows around it
        parts.insert(0, f"baseline, current and change: the {TAIL} (slow calls in the tail)")
    if row.machine_pct is not None:
        parts.append(f"machine {row.machine_pct:+.1f}% vs baseline")
    if row.memory_copy_pct is not None and "copied memory" not in said:
        parts.append(f"memory copies {row.memory_copy_pct:+.1f}%")
    if row.noise_source and row.noise_source not in said:
        parts.append(f"noise: {row.noise_source}")
    detectable = row.detectable_pct
    if detectable is not None and detectable != float("inf") and not _says(said, detectable):
        detects = f"detects {units.format_detectable(detectable)}"
        # Beside "unchanged", a "detects" past the threshold read as a contradiction (trial 29:
        # -0.4% [-4.1, +3.4] unchanged, "detects 6.6%" at 5 %): the two answer different
        # questions, and the note says which one "unchanged" answers.
        past = row.threshold_pct is not None and detectable > row.threshold_pct
        if row.verdict == "unchanged" and past:
            detects += " 4 times in 5; unchanged: its 95% interval stays within the threshold"
        elif past and _rules_slowdown_out(row):
            # So beside a gate line that counts the row as "ruling a slowdown of its threshold
            # out" (trial 38: -0.5% [-5.4, +4.6] inconclusive, "detects 9.6%").
            detects += " 4 times in 5; its 95% interval rules a slowdown of the threshold out"
            # ... and says what keeps it from "unchanged" (trial 44: -1.7 % [-11.7, +9.4]
            # "inconclusive" at 10 %, beside only "rules a slowdown of the threshold out").
            if row.verdict == "inconclusive" and _reaches_speedup(row):
                detects += f", not a speed-up of it ({row.ci_low:+.1f}%)"
        parts.append(detects)
    if row.confirmed is not None and "confirmed" not in said and "held back" not in said:
        parts.append("confirmed by a re-measurement" if row.confirmed else "not confirmed")
    return ", ".join(parts)


def _rules_slowdown_out(row: ComparisonRow) -> bool:
    """Whether a time row's interval stays under its threshold, and the gate takes it at that:
    one pair of processes must rule out more (``gate.lines._may_hide``), and its note says why."""
    if row.higher_is_better or row.ci_high is None or row.threshold_pct is None:
        return False
    if by_one_pair(row.noise_source) or two_pairs_hide(row.noise_source, row.note):
        return False  # new-user trial 73: "rules a slowdown ... out" beside the gate's "neither"
    return row.ci_high < row.threshold_pct


def _reaches_speedup(row: ComparisonRow) -> bool:
    """Whether a time row's interval reaches a speed-up of its threshold."""
    low, threshold = row.ci_low, row.threshold_pct
    return low is not None and threshold is not None and low <= -threshold


def _says(note: str, detectable: float) -> bool:
    """Whether a row's note already gives its detectable change ("they catch 5.8% 4 times in
    5"): unsigned, as no change, interval end or threshold in parentheses is written. (Trial 33:
    an inconclusive row read -0.3% [-3.2%, +2.6%] and its detectable 2.6 % was taken as said,
    so the row gave no smallest change it could have seen.)"""
    figure = re.escape(f"{detectable:.1f}%")
    return re.search(rf"(?<![-+\d.(]){figure}", note) is not None


def one_pair_rows(rows: Sequence[ComparisonRow]) -> bool:
    """Whether some row's interval is one pair of processes' rounds' own (``ONE_PAIR_LEGEND``)."""
    return any(by_one_pair(row.noise_source) for row in rows)


def legend_for(tables: bool, comparison: Sequence[ComparisonRow] | None) -> str:
    """The legend under a report's tables ("±", and "[a, b]" where a comparison shows
    intervals; trial 15), or under a comparison of plain benchmarks, whose rows show "[a, b]"
    with no table and no "±"; "" where there is neither."""
    one_pair = one_pair_rows(comparison or ())
    if tables:
        return legend(comparison is not None, one_pair)
    return interval_legend(one_pair) if comparison else ""
