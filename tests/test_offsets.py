"""The first pair's offset between its processes, as the rows new pairs measured again show it."""

from __future__ import annotations

import math
import random

import pytest

from pytest_tpu.gate.lines import gate_lines
from pytest_tpu.results import BenchResult
from pytest_tpu.sameref.offsets import Offset, allowed_for, by_own_pair, first_pair_offset, vouches
from pytest_tpu.sameref.rows import compare_one
from pytest_tpu.sameref.turns import HEAD, Rounds, turn_of

NUMPY = "test_a.py::test_numpy_plus5"
AGAIN = "test_a.py::test_numpy_plus10"


def first_pair(nodeid: str, slower: float, offset: float, spread: float = 0.004, seed: int = 1):
    """One pair's row: rounds of a ~100 us function in ABBA order, the head's process ``offset``
    (log scale) off the base's for the whole pair, as two processes with the same code can be."""
    rng = random.Random(seed)
    turns = list(range(400))
    head_turns = [t for t in turns if turn_of(t) == HEAD]
    base_turns = [t for t in turns if turn_of(t) != HEAD]
    drift = {t // 2: math.exp(rng.gauss(0, 0.05)) for t in turns}
    factor = (1 + slower) * math.exp(offset)
    head = [1e-4 * drift[t // 2] * factor * math.exp(rng.gauss(0, spread)) for t in head_turns]
    base = [1e-4 * drift[t // 2] * math.exp(rng.gauss(0, spread)) for t in base_turns]
    result = BenchResult(nodeid, nodeid.split("::")[1], None, {}, {}, tuple(head))
    return compare_one(result, base, Rounds(head=head_turns, base=base_turns), 0.05)


def pair_report(change_pct: float, half_width: float) -> dict[str, object]:
    """A new pair's report row (``--tpu-report`` JSON), as a nested session writes it."""
    low, high = change_pct - half_width, change_pct + half_width
    return {"name": AGAIN, "change_pct": change_pct, "ci_low": low, "ci_high": high}


def test_a_first_pair_the_new_pairs_show_far_off_does_not_vouch_for_its_other_rows():
    # r56n, beside the bursty neighbour: one first pair read a numpy function made 5 % slower at
    # +0.6 % [+0.5, +0.7], `unchanged`, while its copy made 10 % slower read +5.6 %, and new pairs
    # measured that copy at about +10 %: the pair's processes were some 4 % apart for that code.
    hidden = first_pair(NUMPY, slower=0.05, offset=-0.044)
    assert hidden.verdict == "unchanged"  # one pair alone cannot tell
    remeasured = first_pair(AGAIN, slower=0.10, offset=-0.044, seed=2)
    assert 0.04 < remeasured.change < 0.07
    reports = [pair_report(10.2, 0.2), pair_report(9.8, 0.2)]
    offset = first_pair_offset({AGAIN: remeasured}, {AGAIN: reports}, {AGAIN: 0.05})
    assert offset is not None and offset.count == 1 and offset.largest == AGAIN
    assert math.expm1(offset.rms) == pytest.approx(0.042, abs=0.006)
    row = allowed_for(hidden, 0.05, offset)
    assert row.verdict == "inconclusive"
    assert row.regression is False  # never a failure
    assert f"{hidden.change:+.1%} [" in row.reason and AGAIN in row.reason
    assert "could hide a regression of the threshold" in row.reason
    # Its smallest detectable change now counts the offset: past the threshold.
    assert hidden.detectable < 0.01 < 0.05 < row.detectable
    [line] = gate_lines([row], 5.0, "main")
    assert "INCONCLUSIVE (no regression shown), 1 checked; 1 inconclusive" in line


def test_an_inconclusive_row_of_a_pair_shown_far_off_stays_inconclusive_and_says_why():
    # r86, quiet: the pair that measured a Keras CNN made 5 % slower again read it -1.5 %
    # [-3.6, +0.7], `inconclusive`, while a row it measured that new pairs measured again read
    # 4.2 % off. Its verdict stands; its reason carries the offsets, so that it is not pooled
    # with another pair into `unchanged` (tests/test_pooled.py).
    hidden = first_pair(NUMPY, slower=0.05, offset=-0.044, spread=0.08)
    assert hidden.verdict == "inconclusive" and hidden.high < 0.05
    remeasured = first_pair(AGAIN, slower=0.10, offset=-0.044, seed=2)
    reports = [pair_report(10.2, 0.2), pair_report(9.8, 0.2)]
    offset = first_pair_offset({AGAIN: remeasured}, {AGAIN: reports}, {AGAIN: 0.05})
    row = allowed_for(hidden, 0.05, offset)
    assert row.verdict == "inconclusive" and row.regression is False
    assert row.detectable == hidden.detectable and row.change == hidden.change
    assert row.reason.startswith(hidden.reason)
    assert "as large as those allow" in row.reason and AGAIN in row.reason
    # Where the offsets leave its interval room under the threshold, nothing is said.
    small = Offset(rms=0.002, count=1, largest=AGAIN, largest_log=0.002)
    assert allowed_for(hidden, 0.05, small) == hidden


def test_new_pairs_that_agree_with_the_first_pair_leave_its_unchanged_rows_alone():
    hidden = first_pair(NUMPY, slower=0.0, offset=0.0)
    assert hidden.verdict == "unchanged"
    remeasured = first_pair(AGAIN, slower=0.10, offset=0.0, seed=2)
    # The new pairs read what the first did, give or take their rounds' noise.
    reports = [pair_report(100 * remeasured.change + d, 0.2) for d in (0.1, -0.1)]
    offset = first_pair_offset({AGAIN: remeasured}, {AGAIN: reports}, {AGAIN: 0.05})
    assert offset is not None and offset.rms < 0.001
    assert allowed_for(hidden, 0.05, offset) == hidden


def test_a_difference_within_the_rounds_noise_is_no_offset():
    # A Keras CNN's rounds: the first pair +8 % [+2, +14], a new pair +11 % [+5, +17]. Rounds that
    # noisy do not resolve an offset of a percent or two either way: they tell nothing of it.
    wide = first_pair(AGAIN, slower=0.08, offset=0.0, spread=0.2, seed=5)
    assert wide.high - wide.low > 0.05
    report = pair_report(100 * wide.change + 3, 6.0)
    assert first_pair_offset({AGAIN: wide}, {AGAIN: [report]}, {AGAIN: 0.05}) is None
    # Rounds that do resolve it, differing by no more than their noise: no offset.
    fine = first_pair(AGAIN, slower=0.08, offset=0.0, seed=5)
    report = pair_report(100 * fine.change + 0.05, 0.3)
    found = first_pair_offset({AGAIN: fine}, {AGAIN: [report]}, {AGAIN: 0.05})
    assert found is not None and found.rms == 0.0
    hidden = first_pair(NUMPY, slower=0.0, offset=0.0)
    assert allowed_for(hidden, 0.05, found) == hidden


def test_without_rows_measured_again_there_is_no_estimate():
    hidden = first_pair(NUMPY, slower=0.0, offset=0.0)
    assert first_pair_offset({}, {}, {}) is None
    # A new pair that measured nothing (its row missing) tells nothing either.
    assert first_pair_offset({AGAIN: hidden}, {AGAIN: [None]}, {AGAIN: 0.05}) is None
    assert allowed_for(hidden, 0.05, None) == hidden


def test_a_row_held_by_another_s_offset_is_judged_on_a_new_pair_of_its_own():
    # Trial 30: a Python function measured again read 12 % off and held an unchanged numpy row,
    # +0.4 % [+0.2, +0.7], inconclusive. A new pair of its own decides instead.
    steady = first_pair(NUMPY, slower=0.0, offset=0.0)
    far = Offset(rms=0.12, count=1, largest=AGAIN, largest_log=0.12)
    held = allowed_for(steady, 0.05, far)
    assert held.verdict == "inconclusive"
    agrees = by_own_pair(steady, held, 0.05, pair_report(100 * steady.change + 0.1, 0.2))
    assert agrees.verdict == "unchanged" and "within the threshold too" in agrees.reason
    # Its own pair reads the slowdown the first pair's offset hid: inconclusive, saying so.
    hidden = first_pair(NUMPY, slower=0.05, offset=-0.05)
    assert hidden.verdict == "unchanged"
    row = by_own_pair(hidden, allowed_for(hidden, 0.05, far), 0.05, pair_report(5.1, 0.3))
    assert row.verdict == "inconclusive" and row.regression is False
    assert "of its own read it +5.1% [+4.8%, +5.4%]" in row.reason
    assert row.detectable > 0.05
    # A pair that gives nothing leaves the warning as it was.
    assert by_own_pair(steady, held, 0.05, None).verdict == "inconclusive"


@pytest.mark.parametrize(
    ("change", "half_width", "vouched"),
    [(0.3, 0.2, True), (-3.0, 0.5, True), (1.5, 0.2, False), (0.5, 2.5, False), (9.7, 0.05, False)],
)
def test_a_new_pair_vouches_only_for_what_one_pair_would_call_unchanged(
    change, half_width, vouched
):
    # +9.7 % [+9.65, +9.75] lies within a 10 % threshold, and a nested session that checks
    # readings calls it unchanged; one pair alone would not (an offset could hide the rest).
    assert vouches(pair_report(change, half_width), 0.05 if change < 9 else 0.10) is vouched
