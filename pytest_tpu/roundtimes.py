"""Round times of the benchmarks that have no device, for the report files.

Device benchmarks fill the speedup tables; a plain pytest-benchmark test has no device to compare,
and without a section of its own a report of such tests said "No benchmark ran". Each row is the
statistic the gate compares (the mean of the fastest half of the rounds) with its 95 % interval
within this run, from batch means over contiguous blocks of rounds (``gate.stats.estimate``), and
beside it the mean of all rounds but the first, which the gate judges as well: where the two part,
some calls are slow (trial 19: a row "on the mean" read 169 µs in the comparison and 163 µs here).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pytest_tpu import units
from pytest_tpu.gate import stats
from pytest_tpu.gate.history import steady
from pytest_tpu.results import BenchResult

TITLE = "Round times"
EXPLAINED = (
    "Benchmarks without a device: the mean of the fastest half of each one's rounds, with its "
    "95 % interval within this run (batch means over blocks of rounds), and the mean of all "
    "rounds but the first: far above the round time where some calls are slow."
)
# Under --compare-ref the comparison times something else; said where both are shown (trial 35:
# a Markdown report's 26 ms round time beside its comparison's current 33 ms, without a word).
IN_TURNS = (
    "These rounds were taken in turns with the base's process; the comparison below times its "
    "paired rounds alone (the mean of their middle half), so its current column can differ."
)
HEADERS = ["benchmark", "round time", "95% interval", "mean of all rounds", "rounds"]
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
    # The mean of all rounds but the first (``gate.history.steady``) and its interval.
    mean: float | None = None
    mean_low: float | None = None
    mean_high: float | None = None
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
    if result.outcome != "passed":
        return row
    seconds, low, high = _located(stats.estimate(result.samples))
    mean, mean_low, mean_high = _located(stats.estimate(steady(result.samples), stats.mean))
    return replace(
        row, seconds=seconds, low=low, high=high, mean=mean, mean_low=mean_low, mean_high=mean_high
    )


def _located(found: stats.Estimate | None) -> tuple[float | None, float | None, float | None]:
    """An estimate's value in seconds and its 95 % interval (None where too few rounds)."""
    if found is None:
        return None, None, None
    value = math.exp(found.log)
    half = stats.t_ppf(1 - (1 - stats.CONFIDENCE) / 2, found.blocks - 1) * found.se
    if not math.isfinite(half):  # too few rounds for an interval: the value alone
        return value, None, None
    return value, math.exp(found.log - half), math.exp(found.log + half)


def _shown(value: float, low: float | None, high: float | None) -> tuple[str, str]:
    """A value to the digits its interval supports, and the interval ("" without one)."""
    if low is None or high is None:
        return units.format_quantity(value, "s"), ""
    relative = (high - low) / 2 / value
    ends = (units.format_quantity(x, "s", relative) for x in (low, high))
    return units.format_quantity(value, "s", relative), "[{}, {}]".format(*ends)


def cells(row: RoundTime) -> list[str]:
    """The row's cells under ``HEADERS``."""
    if row.seconds is None:
        return [row.name, row.outcome, "", "", str(row.rounds)]
    shown, interval = _shown(row.seconds, row.low, row.high)
    mean = " ".join(_shown(row.mean, row.mean_low, row.mean_high)).strip() if row.mean else ""
    return [row.name, shown, interval, mean, str(row.rounds)]
