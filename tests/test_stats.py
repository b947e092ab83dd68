"""The gate's statistics on synthetic samples: known shifts, known noise, heavy tails."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_tpu.stats import (
    clean,
    compare_samples,
    detectable_slowdown,
    lower_mean,
    relative_spread,
    run_locations,
)


def rounds(seed: int, scale: float = 1.0, n: int = 200, noise: float = 0.02, tail: float = 0.0):
    """Round times: 10 ms x scale, lognormal noise, and a share ``tail`` of 1.5-3x slow rounds."""
    rng = np.random.default_rng(seed)
    data = 0.010 * scale * np.exp(rng.normal(0, noise, n))
    slow = rng.random(n) < tail
    data[slow] *= rng.uniform(1.5, 3.0, slow.sum())
    return data.tolist()


def test_lower_mean_ignores_the_slow_tail():
    assert lower_mean([1.0, 2.0, 3.0, 100.0]) == pytest.approx(1.5)
    assert lower_mean([5.0]) == 5.0


def test_clean_drops_impossible_durations():
    assert clean([1.0, 0.0, -1.0, math.nan, math.inf, 2]) == [1.0, 2.0]


def test_unchanged_code_interval_contains_zero():
    change = compare_samples(rounds(1), rounds(2))
    assert change.low < 0 < change.high
    assert abs(change.estimate) < 0.01


@pytest.mark.parametrize("shift", [0.05, 0.10, 0.30])
def test_known_slowdown_is_recovered(shift):
    change = compare_samples(rounds(1), rounds(2, scale=1 + shift))
    assert change.estimate == pytest.approx(shift, abs=0.01)
    assert 0 < change.low < shift < change.high
    assert change.p_slower > 0.99


def test_speedup_is_negative():
    change = compare_samples(rounds(1), rounds(2, scale=0.8))
    assert change.high < 0
    assert change.p_slower < 0.01


def test_heavy_tails_do_not_look_like_a_slowdown():
    # A third of the current rounds were hit by interference; the base had none.
    change = compare_samples(rounds(1), rounds(2, tail=0.33))
    assert change.estimate < 0.01


def test_heavy_tails_do_not_hide_a_slowdown():
    change = compare_samples(rounds(1, tail=0.3), rounds(2, scale=1.08, tail=0.3))
    assert change.low > 0.03


def test_calibration_cancels_machine_drift_when_asked():
    base_cal, cur_cal = rounds(5, n=20), rounds(6, scale=1.10, n=20)
    slow = rounds(2, scale=1.10)
    plain = compare_samples(rounds(1), slow, base_cal, cur_cal)
    calibrated = compare_samples(rounds(1), slow, base_cal, cur_cal, calibrate=True)
    assert plain.machine == pytest.approx(0.10, abs=0.02)
    assert plain.estimate == pytest.approx(0.10, abs=0.01)
    assert calibrated.calibrated and abs(calibrated.estimate) < 0.02


def test_too_few_rounds_is_unbounded():
    change = compare_samples([0.01], [0.02, 0.02])
    assert change.high == math.inf and change.low == -1.0


def test_same_samples_same_answer():
    assert compare_samples(rounds(1), rounds(2)) == compare_samples(rounds(1), rounds(2))


def test_relative_spread_and_locations():
    assert relative_spread([1.0, 1.0, 1.0]) == 0.0
    assert relative_spread([0.9, 1.1]) == pytest.approx(0.1414, abs=1e-3)
    assert run_locations([[2.0, 4.0], [3.0, 9.0]], [[1.0, 1.0], [1.5, 9.0]]) == [2.0, 2.0]


def test_detectable_slowdown_grows_with_noise():
    assert detectable_slowdown(0.0) == 0.0
    small, large = detectable_slowdown(0.01), detectable_slowdown(0.03)
    assert small == pytest.approx(0.0352, abs=1e-3)
    assert large > small
    assert detectable_slowdown(0.01, within_width=0.04) > small
