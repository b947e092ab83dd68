"""Results → speedup tables, comparison tables, Markdown and JSON.

Pure: plain data in, strings and dicts out; no pytest import (``BenchResult`` is only read
through its attributes), so every builder is tested on hand-made rows without TensorFlow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_tpu import roundtimes, units
from pytest_tpu.gate.stats import TAIL
from pytest_tpu.roundtimes import RoundTime

if TYPE_CHECKING:
    from pytest_tpu.results import BenchResult

MAX_WIDTH = 100  # the terminal's width where the caller does not know it (files, tests)
# A comparison row's name is cut no shorter than this; where the figures leave it less, each
# row's name goes on a line of its own above its figures (trial 14: "test_a…mory)").
NAME_MIN = 24
# pytest-benchmark's default timer, as its options name it: tables of it say nothing more.
WALL_CLOCKS = ("", "perf_counter", "time.perf_counter", "default_timer")
SPREAD_LEGEND = (
    "±: the rounds' spread (standard deviation over the mean), not an interval; "
    "[a, b]: 95% intervals of a change"
)
# The device kinds in the order people read them (the same order as options.KINDS, which is not
# imported here because options imports pytest).
KIND_ORDER = ("cpu", "gpu", "tpu")
# Fields that identify a configuration, with how a row label spells them.
CONFIG_FIELDS = {"n": "N={}", "dtype": "{}", "batch_size": "batch {}"}
CONFIG_HEADERS = {"n": "N", "dtype": "dtype", "batch_size": "batch"}
# The one-off first call, under whichever name the workload records it.
COLD_FIELDS = {"cold_s": "cold", "first_epoch_s": "1st epoch", "first_step_s": "1st step"}
# Secondary figures for the cross-configuration table, with their units.
EXTRA_METRICS = {
    "epoch_s": ("epoch", "s"),
    "step_ms": ("step", "ms"),
    "us_per_sample": ("per sample", "µs"),
    "tflops": ("", "TFLOP/s"),
    "samples_per_s": ("samples/s", ""),
    "latency_p50_ms": ("p50", "ms"),
    "latency_p90_ms": ("p90", "ms"),
    "pct_peak": ("% peak", ""),
    "achieved_tflops": ("model", "TFLOP/s"),
    "peak_memory_bytes": ("peak mem", "B"),
}
MEMORY_FIELD = "peak_memory_bytes"
METRIC_NAMES = {
    "tflops": "FLOP/s",
    "epoch_s": "epoch time",
    "step_ms": "step time",
    "samples_per_s": "throughput",
}
VERDICTS = (
    "slower",
    "inconclusive",
    "faster",
    "unchanged",
    "new",
    "missing",
    "failed",
    "unmeasured",
    "incompatible",
)
# A memory row's verdict is said in its own words: less memory is not "faster". The data (JSON,
# counts) keeps the one vocabulary, where "slower" means worse.
MEMORY_WORDS = {"slower": "larger", "faster": "smaller"}


def verdict_word(verdict: str, metric: str) -> str:
    return MEMORY_WORDS.get(verdict, verdict) if metric == "memory" else verdict


@dataclass(frozen=True)
class Cell:
    """One benchmark configuration measured on one device."""

    value: float | None  # the headline, in the table's unit; None when the test failed
    spread: float | None = None  # relative (0.03 = 3 %)
    speedup: float | None = None  # against the table's reference device
    cold: float | None = None  # seconds of the first call (trace + compile)
    extras: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Row:
    """One benchmark configuration (node id without the device) across devices."""

    key: str
    label: str
    config: dict[str, Any]
    cells: dict[str, Cell]


@dataclass(frozen=True)
class WorkloadTable:
    """The speedup table of one workload (one test function and headline metric)."""

    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    reference: str | None
    kinds: tuple[str, ...]
    rows: tuple[Row, ...]
    cold_field: str | None = None
    missing: dict[str, str] = field(default_factory=dict)
    timer: str = ""  # pytest-benchmark's timer, where it is not the wall clock

    @property
    def title(self) -> str:
        """``test_matmul: FLOP/s in TFLOP/s (higher is better), speedup vs cpu``; a timer other
        than the wall clock is named (trial 15: CPU time of all threads, 45 ms, read as a 23 ms
        wall-clock call)."""
        name = METRIC_NAMES.get(self.metric, self.metric)
        unit = _table_unit(self)[1]
        better = "higher" if self.higher_is_better else "lower"
        vs = f", speedup vs {self.reference}" if self.reference and len(self.kinds) > 1 else ""
        timer = f", timer {self.timer}" if self.timer else ""
        return f"{self.workload}: {name} in {unit} ({better} is better){vs}{timer}"


@dataclass(frozen=True)
class ComparisonRow:
    """One benchmark on one device, this run against the baseline (from ``compare.py``).

    ``change_pct`` is ``(current - baseline) / baseline * 100`` of the metric itself, so for a
    time a positive change is slower and for FLOP/s it is faster; ``verdict`` says which.
    ``ci_low``/``ci_high`` bound ``change_pct`` (in %). Values are in ``unit``.
    """

    name: str  # node id (or name) of the benchmark
    kind: str  # device kind
    metric: str
    unit: str
    higher_is_better: bool
    baseline: float | None
    current: float | None
    change_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # one of VERDICTS
    note: str = ""
    # How the gate measured the change: "calibrated", "raw" or "paired" (--compare-ref), the
    # machine's own drift since the baseline, where the noise estimate came from, and the
    # smallest slowdown the comparison would catch 4 times in 5 (all in %).
    mode: str = ""
    machine_pct: float | None = None
    noise_source: str = ""
    detectable_pct: float | None = None
    confirmed: bool | None = None
    regression: bool = False  # this row fails the gate
    confidence_pct: float | None = None  # how sure the comparison is of a slowdown (in %)
    # What baseline, current and change measure, for a time row: the mean of the fastest half
    # (raw), the middle half of paired ratios (paired), ratios to the calibration kernel
    # (calibrated), or the mean of all rounds (a row failed on slow calls in the tail).
    statistic: str = ""


# ---------------------------------------------------------------- building speedup tables


def kind_sort_key(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def workload_of(result: BenchResult) -> str:
    """The test function a result belongs to (``test_cnn``), class included when there is one."""
    head = result.nodeid.partition("[")[0]
    if "::" in head:
        return head.split("::", 1)[1]
    return result.name.partition("[")[0] or head


def config_of(result: BenchResult) -> dict[str, Any]:
    """The configuration fields (N, dtype, batch size, other params), without the device."""
    config = {k: result.extra_info[k] for k in CONFIG_FIELDS if k in result.extra_info}
    for key, value in result.params.items():
        # A parameter whose value is the device kind names the device, not the configuration.
        if key != "accelerator" and value != result.kind and key not in config:
            config[key] = value
    return config


def label_of(config: dict[str, Any], fallback: str = "") -> str:
    """``N=512 float32``; ``fallback`` (the workload's name) for a benchmark without
    parameters, never a placeholder such as "(default)"."""
    parts = [CONFIG_FIELDS.get(key, f"{key}={{}}").format(value) for key, value in config.items()]
    return " ".join(parts) or fallback


def _cell(result: BenchResult) -> Cell:
    if result.outcome != "passed" or result.headline is None:
        return Cell(value=None, error=result.error or "failed")
    extra = result.extra_info
    cold = next((float(extra[k]) for k in COLD_FIELDS if _is_number(extra.get(k))), None)
    extras = {k: float(extra[k]) for k in EXTRA_METRICS if _is_number(extra.get(k))}
    spread = units.relative_spread(result.samples)
    return Cell(value=result.headline, spread=spread, cold=cold, extras=extras)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _with_speedups(row: Row, reference: str | None, higher_is_better: bool) -> Row:
    ref = row.cells.get(reference or "")
    if ref is None or not ref.value:
        return row
    cells = {}
    for kind, cell in row.cells.items():
        ratio = None
        if kind != reference and cell.value:
            ratio = cell.value / ref.value if higher_is_better else ref.value / cell.value
        cells[kind] = Cell(cell.value, cell.spread, ratio, cell.cold, cell.extras, cell.error)
    return Row(row.key, row.label, row.config, cells)


def _pick_reference(kinds: Sequence[str], wanted: str) -> str | None:
    return wanted if wanted in kinds else (kinds[0] if kinds else None)


def _missing_for(kinds: Sequence[str], all_kinds: Iterable[str]) -> dict[str, str]:
    """Kinds measured elsewhere in the session but without a column here."""
    return {kind: "no result for this workload" for kind in all_kinds if kind not in kinds}


def build_tables(results: Iterable[BenchResult], reference: str = "cpu") -> list[WorkloadTable]:
    """One speedup table per workload and headline metric, rows in the order they ran.

    ``reference`` is the device the speedups are relative to; a table without it uses its first
    device.
    """
    groups: dict[tuple[str, str], list[BenchResult]] = {}
    for result in results:
        groups.setdefault((workload_of(result), result.metric), []).append(result)
    all_kinds = sorted({r.kind for rs in groups.values() for r in rs if r.kind}, key=kind_sort_key)
    tables = []
    for (workload, _), members in groups.items():
        table = _build_table(workload, members, reference)
        # Devices absent from the machine are named once per session (``missing_line``); a
        # table names only the kinds that ran elsewhere in the session but not here.
        gone = _missing_for(table.kinds, all_kinds)
        tables.append(replace(table, missing=gone))
    return tables


def missing_line(missing: dict[str, str]) -> str | None:
    """``not measured: gpu: <why>; tpu: <why>``, once per session, or None."""
    if not missing:
        return None
    ordered = sorted(missing.items(), key=lambda item: kind_sort_key(item[0]))
    return "not measured: " + "; ".join(f"{kind}: {why}" for kind, why in ordered)


def _build_table(workload: str, members: list[BenchResult], wanted: str) -> WorkloadTable:
    configs: dict[str, dict[str, Any]] = {}
    cells: dict[str, dict[str, Cell]] = {}
    for result in members:
        configs.setdefault(result.base_id, config_of(result))
        cells.setdefault(result.base_id, {})[result.kind] = _cell(result)
    kinds = tuple(sorted({r.kind for r in members}, key=kind_sort_key))
    first = members[0]
    reference = _pick_reference(kinds, wanted)
    rows = tuple(
        _with_speedups(
            Row(key, label_of(configs[key], workload), configs[key], cells[key]),
            reference,
            first.higher_is_better,
        )
        for key in configs
    )
    cold = next((k for k in COLD_FIELDS if any(k in r.extra_info for r in members)), None)
    timer = str(first.options.get("timer") or "")
    return WorkloadTable(
        workload,
        first.metric,
        first.unit,
        first.higher_is_better,
        reference,
        kinds,
        rows,
        cold,
        timer="" if timer in WALL_CLOCKS else timer,
    )


def varying_fields(table: WorkloadTable) -> list[str]:
    """Configuration fields that take more than one value across the table's rows."""
    keys = dict.fromkeys(k for row in table.rows for k in row.config)
    return [k for k in keys if len({repr(row.config.get(k)) for row in table.rows}) > 1]


# ---------------------------------------------------------------- rendering


def _tabulate(rows: list[list[str]], headers: list[str], fmt: str, label_cols: int = 1) -> str:
    import tabulate

    align = ["left"] * label_cols + ["right"] * (len(headers) - label_cols)
    # tabulate widens every column to its header plus two spaces; the column gap already
    # separates them, and those spaces cost a nine-column table its 100-column budget.
    saved, tabulate.MIN_PADDING = tabulate.MIN_PADDING, 0
    try:
        return tabulate.tabulate(rows, headers, tablefmt=fmt, colalign=align, disable_numparse=True)
    finally:
        tabulate.MIN_PADDING = saved


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def _shorten_middle(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width``: names of one file share their start and differ
    at the end (``test_train_loop`` and ``test_train_loop_pedantic``, ``[cpu-512]``)."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()), default=0)


def fit(
    rows: list[list[str]],
    headers: list[str],
    fmt: str,
    label_cols: int = 1,
    shorten: Callable[[str, int], str] = _shorten,
    width: int = MAX_WIDTH,
) -> str:
    """The table, its first column shortened until every line fits ``width`` columns.

    Only the terminal needs this; Markdown tables wrap in the browser and keep full labels.
    """
    text = _tabulate(rows, headers, fmt, label_cols)
    over = _widest(text) - width
    if over <= 0 or fmt != "simple" or not rows:
        return text
    width = max(12, max(len(r[0]) for r in rows) - over)
    short = [[shorten(r[0], width), *r[1:]] for r in rows]
    return _tabulate(short, headers, fmt, label_cols)


def _places(cells: Iterable[Cell | None], factor: float) -> int:
    """Decimals for a column: the fewest any of its cells justifies, so digits line up."""
    places = [
        units.decimals_for(c.value * factor, abs(c.value * factor) * c.spread if c.spread else None)
        for c in cells
        if c is not None and c.value is not None
    ]
    return min(places, default=0)


def _value_text(cell: Cell | None, factor: float, places: int) -> str:
    if cell is None:
        return ""
    if cell.value is None:
        return "failed"
    return f"{cell.value * factor:.{places}f} {units.format_spread(cell.spread)}".strip()


def _cold_text(cell: Cell | None) -> str:
    return units.format_quantity(cell.cold, "s") if cell and cell.cold is not None else ""


def _has_memory(table: WorkloadTable) -> bool:
    return any(MEMORY_FIELD in c.extras for r in table.rows for c in r.cells.values())


def _memory_text(cell: Cell | None) -> str:
    value = cell.extras.get(MEMORY_FIELD) if cell else None
    return format_bytes(value) if value is not None else ""


def format_bytes(value: float) -> str:
    """``559 MiB``, ``1.2 GiB``: three significant figures in binary units."""
    factor, unit = units.pick_unit([value], "B")
    return f"{units.format_number(value * factor)} {unit}"


def _table_unit(table: WorkloadTable) -> tuple[float, str]:
    values = [c.value for r in table.rows for c in r.cells.values() if c.value is not None]
    return units.pick_unit(values, table.unit)


def _wide(table: WorkloadTable) -> tuple[list[str], list[list[str]]]:
    """One column per device (plus its speedup and cold start): the published shape."""
    factor = _table_unit(table)[0]
    ref, cold = table.reference, table.cold_field
    places = {k: _places((r.cells.get(k) for r in table.rows), factor) for k in table.kinds}
    headers = ["benchmark"]
    for kind in table.kinds:
        headers.append(kind)
        if ref and kind != ref:
            headers.append(f"{kind}/{ref}")
    headers += [f"{kind} {COLD_FIELDS[cold]}" for kind in table.kinds] if cold else []
    memory = _has_memory(table)
    headers += [f"{kind} peak mem" for kind in table.kinds] if memory else []
    rows = []
    for row in table.rows:
        line = [row.label]
        for kind in table.kinds:
            cell = row.cells.get(kind)
            line.append(_value_text(cell, factor, places[kind]))
            if ref and kind != ref:
                line.append(units.format_speedup(cell.speedup) if cell else "")
        line += [_cold_text(row.cells.get(kind)) for kind in table.kinds] if cold else []
        line += [_memory_text(row.cells.get(kind)) for kind in table.kinds] if memory else []
        rows.append(line)
    return headers, rows


def _long(table: WorkloadTable) -> tuple[list[str], list[list[str]]]:
    """One row per configuration and device, for when the wide table would not fit."""
    factor, unit = _table_unit(table)
    places = _places((c for r in table.rows for c in r.cells.values()), factor)
    headers = ["benchmark", "device", unit or table.metric, f"vs {table.reference}"]
    headers += [COLD_FIELDS[table.cold_field]] if table.cold_field else []
    memory = _has_memory(table)
    headers += ["peak mem"] if memory else []
    rows = []
    for row in table.rows:
        for kind, cell in sorted(row.cells.items(), key=lambda kv: kind_sort_key(kv[0])):
            value = _value_text(cell, factor, places)
            line = [row.label, kind, value, units.format_speedup(cell.speedup)]
            line += [_cold_text(cell)] if table.cold_field else []
            line += [_memory_text(cell)] if memory else []
            rows.append(line)
    return headers, rows


def speedup_table(table: WorkloadTable, fmt: str = "simple", width: int = MAX_WIDTH) -> str:
    """The speedup table as text (``simple``, for a terminal ``width`` wide) or GitHub Markdown
    (``github``)."""
    headers, rows = _wide(table)
    text = fit(rows, headers, fmt, width=width)
    if fmt == "simple" and _widest(text) > width:
        headers, rows = _long(table)
        text = fit(rows, headers, fmt, label_cols=2, width=width)
    return text


def table_notes(table: WorkloadTable, width: int = MAX_WIDTH) -> list[str]:
    """Lines under a table: devices without a column, and why each failed cell failed."""
    notes = []
    if table.missing:
        named = "; ".join(f"{kind}: {why}" for kind, why in table.missing.items())
        notes.append(f"not measured: {named}")
    for row in table.rows:
        for kind, cell in row.cells.items():
            if cell.error:
                error = _unqualified(cell.error)
                notes.append(_shorten(f"failed: {row.label} on {kind}: {error}", width))
    return notes


def _unqualified(error: str) -> str:
    """An error without its type's module path: in a line cut to the terminal's width,
    ``tensorflow.python.framework.errors_impl.`` took the room of the error's name."""
    kind, sep, message = error.partition(": ")
    if not sep or " " in kind:
        return error
    return f"{kind.rpartition('.')[2]}{sep}{message}"


def _metric_columns(table: WorkloadTable) -> list[tuple[str, str, str]]:
    """(field, short name, unit) of the headline and of one secondary figure, if recorded."""
    short = EXTRA_METRICS.get(table.metric, (table.metric, table.unit))[0]
    columns = [(table.metric, short, table.unit)]
    present = {k for row in table.rows for c in row.cells.values() for k in c.extras}
    extra = next(
        (k for k in EXTRA_METRICS if k in present and k not in (table.metric, MEMORY_FIELD)), None
    )
    if extra:
        columns.append((extra, *EXTRA_METRICS[extra]))
    return columns


def _figure(cell: Cell | None, name: str, headline: str) -> float | None:
    if cell is None or cell.value is None:
        return None
    return cell.value if name == headline else cell.extras.get(name)


def _sort_value(value: Any) -> tuple[int, float, str]:
    return (0, float(value), "") if _is_number(value) else (1, 0.0, str(value))


def cross_table(table: WorkloadTable, fmt: str = "simple", width: int = MAX_WIDTH) -> str | None:
    """Headline (and step/epoch time) per varying parameter and device, or None.

    The shape of the published CNN comparison: epoch time per batch size, GPU next to TPU.
    """
    fields = varying_fields(table)
    if not fields or len(table.rows) < 2:
        return None
    columns = _metric_columns(table)
    text = _cross(table, fields, columns, fmt)
    if fmt == "simple" and _widest(text) > width:
        text = _cross(table, fields, columns[:1], fmt)
    return text


def _cross(
    table: WorkloadTable, fields: list[str], columns: list[tuple[str, str, str]], fmt: str
) -> str:
    ordered = sorted(table.rows, key=lambda r: [_sort_value(r.config.get(f)) for f in fields])
    headers = [CONFIG_HEADERS.get(f, f) for f in fields]
    body = [[str(row.config.get(f, "")) for f in fields] for row in ordered]
    for name, short, unit in columns:
        cells = [
            [_figure(row.cells.get(k), name, table.metric) for row in ordered] for k in table.kinds
        ]
        factor, shown = units.pick_unit([v for col in cells for v in col if v is not None], unit)
        shown = "" if shown == short else shown  # "samples/s" names itself
        for kind, column in zip(table.kinds, cells, strict=True):
            headers.append(" ".join(p for p in (kind, short, shown) if p))
            spreads = [_spread_of(row.cells.get(kind)) for row in ordered]
            for line, text in zip(body, _column_texts(column, spreads, factor), strict=True):
                line.append(text)
    return _tabulate(body, headers, fmt, label_cols=len(fields))


def _spread_of(cell: Cell | None) -> float | None:
    return cell.spread if cell else None


def _column_texts(
    values: list[float | None], spreads: list[float | None], factor: float
) -> list[str]:
    """One column's numbers, scaled, with the decimals its least precise cell allows."""
    cells = [Cell(v, s) if v is not None else None for v, s in zip(values, spreads, strict=True)]
    places = _places(cells, factor)
    return ["" if v is None else f"{v * factor:.{places}f}" for v in values]


# ---------------------------------------------------------------- comparison


def sort_comparison(rows: Iterable[ComparisonRow]) -> list[ComparisonRow]:
    """Regressions first, then the doubtful, then the rest; by name within a verdict."""
    order = {v: i for i, v in enumerate(VERDICTS)}
    return sorted(rows, key=lambda r: (order.get(r.verdict, len(order)), r.name, r.kind))


def _display_name(name: str) -> str:
    return name.split("::", 1)[1] if "::" in name else name


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
    where the figures leave less, every row's whole name takes a line above its figures.
    """
    devices = any(r.kind for r in rows)
    headers = ["benchmark", "device", "baseline", "current", "change [interval]", "verdict"]
    body = [
        [
            _display_name(r.name),
            r.kind,
            _comparison_value(r, r.baseline),
            _comparison_value(r, r.current),
            _change_cell(r),
            verdict_text(verdict_word(r.verdict, r.metric), fmt, r.regression),
        ]
        for r in sort_comparison(rows)
    ]
    if not devices:
        headers.pop(1)
        body = [[row[0], *row[2:]] for row in body]
    label_cols = 2 if devices else 1
    whole = _tabulate(body, headers, fmt, label_cols)
    longest = max((len(row[0]) for row in body), default=0)
    # ``fit`` cuts the names by what the table is over the width: fine down to NAME_MIN.
    if fmt != "simple" or longest - (_widest(whole) - width) >= min(longest, NAME_MIN):
        text = fit(body, headers, fmt, label_cols, _shorten_middle, width)
        return _split_table(text.splitlines())
    # Stacked: the figures with an empty name column, each row's name on the line above.
    headers[0] = ""
    stacked = fit([["", *row[1:]] for row in body], headers, fmt, label_cols, width=width)
    head, lines = _split_table(stacked.splitlines())
    names = [row[0] for row in body]
    return head, [[name, line[0]] for name, line in zip(names, lines, strict=True)]


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
    return verdict.upper() if fmt == "simple" else f"⚠️ **{verdict}**"


def comparison_notes(rows: Sequence[ComparisonRow]) -> list[str]:
    """A note per row that has something to say (how it was measured, why its verdict), once
    for rows that say the same.

    Whole, never cut to the table's width: the end of a note (the smallest change it could
    detect, what a re-measurement found) is the part a reader needs.
    """
    said: dict[str, list[str]] = {}  # note -> the rows that have it, in table order
    for r in sort_comparison(rows):
        text = "; ".join(part for part in (r.note, row_details(r)) if part)
        if text:
            said.setdefault(text, []).append(
                f"{_display_name(r.name)}{f' on {r.kind}' if r.kind else ''}"
            )
    return [f"{_who(names)}: {text}" for text, names in said.items()]


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
    """``"1 slower, 2 faster, 5 unchanged, 0 inconclusive, 1 new, 0 missing"``; memory rows
    counted apart, in their own words (``"; memory: 1 smaller"``)."""
    rows = list(rows)
    counts = comparison_counts(r for r in rows if r.metric != "memory")
    shown = ("slower", "faster", "unchanged", "inconclusive", "new", "missing")
    parts = [f"{counts.pop(v)} {v}" for v in shown]
    parts += [f"{n} {v}" for v, n in counts.items() if n]
    memory = comparison_counts(r for r in rows if r.metric == "memory")
    said = [f"{n} {verdict_word(v, 'memory')}" for v, n in memory.items() if n]
    return ", ".join(parts) + (f"; memory: {', '.join(said)}" if said else "")


# ---------------------------------------------------------------- files


def to_markdown(
    tables: Sequence[WorkloadTable],
    comparison: Sequence[ComparisonRow] | None = None,
    baseline: str | None = None,
    missing: dict[str, str] | None = None,
    gate: dict[str, Any] | None = None,
    plain: Sequence[RoundTime] = (),
) -> str:
    """GitHub-flavoured Markdown for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment;
    devices missing from the machine are named once, under the heading. ``plain``: the round
    times of benchmarks without a device."""
    out = ["## pytest-tpu benchmarks", ""]
    line = missing_line(missing or {})
    out += [line, ""] if line else []
    if not tables and not comparison and not plain:
        out += ["No benchmark ran.", ""]
    if plain:
        body = [roundtimes.cells(row) for row in plain]
        out += [f"### {roundtimes.TITLE}", "", roundtimes.EXPLAINED, ""]
        out += [_tabulate(body, roundtimes.HEADERS, "github"), ""]
        out += [f"failed: {row.name}: {row.error}  " for row in plain if row.error]
    for table in tables:
        out += [f"### {table.title}", "", speedup_table(table, "github"), ""]
        out += [f"{note}  " for note in table_notes(table)]
        cross = cross_table(table, "github")
        if cross:
            out += ["", f"#### {table.workload} across configurations", "", cross]
        out.append("")
    out += [SPREAD_LEGEND, ""] if tables else []
    if comparison is not None:
        out += _markdown_comparison(comparison, baseline)
    if gate:
        out += ["", gate_text(gate)]
        # What the gate named, each regression and each row it could not resolve; its own
        # verdict line is the one above.
        said = [line for line in gate.get("lines", ()) if not line.startswith("regression gate")]
        out += [""] + [f"- {line}" for line in said] if said else []
    return "\n".join(out).rstrip() + "\n"


def gate_text(gate: dict[str, Any]) -> str:
    """``**Regression gate (time 5%): passed**, 8 checked; 5 inconclusive: ...``: the session's
    verdict in one line, with what the terminal's verdict line says after it (trial 15: a pull
    request read only "passed" where the terminal named 5 inconclusive rows)."""
    limits = ", ".join(f"{m} {pct:g}%" for m, pct in gate.get("thresholds_pct", {}).items())
    head = f"**Regression gate ({limits or gate['threshold_pct']}): {gate['verdict']}**"
    line = next((x for x in gate.get("lines", ()) if x.startswith("regression gate")), "")
    found = re.match(r"regression gate \([^)]*\): (?:passed|FAILED|NOTHING CHECKED)\W*(.*)$", line)
    return f"{head}, {found.group(1)}" if found and found.group(1) else head


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
    if row.noise_source and row.noise_source not in said:
        parts.append(f"noise: {row.noise_source}")
    detectable = row.detectable_pct
    if detectable is not None and detectable != float("inf") and f"{detectable:.1f}%" not in said:
        parts.append(f"detects {units.format_detectable(detectable)}")
    if row.confirmed is not None and "confirmed" not in said:
        parts.append("confirmed by a re-measurement" if row.confirmed else "not confirmed")
    return ", ".join(parts)


def _markdown_comparison(rows: Sequence[ComparisonRow], baseline: str | None) -> list[str]:
    name = f" `{baseline}`" if baseline else ""
    out = [f"## Comparison with baseline{name}", "", comparison_summary(rows), ""]
    if rows:
        out += [comparison_table(rows, "github"), ""]
        out += [f"- {note}" for note in comparison_notes(rows)]
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
            "interval_pct": roundtimes.INTERVAL_PCT,  # what every row's ci_low..ci_high bounds
            "counts": comparison_counts(comparison),
            "rows": [asdict(row) for row in sort_comparison(comparison)],
        }
    if gate:
        data["gate"] = dict(gate)
    return data
