"""Pairs of processes that disagree beyond their rounds' noise (plain data)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_tpu.gate.compare import Row
from pytest_tpu.sameref.further import Nested, Spread
from pytest_tpu.sameref.judge import by_pairs, to_more_pairs, with_rounds
from pytest_tpu.sameref.pairs import (
    FEWEST,
    MOST,
    across,
    disagree,
    leans_open,
    still_open,
    sure_slower,
    too_few,
)


def first(change: float, low: float, high: float) -> Row:
    return Row(
        nodeid="test_a.py::test_norm",
        status="compared",
        verdict="slower",
        change=change,
        low=low,
        high=high,
        confidence=0.999,
        regression=True,
        base_value=40e-6,
    )


def again(change: float, low: float, high: float) -> dict[str, object]:
    return {"change_pct": change, "ci_low": low, "ci_high": high, "verdict": "slower"}


def test_two_pairs_disagree_only_beyond_what_their_intervals_allow():
    # A short function 3.5 % slower, seen here: +5.7 % [+5.6, +5.9] and +2.45 % [+2.36, +2.54].
    assert disagree(first(0.057, 0.056, 0.059), again(2.45, 2.36, 2.54))
    # A Keras CNN's steps: +11 % [+4, +18] and +8 % [+2, +14] agree within their rounds' noise.
    assert not disagree(first(0.11, 0.04, 0.18), again(8.0, 2.0, 14.0))
    assert not disagree(first(0.057, 0.056, 0.059), {"verdict": "inconclusive"})


def test_pairs_whose_rounds_say_so_are_read_on_student_t():
    # r67, a matmul chain 5 % slower: +5.4 % [+3.2, +7.6] on 10 paired rounds and +2.9 %
    # [+1.6, +4.3] on 40. Read on their rounds' 7 degrees of freedom they disagree; the same
    # intervals read as normal (no rounds said) would pass as agreeing.
    plain = "paired rounds in this job, one pair of processes"
    row = replace(first(0.054, 0.032, 0.076), noise_source=f"10 {plain}")
    report = {**again(2.9, 1.6, 4.3), "noise_source": f"40 {plain}"}
    assert disagree(row, report)
    assert not disagree(replace(row, noise_source=""), {**report, "noise_source": ""})


def test_the_spread_of_three_pairs_is_the_uncertainty_of_the_new_two():
    found = across(first(0.057, 0.056, 0.059), [again(6.1, 5.9, 6.4), again(2.45, 2.36, 2.54)])
    assert found is not None
    # Their offsets lie far beyond their rounds' noise, so the two weigh nearly alike.
    assert found.estimate == pytest.approx((1.061 * 1.0245) ** 0.5 - 1, abs=1e-4)
    assert found.df == 2
    # Far wider than any pair's own interval (each under a point): the pairs' spread counts.
    assert found.low < 0.0 and found.high > 0.10


def test_a_pair_a_burst_left_coarse_counts_for_less_than_the_pairs_beside_it():
    # A +20 % regression at a 10 % threshold: the first pair and the third read it within a few
    # points; the new pair between them, under a burst of load, reads +17 % [-22, +76]. Weighed
    # alike, that pair's error kept three (and five) pairs open until thirteen had run.
    coarse = again(17.4, -21.8, 76.3)
    found = across(first(0.20, 0.159, 0.239), [coarse, again(19.8, 17.7, 22.0)])
    assert found is not None and 0.19 < found.estimate < 0.20
    assert sure_slower(found) and not still_open(found, 0.10)
    # The same three pairs, each as coarse as the burst's: three cannot settle it.
    assert still_open(across(first(0.20, -0.2, 0.8), [coarse, again(19.8, -20, 75)]), 0.10)


@pytest.mark.parametrize(
    ("later", "verdict", "stands"),
    [
        # Same code read +3.2 % by a fluke and +2.9 % again: a third pair near zero withdraws it.
        ([again(2.9, 2.8, 3.0), again(0.1, -0.1, 0.3)], "inconclusive", False),
        # Twenty percent slower by every pair of five, give or take their offsets: it stands.
        (
            [
                again(17.5, 17.3, 17.7),
                again(19.0, 18.8, 19.2),
                again(20.2, 20.0, 20.4),
                again(18.4, 18.2, 18.6),
            ],
            "slower",
            True,
        ),
    ],
)
def test_a_regression_judged_on_the_pairs_spread(later, verdict, stands):
    before = first(0.032, 0.031, 0.033) if not stands else first(0.21, 0.208, 0.212)
    row = by_pairs(before, later, 0.03)
    assert row.verdict == verdict and row.regression is stands and row.confirmed is stands
    assert "the spread between pairs counted" in row.reason and "a third pair" in row.reason
    assert row.noise_source.startswith(f"{len(later) + 1} pairs of processes in this job, paired")
    assert row.current_value == pytest.approx(40e-6 * (1 + row.change))


def test_without_a_third_measurement_the_two_pairs_decide():
    row = by_pairs(first(0.21, 0.208, 0.212), [again(17.5, 17.3, 17.7), None], 0.05)
    assert row.regression and "confirmed by a new pair of processes" in row.reason


def test_three_pairs_that_leave_a_regression_open_are_joined_by_two_more():
    # r29: a numpy function made 10 % slower, three pairs at +13.3 %, +5.8 %, +13.3 %: with two
    # degrees of freedom its interval ran from below zero to +24 % (inconclusive, a miss).
    three = [again(5.8, 5.6, 6.0), again(13.3, 13.1, 13.5)]
    before = first(0.133, 0.131, 0.135)
    found = across(before, three)
    assert still_open(found, 0.05)
    # Two more pairs near the truth: four degrees of freedom and four new pairs resolve it.
    five = [*three, again(9.6, 9.4, 9.8), again(10.4, 10.2, 10.6)]
    assert not still_open(across(before, five), 0.05)
    row = by_pairs(before, five, 0.05)
    assert row.verdict == "slower" and row.regression and row.confirmed
    assert row.noise_source.startswith("5 pairs of processes in this job")
    assert "a third pair +13.3% [+13.1%, +13.5%], then +9.6% [+9.4%, +9.8%], then +10.4%" in (
        row.reason
    )
    # Unchanged code that read +3 % twice by offsets: two more pairs near zero withdraw it.
    fluke = [
        again(2.9, 2.8, 3.0),
        again(0.1, -0.1, 0.3),
        again(-0.4, -0.6, -0.2),
        again(0.6, 0.4, 0.8),
    ]
    assert still_open(across(first(0.032, 0.031, 0.033), fluke[:2]), 0.03)
    row = by_pairs(first(0.032, 0.031, 0.033), fluke, 0.03)
    assert row.verdict == "inconclusive" and not row.regression


def test_a_new_pair_that_leaves_a_regression_open_sends_it_to_more_pairs():
    # r49, beside the neighbour: a Keras CNN made 5 % slower, first +6.6 % [+3.1, +10.3], then
    # +2.0 % [-3.4, +7.7] -- neither agreeing nor ruling the threshold out; it was withdrawn.
    assert to_more_pairs(first(0.066, 0.031, 0.103), again(2.0, -3.4, 7.7), 0.05)
    # A new pair that rules the threshold out withdraws it, as before (r49: +6.4 %, then +0.7 %
    # [-2.4, +3.9], within each other's reach).
    assert not to_more_pairs(first(0.064, 0.016, 0.113), again(0.7, -2.4, 3.9), 0.05)


def test_pairs_measured_with_more_rounds_say_so_in_the_row():
    # A regression the new pair could not tell, measured once more with 4x the rounds and left
    # open, goes to the pairs' spread: the text must not pass that pair off as a plain one.
    before = first(0.066, 0.031, 0.103)
    later = [again(2.0, -3.4, 7.7), with_rounds(again(1.6, -5.8, 9.5), 4)]
    later += [with_rounds(again(5.2, 1.0, 9.4), 4), with_rounds(again(4.4, 0.2, 8.6), 4)]
    row = by_pairs(before, later, 0.05)
    assert "again +2.0% [-3.4%, +7.7%], a third pair +1.6% [-5.8%, +9.5%] (4x the rounds)" in (
        row.reason
    )
    assert "then +5.2% [+1.0%, +9.4%] (4x the rounds)" in row.reason
    # A pair with the first pair's rounds (or fewer) is shown as it was.
    assert with_rounds(again(2.0, -3.4, 7.7), 1) == again(2.0, -3.4, 7.7)


def test_five_pairs_left_open_leaning_slower_are_joined_by_more():
    before = first(0.198, 0.19, 0.206)
    five = [again(1.6, 1.4, 1.8), again(14.5, 14.3, 14.7), again(-0.5, -0.7, -0.3)]
    five.append(again(12.4, 12.2, 12.6))
    found = across(before, five)
    assert found is not None and leans_open(found, 0.10)  # +7 %, from below zero past 10 %
    # Leaning under half the threshold: no more pairs, however open.
    low = [again(1.6, 1.4, 1.8), again(9.5, 9.3, 9.7), again(-0.5, -0.7, -0.3), again(2.4, 2, 3)]
    assert still_open(across(first(0.16, 0.15, 0.17), low), 0.10)
    assert not leans_open(across(first(0.16, 0.15, 0.17), low), 0.10)
    # Four more at +7 %: eight new pairs' mean, eight degrees of freedom, a regression.
    nine = [*five, *(again(7.0, 6.8, 7.2) for _ in range(MOST - 5))]
    row = by_pairs(before, nine, 0.10)
    assert row.verdict == "slower" and row.regression and row.confirmed
    assert row.noise_source.startswith(f"{MOST} pairs of processes in this job")
    assert 0 < row.low < 0.07 < row.high


def swapped(change: float, low: float, high: float) -> dict[str, object]:
    return {**again(change, low, high), "roles_swapped": True}


def test_three_pairs_that_agree_by_chance_on_unchanged_code_do_not_fail_it():
    # x39: an unchanged 25 us Python function whose pairs of processes spread 4-5 %. Three pairs
    # read it +5.5 %, +4.5 % (the roles swapped) and +7.8 %, and the gate failed it at +6.1 %
    # [+1.1, +11.5], 97.5 % sure on 2 degrees of freedom.
    before = first(0.055, 0.048, 0.062)
    later = [swapped(4.5, 4.1, 4.8), again(7.8, 7.3, 8.3)]
    found = across(before, later)
    assert found is not None and found.low > 0  # its 95 % interval lies above zero
    row = by_pairs(before, later, 0.05)
    assert not row.regression and row.verdict == "slower"  # sure of a slowdown, not of a regression
    # Two more pairs measure it: those three are not sure enough at 99.5 %.
    assert still_open(found, 0.05) and leans_open(found, 0.05)
    # Where the two more pairs read what unchanged code does, nothing is left of it.
    five = [*later, swapped(-3.7, -4.1, -3.3), again(-0.3, -0.7, 0.1)]
    row = by_pairs(before, five, 0.05)
    assert not row.regression and row.verdict == "inconclusive"
    assert row.low is not None and row.low < 0


# Trial 75: an unchanged numpy z-score over 200,000 values, whose processes run at two or three
# speeds about 10 % apart (large temporaries mapped and unmapped every call), read +8.9 %, +8.3 %
# (the roles swapped) and +10.4 % by three pairs, and failed a 10 % gate at +9.1 % [+6.1, +12.2].
SAME_SPEED_DRAWN = [swapped(8.3, 7.9, 8.7), again(10.4, 10.0, 10.8)]


@pytest.mark.parametrize("threshold", [0.10, 0.05])  # under the change, and past it
def test_three_pairs_sure_of_a_slowdown_do_not_fail_it_alone(threshold):
    before = first(0.089, 0.085, 0.093)
    found = across(before, SAME_SPEED_DRAWN)
    assert found is not None and sure_slower(found) and found.high >= threshold
    assert too_few(found, threshold, 3) and not still_open(found, threshold)
    row = by_pairs(before, SAME_SPEED_DRAWN, threshold)
    assert not row.regression and row.verdict == "slower"
    assert f"a regression fails only on {FEWEST} pairs or more" in row.reason
    # Two more pairs drawn at the same speeds: five pairs agree, and it fails.
    five = [*SAME_SPEED_DRAWN, swapped(9.0, 8.6, 9.4), again(9.6, 9.2, 10.0)]
    row = by_pairs(before, five, threshold)
    assert row.regression and row.confirmed and row.verdict == "slower"
    assert "fails only on" not in row.reason
    # Two more at other speeds, as a process offset reads: it does not fail.
    other = [swapped(-1.0, -1.4, -0.6), again(0.2, -0.2, 0.6)]
    assert not by_pairs(before, [*SAME_SPEED_DRAWN, *other], threshold).regression


def test_three_pairs_too_few_to_fail_a_slowdown_send_it_to_more(tmp_path):
    before = first(0.089, 0.085, 0.093)
    spread = Spread(
        {before.nodeid: before},
        {before.nodeid: 0.10},
        {before.nodeid: 1},
        Nested("HEAD", 10.0, tmp_path, (), None),
        {},
    )
    later = {before.nodeid: list(SAME_SPEED_DRAWN)}
    # Not open as still_open means it (they are sure of a slowdown), but three are too few.
    assert spread._left(later, still_open) == [before.nodeid]
    # The further pairs really run: a nested session in a folder that is no git checkout, which
    # breaks, and the summary line says which rows were sent and why.
    broken, note = spread.further(later)
    assert broken == {before.nodeid}
    assert "1 that three pairs left open measured by 2 more" in note
    assert f"(1 sure of a slowdown: a regression needs {FEWEST} pairs)" in note
    # Five pairs that agree are enough: none is sent further.
    five = [*SAME_SPEED_DRAWN, swapped(9.0, 8.6, 9.4), again(9.6, 9.2, 10.0)]
    assert spread._left({before.nodeid: five}, leans_open) == []


def test_an_offset_that_comes_with_the_leading_role_is_taken_out_of_the_pairs_spread():
    # Trial 26: an unchanged 235 us Python function, five pairs, the 2nd and 4th swapped.
    later = [
        swapped(-2.4, -3.1, -1.7),
        again(1.7, 0.6, 2.7),
        swapped(-3.0, -3.9, -2.2),
        again(2.5, 1.9, 3.1),
    ]
    found = across(first(0.026, 0.021, 0.031), later)
    assert found is not None
    # The offset flips sign with the roles; the code's change is what both roles share.
    assert abs(found.estimate) < 0.005
    assert -0.03 < found.low < 0 < found.high < 0.03  # within the 5 % threshold, either way
    assert "the leading process +2." in found.source
    # Counted as spread between the pairs instead, it leaves 5 % open.
    plain = across(first(0.026, 0.021, 0.031), [{**row, "roles_swapped": False} for row in later])
    assert plain is not None and plain.low < -0.01 and plain.high > 0.03


def test_a_real_slowdown_keeps_its_sign_in_both_roles_and_stands_out_of_the_offset():
    later = [swapped(2.4, 1.8, 3.0), again(7.4, 6.8, 8.0), swapped(2.6, 2.0, 3.2)]
    found = across(first(0.076, 0.07, 0.082), later)
    assert found is not None
    assert found.estimate == pytest.approx(0.05, abs=0.003)
    assert found.low > 0.02  # the change is shown, the offset is not mistaken for it


def test_pairs_in_one_role_only_are_judged_on_their_spread():
    found = across(first(0.057, 0.056, 0.059), [again(6.1, 5.9, 6.4), again(2.45, 2.36, 2.54)])
    assert found is not None and "roles taken in turn" not in found.source


def test_pairs_whose_spread_rules_the_threshold_out_call_the_row_unchanged():
    # Trial 26's unchanged Python function, sent to new pairs at +2.6 % by its first pair.
    row = replace(first(0.026, 0.021, 0.031), verdict="inconclusive", regression=False)
    later = [
        swapped(-2.4, -3.1, -1.7),
        again(1.7, 0.6, 2.7),
        swapped(-3.0, -3.9, -2.2),
        again(2.5, 1.9, 3.1),
    ]
    settled = by_pairs(row, later, 0.05)
    assert settled.verdict == "unchanged" and settled.regression is False
    assert -0.015 < settled.low < 0 < settled.high < 0.015
    # Pairs spread too widely to rule 5 % out stay inconclusive.
    wide = [again(-6.0, -7.0, -5.0), again(7.0, 6.0, 8.0), again(-5.5, -6.5, -4.5)]
    assert by_pairs(row, [*wide, again(6.5, 5.5, 7.5)], 0.05).verdict == "inconclusive"
