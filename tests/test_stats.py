"""The gate's statistics on synthetic samples: known shifts, known noise, heavy tails."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_tpu.gate.stats import (
    clean,
    compare_samples,
    detectable_slowdown,
    lower_mean,
    midmean,
    relative_spread,
    round_ratios,
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


def paired_session(seed: int, machine: float = 1.0, work: float = 1.0, n: int = 60):
    """A session with per-round calibration: the machine's speed drifts within the session
    (a slow wave plus an offset ``machine``) and slows the kernel and the benchmark alike;
    ``work`` scales the benchmark only (the code under test)."""
    rng = np.random.default_rng(seed)
    drift = machine * (1 + 0.03 * np.sin(np.linspace(0, 6, n) + seed))
    bench = 0.053 * work * drift * np.exp(rng.normal(0, 0.005, n))
    ref = 0.040 * drift * np.exp(rng.normal(0, 0.005, n))
    return bench.tolist(), ref.tolist()


def test_machine_slowdown_on_kernel_and_bench_is_unchanged_when_paired():
    base, base_ref = paired_session(1)
    current, current_ref = paired_session(2, machine=1.10)
    raw = compare_samples(base, current, base_ref, current_ref)
    paired = compare_samples(base, current, base_ref, current_ref, paired=True)
    assert not raw.calibrated and raw.estimate > 0.05  # raw rounds blame the code
    assert paired.calibrated and paired.low < 0.01 and paired.high > -0.01
    assert abs(paired.estimate) < 0.01
    assert paired.machine == pytest.approx(0.10, abs=0.03)


@pytest.mark.parametrize("shift", [0.05, 0.10])
def test_bench_only_slowdown_is_slower_when_paired(shift):
    base, base_ref = paired_session(1)
    current, current_ref = paired_session(2, machine=0.97, work=1 + shift)
    change = compare_samples(base, current, base_ref, current_ref, paired=True)
    assert change.calibrated
    assert change.estimate == pytest.approx(shift, abs=0.01)
    assert 0 < change.low < shift < change.high
    assert change.p_slower > 0.99
    assert change.machine == pytest.approx(-0.03, abs=0.03)


def test_paired_interval_is_narrower_than_raw_under_drift():
    base, base_ref = paired_session(1)
    current, current_ref = paired_session(2)
    raw = compare_samples(base, current, base_ref, current_ref)
    paired = compare_samples(base, current, base_ref, current_ref, paired=True)
    assert paired.width < raw.width / 2


def test_paired_without_enough_calibration_falls_back_to_raw():
    base, _ = paired_session(1)
    current, _ = paired_session(2)
    change = compare_samples(base, current, [0.04], [0.04], paired=True)
    assert not change.calibrated and change.machine is None
    assert change.high < math.inf


def test_round_ratios_skip_invalid_pairs():
    assert round_ratios([2.0, 0.0, 3.0, 4.0], [1.0, 1.0, math.nan, 2.0]) == [2.0, 2.0]


def test_midmean_trims_a_quarter_from_each_end():
    assert midmean([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.001]) == pytest.approx(3.5)
    assert midmean([5.0]) == 5.0
    with pytest.raises(ValueError, match="no valid samples"):
        midmean([])


def test_too_few_rounds_is_unbounded():
    change = compare_samples([0.01], [0.02, 0.02])
    assert change.high == math.inf and change.low == -1.0


def test_same_samples_same_answer():
    assert compare_samples(rounds(1), rounds(2)) == compare_samples(rounds(1), rounds(2))


def test_relative_spread_and_locations():
    assert relative_spread([1.0, 1.0, 1.0]) == 0.0
    assert relative_spread([0.9, 1.1]) == pytest.approx(0.1414, abs=1e-3)
    runs, calibrations = [[2.0, 4.0], [3.0, 9.0]], [[1.0, 2.0], [1.5, 4.5]]
    assert run_locations(runs, calibrations) == [2.0, 3.0]  # raw: fastest half
    assert run_locations(runs, calibrations, paired=True) == [2.0, 2.0]


def test_detectable_slowdown_grows_with_noise():
    assert detectable_slowdown(0.0) == 0.0
    small, large = detectable_slowdown(0.01), detectable_slowdown(0.03)
    assert small == pytest.approx(0.0352, abs=1e-3)
    assert large > small
    assert detectable_slowdown(0.01, within_width=0.04) > small
