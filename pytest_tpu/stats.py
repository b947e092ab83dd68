"""Pure statistics of the regression gate: no pytest or TensorFlow import.

Every benchmark round on a shared machine is its true cost plus interference (other processes,
cache and frequency effects), and interference only ever adds time. So a run's location is the
mean of its fastest rounds (``lower_mean``), not the median or the mean, and the change between
two runs is the ratio of those locations, with a bootstrap interval from the raw samples. When
both runs also measured a fixed calibration kernel, its own ratio tells how much faster or slower
the machine is as a whole; dividing by it is optional (``calibrate``) because on the development
machines a short kernel tracked the benchmarks' drift too poorly to help.

numpy is imported inside the functions that need it, so importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Share of the fastest rounds that locates a run: half keeps most of the data while ignoring the
# slow tail that interference adds.
LOWER_FRACTION = 0.5
CONFIDENCE = 0.95
RESAMPLES = 2000
# Bootstrap work cap (resamples x samples), so a run with very many rounds stays fast.
_MAX_BOOTSTRAP_CELLS = 4_000_000
# One-sided normal quantiles: 95 % significance and 80 % power for the detectable-slowdown figure.
_Z_SIGNIFICANCE = 1.645
_Z_POWER = 0.842


@dataclass(frozen=True)
class Change:
    """Relative change of round time, current vs baseline (+0.05 means 5 % slower).

    ``low``/``high`` bound the change at ``CONFIDENCE``; ``p_slower`` is the bootstrap's share of
    replicates in which the current run is slower (how sure a slowdown is).
    """

    estimate: float
    low: float
    high: float
    p_slower: float
    calibrated: bool = False
    machine: float | None = None  # the calibration kernel's own change (machine speed drift)

    @property
    def width(self) -> float:
        return self.high - self.low


def clean(samples: Sequence[float]) -> list[float]:
    """The positive, finite samples (a zero or NaN round cannot be a duration)."""
    return [float(x) for x in samples if isinstance(x, int | float) and 0 < x < math.inf]


def lower_mean(samples: Sequence[float], fraction: float = LOWER_FRACTION) -> float:
    """Mean of the fastest ``fraction`` of the samples (at least one)."""
    ordered = sorted(clean(samples))
    if not ordered:
        raise ValueError("no valid samples")
    count = max(1, int(len(ordered) * fraction))
    return math.fsum(ordered[:count]) / count


def _boot_log_locations(rng: Any, values: Sequence[float], resamples: int) -> Any:
    """Log of ``lower_mean`` over ``resamples`` bootstrap resamples of ``values``."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    count = max(1, int(len(data) * LOWER_FRACTION))
    draws = data[rng.integers(0, len(data), size=(resamples, len(data)))]
    fastest = np.partition(draws, count - 1, axis=1)[:, :count]
    return np.log(fastest.mean(axis=1))


def _resamples_for(*runs: Sequence[float]) -> int:
    largest = max(len(run) for run in runs)
    return max(200, min(RESAMPLES, _MAX_BOOTSTRAP_CELLS // max(1, largest)))


def _log_ratio(current: Sequence[float], base: Sequence[float]) -> float:
    return math.log(lower_mean(current) / lower_mean(base))


def compare_samples(
    base: Sequence[float],
    current: Sequence[float],
    base_calibration: Sequence[float] = (),
    current_calibration: Sequence[float] = (),
    *,
    calibrate: bool = False,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Change:
    """The change of ``current`` round times relative to ``base``, with its interval.

    Calibration samples (when both sides have at least two) give the machine's own change; with
    ``calibrate`` the result is divided by it. The bootstrap is seeded, so the same samples always
    give the same verdict.
    """
    import numpy as np

    base, current = clean(base), clean(current)
    if len(base) < 2 or len(current) < 2:
        return _unknown(base, current)
    measured = len(clean(base_calibration)) >= 2 and len(clean(current_calibration)) >= 2
    calibrated = calibrate and measured
    runs = [base, current]
    if measured:
        runs += [clean(base_calibration), clean(current_calibration)]
    rng = np.random.default_rng(seed)
    resamples = _resamples_for(*runs)
    boot = [_boot_log_locations(rng, run, resamples) for run in runs]
    log_change = boot[1] - boot[0]
    point = _log_ratio(current, base)
    machine = _log_ratio(runs[3], runs[2]) if measured else None
    if calibrated and machine is not None:
        log_change = log_change - (boot[3] - boot[2])
        point -= machine
    return _change_from(point, log_change, confidence, calibrated, machine)


def _change_from(
    point: float, replicates: Any, confidence: float, calibrated: bool, machine: float | None
) -> Change:
    import numpy as np

    tail = (1 - confidence) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    # Percentile intervals can miss a skewed point estimate; an interval must contain it.
    low, high = min(float(low), point), max(float(high), point)
    return Change(
        estimate=math.expm1(point),
        low=math.expm1(low),
        high=math.expm1(high),
        p_slower=float(np.mean(replicates > 0)),
        calibrated=calibrated,
        machine=None if machine is None else math.expm1(machine),
    )


def _unknown(base: Sequence[float], current: Sequence[float]) -> Change:
    """Too few rounds to say anything: an unbounded interval around the plain ratio."""
    estimate = lower_mean(current) / lower_mean(base) - 1 if base and current else 0.0
    return Change(estimate=estimate, low=-1.0, high=math.inf, p_slower=0.5)


def relative_spread(values: Sequence[float]) -> float:
    """Sample standard deviation of ``values`` relative to their mean (0 for fewer than two)."""
    data = clean(values)
    if len(data) < 2:
        return 0.0
    mean = math.fsum(data) / len(data)
    var = math.fsum((x - mean) ** 2 for x in data) / (len(data) - 1)
    return math.sqrt(var) / mean


def run_locations(
    runs: Sequence[Sequence[float]], calibrations: Sequence[Sequence[float]] = ()
) -> list[float]:
    """Each run's location, divided by its calibration kernel's when every run has one."""
    locations = [lower_mean(run) for run in runs]
    if len(calibrations) == len(runs) and all(len(clean(c)) >= 2 for c in calibrations):
        locations = [
            loc / lower_mean(cal) for loc, cal in zip(locations, calibrations, strict=True)
        ]
    return locations


def detectable_slowdown(run_spread: float, within_width: float = 0.0) -> float:
    """Smallest slowdown caught four times in five when runs differ by ``run_spread``.

    A comparison pits one run against another, so their difference varies by ``sqrt(2)`` times
    the run-to-run spread; add the half-width of one comparison's own interval (``within_width``
    is the full width) and ask for 95 % significance at 80 % power.
    """
    between = math.sqrt(2) * run_spread
    within = within_width / (2 * 1.96)
    return (_Z_SIGNIFICANCE + _Z_POWER) * math.hypot(between, within)
