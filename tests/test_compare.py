"""Verdicts: direction, thresholds, compatibility, rows on one side only."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pytest_tpu.gate.compare import (
    Side,
    compare_runs,
    incompatibility,
    is_regression,
    regressions,
    time_threshold,
    verdict,
)
from pytest_tpu.gate.stats import Change


def change(estimate, low, high):
    return Change(estimate=estimate, low=low, high=high, p_slower=0.99)


@pytest.mark.parametrize(
    ("estimate", "low", "high", "expected"),
    [
        (0.06, 0.04, 0.08, "slower"),
        (-0.06, -0.08, -0.04, "faster"),
        (0.005, -0.01, 0.02, "unchanged"),
        (0.01, 0.005, 0.015, "unchanged"),  # significant but far below the threshold
        (0.02, -0.04, 0.09, "inconclusive"),
    ],
)
def test_verdicts(estimate, low, high, expected):
    assert verdict(change(estimate, low, high), 0.05) == expected


def test_regression_needs_significance_and_an_effect_near_the_threshold():
    assert is_regression(change(0.05, 0.03, 0.07), 0.05)  # a change right at the threshold
    assert not is_regression(change(0.05, -0.01, 0.11), 0.05)  # not significant
    assert not is_regression(change(0.03, 0.025, 0.035), 0.10)  # surely below 10 %


def test_threshold_in_the_metric_direction():
    assert time_threshold(0.05, higher_is_better=False) == 0.05
    assert time_threshold(0.05, higher_is_better=True) == pytest.approx(0.0526, abs=1e-4)


def test_incompatible_environments_say_why():
    base = {"accelerator": "gpu", "device": "A100", "dtype": "float32", "tf_minor": "2.21"}
    assert incompatibility(base, dict(base)) is None
    assert "dtype" in incompatibility(base, {**base, "dtype": "bfloat16"})
    assert "tf_minor" in incompatibility(base, {**base, "tf_minor": "2.20"})
    assert "device" in incompatibility(base, {**base, "device": "H100"})
    # A field known on one side only does not block the comparison.
    assert incompatibility(base, {"accelerator": "gpu"}) is None
    # The CPU model is the device model of CPU benchmarks only.
    assert incompatibility({"cpu_model": "a"}, {"cpu_model": "b"}) is not None
    gpu = {"accelerator": "gpu", "cpu_model": "a"}
    assert incompatibility(gpu, {**gpu, "cpu_model": "b"}) is None


def samples(scale, seed):
    rng = np.random.default_rng(seed)
    return tuple((0.01 * scale * np.exp(rng.normal(0, 0.01, 100))).tolist())


def side(nodeid, scale=1.0, seed=0, **kwargs):
    return Side(nodeid=nodeid, samples=samples(scale, seed), **kwargs)


def test_rows_cover_both_sides():
    base = {"a": side("a"), "b": side("b"), "gone": side("gone"), "broke": side("broke")}
    current = {"a": side("a", 1.3, 1), "b": side("b", 1.0, 2), "fresh": side("fresh")}
    rows = {row.nodeid: row for row in compare_runs(base, current, failed=["broke"])}
    assert rows["a"].verdict == "slower" and rows["a"].regression
    assert rows["b"].verdict == "unchanged" and not rows["b"].regression
    assert rows["fresh"].status == "new"
    assert rows["gone"].status == "missing"
    assert rows["broke"].status == "failed"
    assert [row.nodeid for row in regressions(rows.values())] == ["a"]


def test_higher_is_better_metric_changes_the_other_way():
    kwargs = {"metric": "tflops", "unit": "TFLOP/s", "higher_is_better": True}
    base = {"a": side("a", **kwargs)}
    current = {"a": side("a", 1.25, 1, **kwargs)}
    (row,) = compare_runs(base, current)
    assert row.slowdown == pytest.approx(0.25, abs=0.01)
    assert row.change == pytest.approx(-0.20, abs=0.01)
    assert row.low <= row.change <= row.high
    assert row.verdict == "slower"


def test_incompatible_rows_are_not_compared_unless_forced():
    base = {"a": side("a", environment={"dtype": "float32"})}
    current = {"a": side("a", 2.0, 1, environment={"dtype": "bfloat16"})}
    (row,) = compare_runs(base, current)
    assert row.status == "incompatible" and "dtype" in row.reason and not row.regression
    (forced,) = compare_runs(base, current, force=True)
    assert forced.status == "compared" and forced.forced and forced.regression


def paired_side(nodeid, work, machine, seed):
    """Rounds with a per-round calibration kernel; ``machine`` slows both, ``work`` the bench."""
    rng = np.random.default_rng(seed)
    drift = machine * np.exp(rng.normal(0, 0.03, 60))  # the machine's speed, round by round
    bench = 0.05 * work * drift * np.exp(rng.normal(0, 0.003, 60))
    ref = 0.04 * drift * np.exp(rng.normal(0, 0.003, 60))
    return Side(nodeid, tuple(bench.tolist()), tuple(ref.tolist()), interleaved=True)


def test_interleaved_sides_are_decided_on_ratios():
    base = {"a": paired_side("a", 1.0, 1.0, 0), "b": paired_side("b", 1.0, 1.0, 1)}
    current = {"a": paired_side("a", 1.0, 1.08, 2), "b": paired_side("b", 1.05, 0.98, 3)}
    rows = {row.nodeid: row for row in compare_runs(base, current)}
    assert rows["a"].calibrated and rows["a"].verdict == "unchanged"  # the machine, not the code
    assert rows["a"].machine == pytest.approx(0.08, abs=0.03)
    assert rows["b"].calibrated and rows["b"].regression


def test_one_side_without_per_round_calibration_compares_raw():
    base = {"a": replace(paired_side("a", 1.0, 1.0, 0), interleaved=False)}
    (row,) = compare_runs(base, {"a": paired_side("a", 1.0, 1.0, 1)})
    assert row.status == "compared" and not row.calibrated


def test_calibrated_regression_allows_less_run_noise():
    # Significantly slower, and 3.3 % is out of reach of 5 % without the raw noise allowance.
    at = Change(estimate=0.03, low=0.027, high=0.033, p_slower=0.99)
    assert is_regression(at, 0.05)
    assert not is_regression(replace(at, calibrated=True), 0.05)


def test_too_few_rounds_are_inconclusive_and_never_a_regression():
    base = Side("t", samples=(1.0, 1.01), calibration=(1.0, 1.0))
    slower = Side("t", samples=(1.5, 1.52), calibration=(1.0, 1.0))
    (row,) = compare_runs({"t": base}, {"t": slower}, threshold=0.05)
    assert row.verdict == "inconclusive"
    assert not row.regression
    assert "too few to decide" in row.reason
