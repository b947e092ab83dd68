"""``--tpu-report-plot``: speedup bars per benchmark and device, and the changes against a baseline.

matplotlib is the optional ``plot`` extra: it is imported inside ``draw`` only, with the Agg
backend, so loading the plugin (or ``pytest --help``) never pays for it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_tpu import units
from pytest_tpu.report import (
    MEMORY_FIELD,
    ComparisonRow,
    Row,
    WorkloadTable,
    format_bytes,
    sort_comparison,
)

SUFFIXES = (".png", ".svg")
INSTALL_HINT = "pip install 'pytest-tpu[plot]'"
# One colour per device kind, the same in every panel; verdicts get their own.
KIND_COLOURS = {"cpu": "#4c72b0", "gpu": "#55a868", "tpu": "#dd8452"}
VERDICT_COLOURS = {"slower": "#c44e52", "faster": "#55a868", "inconclusive": "#ccb974"}
NEUTRAL = "#8c8c8c"


def available() -> bool:
    """Whether matplotlib can be imported, without importing it."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except ValueError:  # a module set to None in sys.modules
        return False


def draw(
    path: Path,
    tables: Sequence[WorkloadTable],
    comparison: Sequence[ComparisonRow] | None = None,
) -> None:
    """Write the picture to ``path`` (PNG or SVG, by suffix): one panel per workload, then one
    for the comparison when there is one."""
    import matplotlib

    matplotlib.use("Agg")  # no display on CI machines; must precede pyplot
    import matplotlib.pyplot as plt

    panels: list[tuple[int, Any]] = [(_bar_count(t), t) for t in panel_tables(tables)]
    if comparison:
        panels.append((len(comparison), list(comparison)))
    if not panels:
        panels.append((1, None))
    heights = [max(1.6, 0.32 * n + 1.0) for n, _ in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(10, sum(heights)),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},  # a panel grows with its rows
    )
    fig.subplots_adjust(hspace=0.6)
    for ax, (_, content) in zip(axes[:, 0], panels, strict=True):
        if hasattr(content, "rows"):  # a table (by shape: modules may be imported anew)
            _speedups(ax, content)
        elif content is None:
            ax.axis("off")
            ax.text(0.5, 0.5, "No benchmark ran", ha="center", va="center", fontsize=14)
        else:
            _changes(ax, content)
    fig.savefig(path, bbox_inches="tight", dpi=110)
    plt.close(fig)


def panel_tables(tables: Sequence[WorkloadTable]) -> list[WorkloadTable]:
    """The tables to draw, one panel each.

    With several devices, one panel per workload (its bars compare the devices). With one
    device there is nothing to compare within a workload, and a workload with one
    configuration would be a panel of one bar: workloads sharing a unit family and direction
    (times, FLOP/s) share a panel instead, each row labelled with its workload.
    """
    kinds = {kind for table in tables for kind in table.kinds}
    if len(kinds) > 1 or len(tables) < 2:
        return list(tables)
    groups: dict[tuple[str, bool], list[WorkloadTable]] = {}
    for table in tables:
        groups.setdefault((units.to_base(table.unit)[0], table.higher_is_better), []).append(table)
    return [_merged(group) if len(group) > 1 else group[0] for group in groups.values()]


def _merged(group: list[WorkloadTable]) -> WorkloadTable:
    """Tables of one unit family as one, values in the family's base unit."""
    base = units.to_base(group[0].unit)[0]
    rows = []
    for table in group:
        factor = units.to_base(table.unit)[1]
        for row in table.rows:
            label = (
                table.workload if row.label == table.workload else f"{table.workload} · {row.label}"
            )
            cells = {kind: _scaled(cell, factor) for kind, cell in row.cells.items()}
            rows.append(Row(f"{table.workload}::{row.key}", label, row.config, cells))
    first = group[0]
    name = " · ".join(table.workload for table in group)
    return WorkloadTable(
        name, first.metric, base, first.higher_is_better, first.reference, first.kinds, tuple(rows)
    )


def _scaled(cell: Any, factor: float) -> Any:
    from dataclasses import replace

    return replace(cell, value=None if cell.value is None else cell.value * factor)


def _bar_count(table: WorkloadTable) -> int:
    return sum(len(row.cells) for row in table.rows)


def _speedups(ax: Any, table: WorkloadTable) -> None:
    """Horizontal bars of the headline per configuration, one per device, speedup written on."""
    factor, unit = units.pick_unit(
        [c.value for r in table.rows for c in r.cells.values() if c.value is not None], table.unit
    )
    height = 0.8 / max(1, len(table.kinds))
    values = []
    for i, row in enumerate(reversed(table.rows)):
        for j, kind in enumerate(table.kinds):
            cell = row.cells.get(kind)
            if cell is None or cell.value is None:
                continue
            y = i + (len(table.kinds) - 1 - j - (len(table.kinds) - 1) / 2) * height
            value = cell.value * factor
            values.append(value)
            ax.barh(
                y, value, height=height * 0.9, color=KIND_COLOURS.get(kind, NEUTRAL), label=kind
            )
            ax.text(value, y, " " + _bar_text(cell, value), va="center", fontsize=8)
    ax.set_yticks(range(len(table.rows)), [row.label for row in reversed(table.rows)])
    if values and max(values) / max(min(values), 1e-300) > 50:
        ax.set_xscale("log")  # CPU vs TPU spans two orders of magnitude
        ax.set_xlim(right=max(values) * 4)  # room for the labels at the bar ends
    else:
        ax.margins(x=0.15)
    ax.set_ylim(-0.7, len(table.rows) - 0.3)
    ax.set_xlabel(f"{unit} ({'higher' if table.higher_is_better else 'lower'} is better)")
    ax.set_title(_speedup_title(table), loc="left", fontsize=10)
    if len(table.kinds) > 1:  # one device: the title says which; a legend adds nothing
        _legend(ax)


def _bar_text(cell: Any, value: float) -> str:
    """``581 (2.0x) · 559 MiB``: the value, its speedup and peak memory when recorded."""
    text = units.format_number(value, value * cell.spread if cell.spread else None)
    speedup = units.format_speedup(cell.speedup)
    text += f" ({speedup})" if speedup else ""
    memory = cell.extras.get(MEMORY_FIELD)
    return text + (f" · {format_bytes(memory)}" if memory is not None else "")


def _speedup_title(table: WorkloadTable) -> str:
    if len(table.kinds) > 1:
        return f"{table.workload}: value (speedup vs {table.reference})"
    return f"{table.workload} on {table.kinds[0]}" if table.kinds else table.workload


def _legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        # Outside the axes: inside, it hides the longest bars, which matter most.
        ax.legend(
            unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8
        )


def _changes(ax: Any, rows: list[ComparisonRow]) -> None:
    """Change against the baseline with its interval; regressions red, on top."""
    ordered = sort_comparison(rows)
    # Verdicts in a column right of the axes (x in axes units, y in data units): next to the
    # bars they would collide with the error bars.
    margin = ax.get_yaxis_transform()
    for i, row in enumerate(reversed(ordered)):
        colour = VERDICT_COLOURS.get(row.verdict, NEUTRAL)
        slower = row.verdict == "slower"
        shout = slower and row.regression  # a slowdown the threshold tolerates is not shouted
        ax.text(
            1.01,
            i,
            row.verdict.upper() if shout else row.verdict,
            transform=margin,
            va="center",
            fontsize=8,
            color=colour if slower else "black",
            weight="bold" if shout else "normal",
        )
        if row.change_pct is None:
            continue
        ax.barh(i, row.change_pct, height=0.6, color=colour)
        if row.ci_low is not None and row.ci_high is not None:
            err = [[row.change_pct - row.ci_low], [row.ci_high - row.change_pct]]
            ax.errorbar(row.change_pct, i, xerr=err, fmt="none", ecolor="black", capsize=3)
    ax.set_ylim(-0.7, len(ordered) - 0.3)
    ax.set_yticks(range(len(ordered)), [_row_label(r) for r in reversed(ordered)])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(
        "change of the metric against the baseline, % (bar: interval; ↑ higher is better, ↓ lower)"
    )
    ax.set_title("comparison with the baseline (regressions in red)", loc="left", fontsize=10)
    ax.margins(x=0.2)


def _row_label(row: ComparisonRow) -> str:
    name = row.name.split("::", 1)[-1]
    arrow = "↑" if row.higher_is_better else "↓"
    return f"{name} · {row.kind} {arrow}"
