"""Speedup tables: one per workload and metric, a column per device, rows per configuration."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_tpu import units
from pytest_tpu.report.layout import fit, shorten, tabulate_rows, widest
from pytest_tpu.report.model import (
    COLD_FIELDS,
    CONFIG_FIELDS,
    CONFIG_HEADERS,
    EXTRA_METRICS,
    KIND_ORDER,
    MAX_WIDTH,
    MEMORY_FIELD,
    WALL_CLOCKS,
    Cell,
    Row,
    WorkloadTable,
)

if TYPE_CHECKING:
    from pytest_tpu.results import BenchResult


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


def _wide(table: WorkloadTable) -> tuple[list[str], list[list[str]]]:
    """One column per device (plus its speedup and cold start): the published shape."""
    factor = table.scale[0]
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
    factor, unit = table.scale
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
    if fmt == "simple" and widest(text) > width:
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
                notes.append(shorten(f"failed: {row.label} on {kind}: {error}", width))
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
    if fmt == "simple" and widest(text) > width:
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
    return tabulate_rows(body, headers, fmt, label_cols=len(fields))


def _spread_of(cell: Cell | None) -> float | None:
    return cell.spread if cell else None


def _column_texts(
    values: list[float | None], spreads: list[float | None], factor: float
) -> list[str]:
    """One column's numbers, scaled, with the decimals its least precise cell allows."""
    cells = [Cell(v, s) if v is not None else None for v, s in zip(values, spreads, strict=True)]
    places = _places(cells, factor)
    return ["" if v is None else f"{v * factor:.{places}f}" for v in values]
