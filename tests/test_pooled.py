"""A row measured again with more rounds, judged on both its pairs at once (plain data).

The readings are r67's and r68's (quiet, a Keras CNN and a TensorFlow matmul chain): a first pair
of 10 rounds too coarse for a 5 % threshold, then a new pair with 2-4 times the rounds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.lines import gate_lines
from pytest_tpu.gate.stats import TWO_PAIRS
from pytest_tpu.report.comparison import comparison_notes
from pytest_tpu.sameref.further import Nested
from pytest_tpu.sameref.offsets import AS_THOSE_ALLOW, OWN_PAIR_READ
from pytest_tpu.sameref.pooled import APART, LEANS, SURE_FIRST
from pytest_tpu.sameref.resolve import _apart_by_more_pairs, _resolved
from pytest_tpu.summary import from_gate_row

ONE = "paired rounds in this job, one pair of processes"


def first(change: float, low: float, high: float, rounds: int = 10, reason: str = "") -> Row:
    return Row(
        nodeid="test_work.py::test_cnn",
        status="compared",
        verdict="inconclusive",
        change=change / 100,
        low=low / 100,
        high=high / 100,
        detectable=0.09,
        noise_source=f"{rounds} {ONE}",
        base_value=0.140,
        current_value=0.140 * (1 + change / 100),
        reason=reason,
    )


def again(change: float, low: float, high: float, rounds: int) -> dict[str, object]:
    return {
        "name": "test_work.py::test_cnn",
        "change_pct": change,
        "ci_low": low,
        "ci_high": high,
        "detectable_pct": 6.0,
        "verdict": "inconclusive",
        "regression": False,
        "noise_source": f"{rounds} {ONE}",
        "statistic": "middle half of the paired rounds' ratios",
        "baseline": 0.140,
        "current": 0.140 * (1 + change / 100),
    }


def test_two_agreeing_pairs_of_unchanged_code_are_unchanged_together():
    # r67, the base against itself: the new pair alone leaves room for an offset of only 1.9 %.
    row = _resolved(first(-2.8, -7.6, 2.2), again(0.1, -2.8, 3.1, 24), 4, 0.05)
    assert row.verdict == "unchanged"
    assert row.noise_source == f"10 and 24 paired rounds in this job, {TWO_PAIRS}"
    assert row.change is not None and row.high is not None and row.low is not None
    # Between the two pairs' changes, nearer the one with more rounds; its interval narrower
    # than either pair's own.
    assert -0.01 < row.change < 0.001
    assert row.high - row.low < 0.031 + 0.028
    assert row.detectable is not None and row.detectable <= 0.05
    # Its note says what each pair read and why together they vouch, not the new pair's own
    # "not ruled out" beside ``unchanged``.
    assert row.reason.startswith(
        "measured again with 4x the rounds in a new pair of processes (the session's first pair "
        "read -2.8% [-7.6%, +2.2%]); that pair read +0.1% [-2.8%, +3.1%], which alone leaves a "
        "slowdown of the threshold (5.0%) open"
    )
    assert "both pairs together -0.6% [-3.0%, +1.7%]: they agree" in row.reason
    assert "not ruled out" not in row.reason
    # The table's times follow the pooled change.
    assert row.current_value == pytest.approx(0.140 * (1 + row.change))


def test_pairs_that_leave_the_threshold_open_stay_inconclusive_shown_together():
    # r67, a 5 % slower CNN: +2.6 % and +4.2 %, together +3.3 %, too near the threshold to rule
    # it out; together they resolve finer than the new pair alone, so both are shown.
    row = _resolved(first(2.6, -0.6, 5.8), again(4.2, 0.6, 7.9, 20), 4, 0.05)
    assert row.verdict == "inconclusive" and not row.regression
    assert row.noise_source == f"10 and 20 paired rounds in this job, {TWO_PAIRS}"
    assert row.change == pytest.approx(0.033, abs=0.001)
    assert "they agree, and together still leave a slowdown of the threshold (5.0%) open" in (
        row.reason
    )
    # Leaning slower by more than half the threshold: more pairs measure it (``leaning``).
    assert LEANS in row.reason


@pytest.mark.parametrize(
    ("one", "two", "why"),
    [
        ((1.0, -8.0, 10.0), (1.5, -3.5, 6.8, 40), "leaning slower by less than half the threshold"),
        ((2.0, -1.0, 5.0), (2.2, -2.0, 6.6, 40), "together they end under the threshold"),
        ((-2.0, -12.0, 9.0), (-1.5, -8.0, 5.5, 40), "leaning faster"),
    ],
)
def test_a_row_more_rounds_leave_open_goes_to_more_pairs_only_leaning_slower(one, two, why):
    row = _resolved(first(*one), again(*two), 4, 0.05)
    assert row.verdict == "inconclusive" and LEANS not in row.reason, why


def test_r116s_cnn_left_open_after_4x_the_rounds_goes_to_more_pairs(tmp_path):
    # r116, quiet: a Keras CNN made 10 % slower, +6.2 % [-0.1, +13.0] on 48 paired rounds, 97.3 %
    # sure, was left inconclusive on that pair.
    one, measured = first(9.7, -1.2, 21.9, rounds=12), again(6.2, -0.1, 13.0, 48)
    two = _resolved(one, measured, 4, 0.05)
    assert two.verdict == "inconclusive" and LEANS in two.reason
    at = Nested("HEAD", 5.0, tmp_path, (), None)  # not a git checkout: the third pair cannot run
    rows, note = _apart_by_more_pairs(
        [one], [two], {one.nodeid: measured}, {one.nodeid: 4}, {one.nodeid: 0.05}, at
    )
    assert rows == [two]
    assert note.startswith("; 1 left open leaning slower measured by a third pair (that ")
    assert note.endswith(": inconclusive on two pairs)")


def test_pairs_together_under_the_threshold_but_too_coarse_say_so():
    # Session 71, an unchanged Keras CNN: +7.2 % [-3.5, +19.1] in 6 rounds, -2.8 % [-6.9, +1.5]
    # with 4x them; together -1.2 % [-4.8, +2.6], detecting 6.4 %. "Still leave a slowdown of
    # the threshold open" read beside "its 95% interval rules a slowdown of the threshold out".
    measured = {**again(-2.8, -6.9, 1.5, 20), "detectable_pct": 8.0}
    row = _resolved(first(7.2, -3.5, 19.1, rounds=6), measured, 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.detectable == pytest.approx(0.064, abs=0.001)
    assert row.reason.endswith(
        "both pairs together -1.2% [-4.8%, +2.6%]: they agree, and their interval stays under the "
        "threshold (5.0%), but together they could not have caught it reliably"
    )
    # The gate names it among the rows that could hide a slowdown, and its note does not say
    # otherwise (new-user trial 73: "its 95% interval rules a slowdown of the threshold out"
    # beside the gate's "neither shown nor ruled out (test_pipeline detects 10.2%)").
    said = gate_lines([replace(row, threshold=0.05)], 5.0, "main")[0]
    assert "1 inconclusive: a 5% slowdown there is neither shown nor ruled out" in said, said
    notes = comparison_notes([from_gate_row(replace(row, threshold=0.05))])
    assert notes[0].endswith("detects 6.4%"), notes
    assert "rules a slowdown" not in notes[0], notes


def test_pairs_together_that_leave_only_a_speed_up_open_rule_a_slowdown_out():
    # New-user trial 73: -3.1 % [-5.2, -0.9] by two pairs at 5 %, "reaches a speed-up of it",
    # named by the gate among the rows that could hide a slowdown.
    row = _resolved(first(-4.0, -9.0, 1.0), again(-3.8, -5.9, -1.7, 40), 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.noise_source == f"10 and 40 paired rounds in this job, {TWO_PAIRS}"
    assert row.low is not None and row.low <= -0.05 and row.high is not None and row.high < 0
    assert row.reason.endswith("but reaches a speed-up of it"), row.reason
    said = gate_lines([replace(row, threshold=0.05)], 5.0, "main")[0]
    assert said.startswith("regression gate (5%): passed"), said
    assert "each ruling a slowdown of its threshold out" in said


def test_a_new_pair_finer_than_both_together_keeps_its_own_reading():
    # r68, unchanged code: +3.1 % [-8.9, +16.7] in 10 rounds, +3.8 % [-2.6, +10.6] in 40; the
    # first pair's few rounds make the pooled interval no finer than the new pair's own.
    row = _resolved(first(3.1, -8.9, 16.7), again(3.8, -2.6, 10.6, 40), 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.noise_source == f"40 {ONE}"
    assert "both pairs together" not in row.reason


def test_a_pair_other_rows_showed_apart_is_not_pooled():
    # Its processes were measured further apart than the one-pair room: that room cannot shrink.
    held = first(-2.8, -7.6, 2.2, reason=f"an offset between its processes {AS_THOSE_ALLOW}")
    row = _resolved(held, again(0.1, -2.8, 3.1, 24), 4, 0.05)
    assert row.verdict == "inconclusive"


def test_a_row_this_session_s_offsets_held_is_not_settled_by_one_more_pair():
    # a2, quiet, the alloc workload made 10 % slower: +0.8 % [-3.1, +4.8] in a first pair whose
    # processes other rows showed 9.6 % apart, then +0.4 % [-1.2, +2.1] with 2x the rounds in a
    # new pair, whose own session called it `unchanged`; the gate called the row so.
    measured = {**again(0.4, -1.2, 2.1, 20), "verdict": "unchanged", "detectable_pct": 3.0}
    plain = _resolved(first(0.8, -3.1, 4.8), measured, 2, 0.05)
    assert plain.verdict == "unchanged"  # no offset shown in the session: one pair settles it
    why = f"an offset between its two processes {AS_THOSE_ALLOW} (19.7%)"
    held = replace(first(0.8, -3.1, 4.8, reason=why), detectable=0.31)
    row = _resolved(held, measured, 2, 0.05)
    assert row.verdict == "inconclusive" and not row.regression
    assert "that pair read +0.4% [-1.2%, +2.1%], within the threshold by that pair's rounds" in (
        row.reason
    )
    assert row.detectable == pytest.approx(0.31)  # the offset's share kept
    # A row a new pair of its own measured has had that pair: the pair with more rounds, its
    # third, settles it (a steady row its own pair left inconclusive under a burst of load).
    own = replace(held, reason=f"{why}; {OWN_PAIR_READ} +2.5% [-4.1%, +9.6%]")
    assert _resolved(own, measured, 2, 0.05).verdict == "unchanged"


def test_a_new_pair_its_own_session_showed_apart_is_not_pooled():
    # r86, quiet, a Keras CNN made 5 % slower: +3.5 % [-2.0, +9.2] by its first pair, -1.5 %
    # [-3.6, +0.7] by the new pair with 4x the rounds, whose unchanged copy read -4.9 % and whose
    # row that new pairs measured again read 4.2 % off. Pooled, the two said `unchanged` at
    # -0.8 % [-2.7, +1.1]: the new pair's offset was the size of the threshold.
    one = first(3.5, -2.0, 9.2)
    measured = again(-1.5, -3.6, 0.7, 40)
    assert _resolved(one, measured, 4, 0.05).verdict == "unchanged"
    held = {**measured, "note": f"an offset between its two processes {AS_THOSE_ALLOW} (8.5%)"}
    row = _resolved(one, held, 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.noise_source == f"40 {ONE}"  # the new pair's own reading, not pooled
    assert AS_THOSE_ALLOW in row.reason


def test_a_slower_new_pair_is_never_pooled_into_unchanged():
    measured = {**again(6.8, 4.0, 9.8, 40), "verdict": "slower"}
    row = _resolved(first(3.7, -4.6, 12.8), measured, 4, 0.05)
    assert row.verdict == "slower"


def test_a_pair_whose_rounds_were_all_alike_is_left_as_it_was():
    # A zero-width interval gives its pair no weight to pool by: the new pair's row stands.
    row = _resolved(first(0.0, 0.0, 0.0), again(0.1, -2.8, 3.1, 24), 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.noise_source == f"24 {ONE}"


def test_pairs_that_disagree_are_judged_on_their_spread_not_on_the_new_pair_alone():
    # Trial 40: an untouched 2 ms TensorFlow call, 30 rounds, then 120; the gate said
    # "UNRESOLVED +5.8% ... 98.0% sure" slower, on the new pair alone.
    measured = {**again(5.8, 0.3, 11.6, 120), "confidence_pct": 98.0}
    row = _resolved(first(-5.6, -11.8, 1.0, rounds=30), measured, 4, 0.05)
    assert row.verdict == "inconclusive" and not row.regression
    assert row.noise_source.startswith("2 pairs of processes in this job, paired rounds")
    assert row.change is not None and abs(row.change) < 0.01  # their mean, not +5.8 %
    assert row.low is not None and row.high is not None and row.high - row.low > 0.5
    assert row.confidence is not None and row.confidence < 0.75
    assert "further from the first than both pairs' rounds allow" in row.reason
    [line] = gate_lines([row], 5.0, "base")
    assert "UNRESOLVED" not in line and "INCONCLUSIVE" in line
    # r67, a 5 % slower matmul chain: apart too, and said so.
    row = _resolved(first(5.4, 3.2, 7.6), again(2.9, 1.6, 4.3, 30), 4, 0.05)
    assert row.verdict == "inconclusive"
    assert row.noise_source.startswith("2 pairs of processes")


def test_a_third_pair_that_cannot_run_leaves_the_two_pairs_spread_and_says_so(tmp_path):
    # r86, quiet, an unchanged Keras CNN: -2.8 % by its first pair, +1.9 % with 3x the rounds.
    # The third pair's nested session really runs, and fails: its rootdir is no git checkout.
    one, measured = first(-2.8, -7.1, 1.7), again(1.9, -0.1, 3.9, 30)
    two = _resolved(one, measured, 3, 0.05)
    assert "further from the first than both pairs' rounds allow" in two.reason
    at = Nested("HEAD", 5.0, tmp_path, (), None)
    thresholds = {one.nodeid: 0.05}
    rows, note = _apart_by_more_pairs(
        [one], [two], {one.nodeid: measured}, {one.nodeid: 3}, thresholds, at
    )
    assert rows == [two]  # inconclusive on two pairs, as before
    assert note.startswith("; 1 whose two pairs lay apart measured by a third pair (that ")
    assert note.endswith(": inconclusive on two pairs)")


def test_a_new_pair_that_does_not_settle_a_slowdown_the_first_was_sure_of_goes_to_more_pairs():
    # r89n, beside the neighbour: a Keras CNN made 5 % slower, called unchanged on the new pair's
    # narrow +1.1 %: not apart from the first pair's +5.9 % [+0.8, +11.3], and both sure of a
    # slowdown.
    measured = {**again(1.1, 0.4, 1.9, 30), "verdict": "unchanged"}
    row = _resolved(first(5.9, 0.8, 11.3), measured, 3, 0.05)
    assert row.verdict == "inconclusive" and not row.regression
    assert SURE_FIRST in row.reason and APART not in row.reason
    assert "that pair read +1.1% [+0.4%, +1.9%]" in row.reason
    # r88, quiet, a CNN made 5 % slower: the new pair leaves the threshold open; before, the row
    # ended there, inconclusive.
    row = _resolved(first(4.6, 0.9, 8.5), again(3.7, -0.1, 7.5, 20), 2, 0.05)
    assert row.verdict == "inconclusive" and SURE_FIRST in row.reason


@pytest.mark.parametrize(
    ("one", "two", "why"),
    [
        ((4.6, 0.9, 8.5), (1.0, -0.5, 2.5, 40), "the new pair rules a slowdown out"),
        ((2.0, 0.5, 3.5), (1.1, 0.4, 1.9, 30), "the first pair's slowdown could not reach 5 %"),
        ((3.7, -4.6, 12.8), (1.1, 0.4, 1.9, 30), "the first pair was not sure of a slowdown"),
    ],
)
def test_a_new_pair_settles_the_row_alone_where_the_first_gave_it_nothing_to_settle(one, two, why):
    row = _resolved(first(*one), {**again(*two), "verdict": "unchanged"}, 4, 0.05)
    assert SURE_FIRST not in row.reason, why
    assert row.verdict != "inconclusive" or TWO_PAIRS in row.noise_source, why


def test_a_third_pair_that_cannot_run_leaves_the_slowdown_in_doubt_inconclusive(tmp_path):
    one, measured = first(5.9, 0.8, 11.3), {**again(1.1, 0.4, 1.9, 30), "verdict": "unchanged"}
    two = _resolved(one, measured, 3, 0.05)
    at = Nested("HEAD", 5.0, tmp_path, (), None)
    rows, note = _apart_by_more_pairs(
        [one], [two], {one.nodeid: measured}, {one.nodeid: 3}, {one.nodeid: 0.05}, at
    )
    assert rows == [two] and two.verdict == "inconclusive"  # never unchanged on the new pair
    assert note.startswith(
        "; 1 whose first pair's slowdown the new pair did not settle measured by a third pair "
        "(that "
    )
    assert note.endswith(": inconclusive on two pairs)")
