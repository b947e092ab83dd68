"""Round times of the benchmarks that have no device, for the report files.

Device benchmarks fill the speedup tables; a plain pytest-benchmark test has no device to compare,
and without a section of its own a report of such tests said "No benchmark ran". Each row is the
statistic the gate compares (the mean of the fastest half of the rounds) with its 95 % interval
within this run, from batch means over contiguous blocks of rounds (``gate.stats.estimate``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pytest_tpu import units
from pytest_tpu.gate import stats
from pytest_tpu.results import BenchResult

TITLE = "Round times"
EXPLAINED = (
    "Benchmarks without a device: the mean of the fastest half of each one's rounds, with its "
    "95 % interval within this run (batch means over blocks of rounds)."
)
HEADERS = ["benchmark", "round time", "95% interval", "rounds"]
INTERVAL_PCT = round(stats.CONFIDENCE * 100, 6)  # the level of every interval a report shows


@dataclass(frozen=True)
class RoundTime:
    """One benchmark's round time and interval in seconds (None where it has none)."""

    name: str
    outcome: str
    rounds: int
    iterations: int
    seconds: float | None = None
    low: float | None = None
    high: float | None = None
    error: str | None = None
    # What ``low`` and ``high`` bound, in the JSON too: a reader of the file alone cannot tell a
    # 95 % interval from a range of the rounds (trial 17).
    interval_pct: float = INTERVAL_PCT


def round_times(results: Iterable[BenchResult]) -> list[RoundTime]:
    """A row per benchmark without a device, in the order they ran."""
    return [_row(result) for result in results if not result.kind]


def _row(result: BenchResult) -> RoundTime:
    row = RoundTime(
        result.nodeid, result.outcome, len(result.samples), result.iterations, error=result.error
    )
    found = stats.estimate(result.samples) if result.outcome == "passed" else None
    if found is None:
        return row
    seconds = math.exp(found.log)
    half = stats.t_ppf(1 - (1 - stats.CONFIDENCE) / 2, found.blocks - 1) * found.se
    if not math.isfinite(half):  # too few rounds for an interval: the value alone
        return replace(row, seconds=seconds)
    low, high = math.exp(found.log - half), math.exp(found.log + half)
    return replace(row, seconds=seconds, low=low, high=high)


def cells(row: RoundTime) -> list[str]:
    """The row's cells under ``HEADERS``."""
    if row.seconds is None:
        return [row.name, row.outcome, "", str(row.rounds)]
    if row.low is None or row.high is None:
        return [row.name, units.format_quantity(row.seconds, "s"), "", str(row.rounds)]
    relative = (row.high - row.low) / 2 / row.seconds
    low, high = (units.format_quantity(x, "s", relative) for x in (row.low, row.high))
    shown = units.format_quantity(row.seconds, "s", relative)
    return [row.name, shown, f"[{low}, {high}]", str(row.rounds)]
