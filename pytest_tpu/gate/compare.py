"""Verdicts of the regression gate: baseline vs current, per benchmark (plain data in and out).

A benchmark is compared only with the same benchmark (node id: test, device, parameters) in an
environment that measures the same thing; other rows say why they were not compared. The verdict
works on round times, where bigger is always worse, and the row reports the headline metric's
change in its own direction (more TFLOP/s is better, a shorter epoch is better).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_tpu.gate.stats import Change, compare_samples

# The practical threshold of the verdicts when no --fail-on-regression is given.
DEFAULT_THRESHOLD = 0.05
# Run-to-run spread allowance between sessions: an interval from one session's rounds does not
# contain it, so the "could it reach the threshold" test allows twice this much. Raw round times
# carry the machine's session-level speed offset (1-3 % here). Per-round ratios to the interleaved
# calibration kernel cancel most of it but not all (a 384-wide kernel sped up about 1/1.2 as much
# as a 512-wide workload when the machine drifted by 6 %): across 20 sessions of the gate
# experiment one comparison's calibrated change had an SD of 0.65-0.9 %, hence 0.75 %.
RUN_NOISE = 0.01
CALIBRATED_RUN_NOISE = 0.0075
# Environment fields that change what a benchmark measures: compared only when both sides have
# them. The CPU model matters only for CPU benchmarks (it is the device model there).
KEY_FIELDS = (
    "accelerator",
    "device",
    "replicas",
    "tf_minor",
    "jit_compile",
    "dtype",
    "batch_size",
    "workload_size",
    "threads",
)
VERDICTS = ("slower", "faster", "unchanged", "inconclusive")
# Below this many rounds on either side a bootstrap interval is an artefact of the few values
# drawn (seen here: 2-round CNN epochs "100% sure" 8-16% slower on unchanged code), so such a
# benchmark is reported inconclusive and never fails the gate.
MIN_ROUNDS = 5


@dataclass(frozen=True)
class Side:
    """One benchmark's measurements on one side of a comparison."""

    nodeid: str
    samples: tuple[float, ...]
    calibration: tuple[float, ...] = ()
    interleaved: bool = False  # calibration timed right before each round, aligned with samples
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    value: float | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """One line of the comparison table.

    ``status`` is ``compared``, ``new`` (current run only), ``missing`` (baseline only),
    ``failed`` (failed in this run) or ``incompatible`` (``reason`` says why). ``change``/``low``/
    ``high`` are the headline metric's relative change; ``slowdown`` is the round time's.
    """

    nodeid: str
    status: str
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    base_value: float | None = None
    current_value: float | None = None
    verdict: str | None = None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    slowdown: float | None = None
    confidence: float | None = None
    regression: bool = False
    forced: bool = False
    calibrated: bool = False
    machine: float | None = None
    reason: str = ""


comparison_key = pytest.StashKey[list[Row]]()


def time_threshold(threshold: float, higher_is_better: bool) -> float:
    """A metric threshold as a round-time slowdown (a 5 % TFLOP/s loss is 5.26 % more time)."""
    return 1 / (1 - threshold) - 1 if higher_is_better else threshold


def incompatibility(base: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """Why two environments measure different things, or None when they are comparable."""
    fields = list(KEY_FIELDS)
    if base.get("accelerator", "cpu") == "cpu" and current.get("accelerator", "cpu") == "cpu":
        fields.append("cpu_model")
    for name in fields:
        old, new = base.get(name), current.get(name)
        if old is not None and new is not None and old != new:
            return f"{name} differs: baseline {old!r}, now {new!r}"
    return None


def verdict(change: Change, threshold: float) -> str:
    """``slower``/``faster`` need significance and an effect of at least half the threshold."""
    floor = threshold / 2
    if change.low > 0 and change.estimate >= floor:
        return "slower"
    if change.high < 0 and change.estimate <= -floor:
        return "faster"
    if change.low > -threshold and change.high < threshold:
        return "unchanged"
    return "inconclusive"


def is_regression(change: Change, threshold: float) -> bool:
    """Slower, and consistent with reaching the threshold once run-to-run noise is allowed.

    Failing only when the whole interval lies above the threshold would miss half of the changes
    that sit right at it; failing on significance alone would fail changes far below it.
    """
    noise = CALIBRATED_RUN_NOISE if change.calibrated else RUN_NOISE
    return verdict(change, threshold) == "slower" and change.high + 2 * noise >= threshold


def _metric_change(change: Change, higher_is_better: bool) -> tuple[float, float, float]:
    """The headline metric's change and interval, from the round time's."""
    if not higher_is_better:
        return change.estimate, change.low, change.high

    def inverse(x: float) -> float:
        return 1 / (1 + x) - 1

    return inverse(change.estimate), inverse(change.high), inverse(change.low)


def compare_one(base: Side, current: Side, threshold: float, force: bool) -> Row:
    """The row of a benchmark present on both sides."""
    reason = incompatibility(base.environment, current.environment)
    common = _common(current, base)
    if reason and not force:
        return Row(status="incompatible", reason=reason, **common)
    rounds = min(len(base.samples), len(current.samples))
    if rounds < MIN_ROUNDS:
        return Row(
            status="compared",
            verdict="inconclusive",
            reason=f"{rounds} rounds: too few to decide (needs {MIN_ROUNDS} on each side)",
            **common,
        )
    change = compare_samples(
        base.samples,
        current.samples,
        base.calibration,
        current.calibration,
        paired=base.interleaved and current.interleaved,
    )
    limit = time_threshold(threshold, current.higher_is_better)
    metric, low, high = _metric_change(change, current.higher_is_better)
    return Row(
        status="compared",
        verdict=verdict(change, limit),
        change=metric,
        low=low,
        high=high,
        slowdown=change.estimate,
        confidence=change.p_slower,
        regression=is_regression(change, limit),
        forced=bool(reason),
        calibrated=change.calibrated,
        machine=change.machine,
        reason=f"compared anyway (--compare-force): {reason}" if reason else "",
        **common,
    )


def _common(current: Side, base: Side | None) -> dict[str, Any]:
    return {
        "nodeid": current.nodeid,
        "metric": current.metric,
        "unit": current.unit,
        "higher_is_better": current.higher_is_better,
        "base_value": base.value if base else None,
        "current_value": current.value,
    }


def compare_runs(
    base: Mapping[str, Side],
    current: Mapping[str, Side],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    force: bool = False,
    failed: Iterable[str] = (),
) -> list[Row]:
    """Every row: compared, new, failed in this run, or missing from this run."""
    failed = set(failed) - set(current)
    rows = [
        compare_one(base[key], side, threshold, force)
        if key in base
        else Row(status="new", **_common(side, None))
        for key, side in current.items()
    ]
    for key in failed:
        old = base.get(key)
        rows.append(Row(nodeid=key, status="failed", base_value=old.value if old else None))
    for key, side in base.items():
        if key not in current and key not in failed:
            rows.append(
                Row(
                    nodeid=key,
                    status="missing",
                    metric=side.metric,
                    unit=side.unit,
                    higher_is_better=side.higher_is_better,
                    base_value=side.value,
                )
            )
    return rows


def regressions(rows: Iterable[Row]) -> list[Row]:
    """The rows that fail the gate."""
    return [row for row in rows if row.regression]
