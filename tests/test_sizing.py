"""How a same-job session sizes the rounds of a short ``benchmark(fn)`` call (plain data)."""

from __future__ import annotations

import itertools

import pytest

from pytest_tpu.sameref.sizing import _share, probes


def test_only_a_short_call_is_probed_and_always_an_even_number_of_times():
    assert probes(75e-6, 1.0) == 50  # at most 50, 2 % of a second is far more
    assert probes(3e-3, 1.0) == 6  # 2 % of a second is 6 calls of 3 ms
    assert probes(4.5e-3, 1.0) == 4
    assert probes(6e-3, 1.0) == 0  # too few would fit: the turns are a percent of such a call
    assert probes(0.0, 1.0) == 0


def test_one_stall_in_the_probes_does_not_size_the_rounds():
    # A call ends every 130 µs on average (a 65 µs round of each side), one call waits 50 ms.
    gaps = [100e-6, 160e-6] * 25
    gaps[7] += 0.05
    ends = list(itertools.accumulate([0.0, *gaps]))
    # Half of a cycle of two calls of each side: one side's call and its hand-over, 65 µs.
    assert _share(ends) == pytest.approx(65e-6)
