"""Pure statistics of the regression gate: no pytest or TensorFlow import.

Every benchmark round on a shared machine is its true cost plus interference (other processes,
cache and frequency effects), and interference only ever adds time. So a run's location is the
mean of its fastest rounds (``lower_mean``), not the median or the mean, and the change between
two runs is the ratio of those locations, with a bootstrap interval from the raw samples.

The machine's speed also drifts (about 2 % between sessions here, on a timescale of seconds), so
when both runs timed a fixed calibration kernel right before every round (``paired``), the
decision is made on the per-round ratios ``bench_i / ref_i`` instead: drift slows both halves of a
pair alike and cancels. Interference can hit either half, so the ratios' tails are on both sides
and their location is the mean of the middle half (``midmean``), robust yet less noisy than the
median. The kernel's own change is always reported as the machine's drift.

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


def round_ratios(samples: Sequence[float], calibration: Sequence[float]) -> list[float]:
    """Per-round ``bench_i / ref_i`` for the rounds where both are valid durations."""
    return [
        bench / ref
        for bench, ref in zip(samples, calibration, strict=False)
        if clean([bench]) and clean([ref])
    ]


def midmean(values: Sequence[float]) -> float:
    """Mean of the middle half of ``values`` (a quarter trimmed from each end)."""
    ordered = sorted(clean(values))
    if not ordered:
        raise ValueError("no valid samples")
    cut = len(ordered) // 4
    middle = ordered[cut : len(ordered) - cut]
    return math.fsum(middle) / len(middle)


def _boot_log_midmeans(rng: Any, values: Sequence[float], resamples: int) -> Any:
    """Log of ``midmean`` over ``resamples`` bootstrap resamples of ``values``."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    cut = len(data) // 4
    draws = np.sort(data[rng.integers(0, len(data), size=(resamples, len(data)))], axis=1)
    return np.log(draws[:, cut : len(data) - cut].mean(axis=1))


def _machine(base: Sequence[float], current: Sequence[float]) -> float | None:
    """The calibration kernel's own log change, when both sides timed it at least twice."""
    if len(clean(base)) < 2 or len(clean(current)) < 2:
        return None
    return math.log(lower_mean(current) / lower_mean(base))


def compare_samples(
    base: Sequence[float],
    current: Sequence[float],
    base_calibration: Sequence[float] = (),
    current_calibration: Sequence[float] = (),
    *,
    paired: bool = False,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Change:
    """The change of ``current`` round times relative to ``base``, with its interval.

    With ``paired`` (each side's calibration timed right before each of its rounds, aligned 1:1
    with the samples) the change is that of the per-round ratios' midmean (``calibrated``);
    otherwise that of the raw samples' ``lower_mean``. The bootstrap is seeded, so the same
    samples always give the same verdict.
    """
    machine = _machine(base_calibration, current_calibration)
    if paired:
        base_ratios = round_ratios(base, base_calibration)
        current_ratios = round_ratios(current, current_calibration)
        if len(base_ratios) >= 2 and len(current_ratios) >= 2:
            return _bootstrap(base_ratios, current_ratios, True, machine, confidence, seed)
    base, current = clean(base), clean(current)
    if len(base) < 2 or len(current) < 2:
        return _unknown(base, current)
    return _bootstrap(base, current, False, machine, confidence, seed)


def _bootstrap(
    base: list[float],
    current: list[float],
    calibrated: bool,
    machine: float | None,
    confidence: float,
    seed: int,
) -> Change:
    """Point change and bootstrap interval: of ratio midmeans, or of raw ``lower_mean``s."""
    import numpy as np

    location, boot = (
        (midmean, _boot_log_midmeans)
        if calibrated
        else (
            lower_mean,
            _boot_log_locations,
        )
    )
    rng = np.random.default_rng(seed)
    resamples = _resamples_for(base, current)
    replicates = boot(rng, current, resamples) - boot(rng, base, resamples)
    point = math.log(location(current) / location(base))
    return _change_from(point, replicates, confidence, calibrated, machine)


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
    runs: Sequence[Sequence[float]],
    calibrations: Sequence[Sequence[float]] = (),
    *,
    paired: bool = False,
) -> list[float]:
    """Each run's location as the gate sees it: its ratio midmean when ``paired``, else raw."""
    if paired and len(calibrations) == len(runs):
        return [
            midmean(round_ratios(run, cal)) for run, cal in zip(runs, calibrations, strict=True)
        ]
    return [lower_mean(run) for run in runs]


def detectable_slowdown(run_spread: float, within_width: float = 0.0) -> float:
    """Smallest slowdown caught four times in five when runs differ by ``run_spread``.

    A comparison pits one run against another, so their difference varies by ``sqrt(2)`` times
    the run-to-run spread; add the half-width of one comparison's own interval (``within_width``
    is the full width) and ask for 95 % significance at 80 % power.
    """
    between = math.sqrt(2) * run_spread
    within = within_width / (2 * 1.96)
    return (_Z_SIGNIFICANCE + _Z_POWER) * math.hypot(between, within)
