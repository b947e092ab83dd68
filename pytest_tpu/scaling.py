"""Scaling tables: throughput at 1, 2, ..., N replicas or workers, and the scaling efficiency.

Pure data in, pure data out: no pytest, TensorFlow or numpy import, so the table is unit-tested
with plain numbers and the report writer can call it from anywhere.

Efficiency is measured against the smallest scale that ran (normally 1): at scale ``n``,
``efficiency = (throughput_n / throughput_base) / (n / base) * 100``. 100 % is perfect linear
scaling; weak scaling (global batch = per-replica batch x replicas) is what the workloads do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

AXES: tuple[str, ...] = ("replicas", "workers")
HEADERS = ("workload", "device", "scale", "throughput", "unit", "speedup", "efficiency")

# Throughput fields the suite records (issue 3), best first: each already counts the global batch.
_RATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("samples_per_s", "samples/s"),
    ("tflops", "TFLOP/s"),
)


@dataclass(frozen=True)
class Point:
    """One measurement: a workload's throughput at one scale (replicas or workers)."""

    workload: str
    device: str
    axis: str  # "replicas" | "workers"
    scale: int
    throughput: float
    unit: str


@dataclass(frozen=True)
class ScalingRow:
    """One line of the table: speedup and efficiency relative to its series' smallest scale."""

    workload: str
    device: str
    axis: str
    scale: int
    throughput: float
    unit: str
    speedup: float
    efficiency: float  # percent


def throughput_of(
    extra_info: Mapping[str, object], samples: Sequence[float]
) -> tuple[float, str] | None:
    """A result's throughput and unit: samples/s or TFLOP/s when recorded, else rounds/s.

    ``us_per_sample`` (LSTM) converts to samples/s; with neither, the median round time gives
    rounds per second, which is only comparable across scales when the work per round is fixed.
    """
    for name, unit in _RATE_FIELDS:
        value = extra_info.get(name)
        if isinstance(value, int | float) and value > 0:
            return float(value), unit
    per_sample = extra_info.get("us_per_sample")
    if isinstance(per_sample, int | float) and per_sample > 0:
        return 1e6 / float(per_sample), "samples/s"
    if not samples:
        return None
    median = sorted(samples)[len(samples) // 2]
    return (1.0 / median, "rounds/s") if median > 0 else None


def build(points: Iterable[Point]) -> list[ScalingRow]:
    """Rows per (workload, device, axis), ascending scale, relative to the smallest scale.

    Series with a single scale are left out: there is nothing to scale against. When a scale
    was measured twice (for example by two sessions merged into one store), the last one wins.
    """
    series: dict[tuple[str, str, str], dict[int, Point]] = {}
    for point in points:
        if point.scale >= 1 and point.throughput > 0:
            series.setdefault((point.workload, point.device, point.axis), {})[point.scale] = point
    rows: list[ScalingRow] = []
    for key in sorted(series):
        by_scale = series[key]
        if len(by_scale) > 1:
            rows.extend(_series_rows([by_scale[s] for s in sorted(by_scale)]))
    return rows


def _series_rows(points: list[Point]) -> list[ScalingRow]:
    base = points[0]
    rows = []
    for point in points:
        speedup = point.throughput / base.throughput
        ideal = point.scale / base.scale
        rows.append(
            ScalingRow(
                point.workload,
                point.device,
                point.axis,
                point.scale,
                point.throughput,
                point.unit,
                speedup,
                100.0 * speedup / ideal,
            )
        )
    return rows


def _cells(row: ScalingRow) -> list[str]:
    return [
        row.workload,
        row.device,
        f"{row.scale} {row.axis if row.scale != 1 else row.axis.rstrip('s')}",
        f"{row.throughput:.4g}",
        row.unit,
        f"{row.speedup:.2f}x",
        f"{row.efficiency:.0f}%",
    ]


def render(rows: Sequence[ScalingRow], fmt: str = "simple") -> str:
    """The table as text; ``fmt`` is a tabulate format ("simple", "github" for Markdown)."""
    from tabulate import tabulate  # only when a table is drawn: the plugin loads this module

    return tabulate([_cells(row) for row in rows], headers=HEADERS, tablefmt=fmt)


def to_markdown(rows: Sequence[ScalingRow]) -> str:
    """A Markdown section for ``--tpu-report PATH.md`` ("" when there is nothing to show)."""
    if not rows:
        return ""
    note = (
        "Efficiency = speedup / (scale / smallest scale); 100% is linear scaling "
        "(global batch = per-replica batch x replicas)."
    )
    return f"## Scaling\n\n{render(rows, 'github')}\n\n{note}\n"


def to_dicts(rows: Sequence[ScalingRow]) -> list[dict[str, object]]:
    """The rows as JSON-able dicts for ``--tpu-report PATH.json`` (efficiency in percent)."""
    return [asdict(row) for row in rows]
