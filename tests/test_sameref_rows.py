"""Rows of a same-job comparison from paired rounds, and the advice an unresolved row gives."""

from __future__ import annotations

import math
import random
import re
import statistics
from dataclasses import replace

import pytest

from pytest_tpu.gate.lines import gate_lines
from pytest_tpu.results import BenchResult
from pytest_tpu.sameref.rows import compare_one, doubtful, more_rounds
from pytest_tpu.sameref.turns import HEAD, Rounds, turn_of

NODEID = "test_a.py::test_step"


def paired(
    pairs: int, spread: float, seed: int, slower: float = 0.0, seconds: float = 0.1
) -> tuple[list, list, Rounds]:
    """Rounds of a step of ``seconds`` in ABBA order: the machine's drift hits both rounds of a
    pair, each round has its own noise of ``spread`` (log scale)."""
    rng = random.Random(seed)
    turns = list(range(2 * pairs))
    head_turns = [t for t in turns if turn_of(t) == HEAD]
    base_turns = [t for t in turns if turn_of(t) != HEAD]
    drift = {t // 2: math.exp(rng.gauss(0, 0.05)) for t in turns}
    head = [
        seconds * drift[t // 2] * (1 + slower) * math.exp(rng.gauss(0, spread)) for t in head_turns
    ]
    base = [seconds * drift[t // 2] * math.exp(rng.gauss(0, spread)) for t in base_turns]
    return head, base, Rounds(head=head_turns, base=base_turns)


def row_of(pairs: int, spread: float, seed: int, slower: float = 0.0, seconds: float = 0.1):
    head, base, rounds = paired(pairs, spread, seed, slower, seconds)
    result = BenchResult(NODEID, "test_step", None, {}, {}, tuple(head))
    return compare_one(result, base, rounds, 0.05)


def suggested(reason: str) -> int:
    found = re.search(
        r"about (\d+) paired rounds(?: \(about \d+ (?:s|min) a side\))? would resolve 5.0% "
        r"\(instead of (\d+);",
        reason,
    )
    assert found, reason
    return int(found.group(1))


def test_an_unresolved_row_says_how_many_rounds_would_resolve_the_threshold():
    ratios = []
    for seed in range(9):
        first = row_of(10, 0.12, seed)
        assert first.verdict == "inconclusive"
        assert "cannot resolve a 5.0% change here" in first.reason
        advised = suggested(first.reason)
        assert advised > 10
        # Taking the advice: as many rounds of the same noise resolve it, give or take the
        # first estimate's own uncertainty (so the median over a few tries is looked at).
        again = row_of(advised, 0.12, seed + 100)
        assert again.detectable is not None
        ratios.append(again.detectable / 0.05)
    assert 0.6 < statistics.median(ratios) < 1.5, ratios


def test_a_resolved_row_gives_no_advice():
    quiet = row_of(40, 0.01, 1)
    assert quiet.verdict == "unchanged"
    assert "paired rounds" not in quiet.reason
    slower = row_of(40, 0.01, 2, slower=0.10)
    assert slower.verdict == "slower" and slower.regression
    assert "paired rounds" not in slower.reason


def test_advice_needs_a_finite_detectable_change_above_the_threshold():
    assert more_rounds(math.inf, 0.05, 10) == ""
    assert more_rounds(0.04, 0.05, 10) == ""
    assert "about 83 paired rounds would resolve 5.0% (instead of 10;" in more_rounds(
        0.15, 0.05, 10
    )
    # A pair that measured the row again with 4x its rounds says whose rounds it counted
    # (trial 37: "instead of 160" beside its own rounds=40).
    again = more_rounds(0.15, 0.05, 160, factor=4)
    assert (
        "about 1313 paired rounds would resolve 5.0% (this pair had 160, 4x the benchmark" in again
    )


def test_advice_on_more_rounds_says_how_long_they_would_take():
    # New-user trial 42 read "about 3553 paired rounds" for rounds of 150 ms: 9 minutes a side.
    long = more_rounds(0.15, 0.05, 400, factor=4, seconds=0.15)
    # Beside the rounds it times, not beside what the pair had (trial 46 read it so).
    assert "about 3283 paired rounds (about 8 min a side) would resolve 5.0% (this pair" in long
    assert "had 400, 4x the benchmark's own;" in long
    short = more_rounds(0.15, 0.05, 10, 1, 0.2)
    assert "rounds (about 17 s a side) would resolve 5.0% (instead of 10;" in short


def test_an_unresolved_row_of_long_rounds_suggests_shorter_ones():
    # An epoch a round pairs rounds 200 ms apart; a step a round resolved 2-4 times finer for the
    # same work (experiments/compare_ref/granularity.py).
    epoch = row_of(10, 0.12, 3, seconds=0.2)
    assert epoch.verdict == "inconclusive"
    found = re.search(
        r"; or shorter rounds of the same work .*: its head rounds took a median (\d+) ms",
        epoch.reason,
    )
    assert found and 150 < int(found.group(1)) < 270, epoch.reason
    assert suggested(epoch.reason) > 10  # the advice on more rounds stays, first
    # ... with what those rounds would take: the rounds it advises times a round's length.
    took = re.search(r"paired rounds \(about (\d+) s a side\) would resolve", epoch.reason)
    assert took, epoch.reason
    assert abs(int(took[1]) - suggested(epoch.reason) * int(found[1]) / 1000) <= 1, epoch.reason
    # Short rounds, or long ones that resolved the threshold, get no such advice.
    step = row_of(10, 0.12, 3, seconds=0.01)
    assert step.verdict == "inconclusive" and "shorter rounds" not in step.reason
    assert "shorter rounds" not in row_of(40, 0.01, 1, seconds=0.2).reason


def test_a_row_s_times_agree_with_its_change_when_one_side_ran_rounds_alone():
    head, base, rounds = paired(30, 0.01, 3, slower=0.08)
    # The base left early: the head's last 60 rounds ran alone, without the turns, faster.
    alone = list(range(2 * 30, 2 * 30 + 60))
    result = BenchResult(NODEID, "test_step", None, {}, {}, tuple(head + [0.06] * len(alone)))
    row = compare_one(result, base, Rounds(head=rounds.head + alone, base=rounds.base), 0.05)
    assert row.verdict == "slower" and row.change is not None and row.change > 0.05
    # Seen before: "134.3 µs  138.6 µs  -1.62%", the averages of each side's own rounds.
    assert row.current_value / row.base_value - 1 == pytest.approx(row.change, rel=1e-9)
    assert row.base_value == pytest.approx(0.1, rel=0.1)


@pytest.mark.parametrize(
    ("slower", "verdict"),
    [
        # Precise and under a quarter of the threshold: within it, whatever offset the
        # processes have.
        (0.01, "unchanged"),
        # A quarter to half of it: the rounds rule the threshold out, an offset of a percent or
        # two between the processes does not (r47: a +5 % commit read +1.7 to +2.5 % by one
        # pair, `unchanged`; r86: 4 of 10 misses of a +5 % commit read +1.7 to +2.5 %).
        (0.018, "inconclusive"),
        # Between half the threshold and the threshold: an offset between two processes can be
        # that large, and one pair cannot show it (an A/A row read +2.7 % [+2.5, +2.9] "slower").
        (0.03, "inconclusive"),
        # An improvement that size hides no regression: not "a slowdown not ruled out" (trial 14).
        (-0.03, "unchanged"),
        # Nor does one from a quarter to half of it, which says why it is no verdict (trial 31).
        (-0.018, "unchanged"),
        # A regression goes to a new pair; an improvement of the threshold is no offset.
        (0.10, "slower"),
        (-0.10, "faster"),
    ],
)
def test_one_pair_of_processes_does_not_call_a_change_under_the_threshold(slower, verdict):
    row = row_of(200, 0.005, 4, slower=slower)
    assert row.low is not None and row.high is not None and row.high - row.low < 0.01  # precise
    assert row.verdict == verdict
    if slower == 0.03:
        assert "in one pair of processes, between half its threshold and" in row.reason
    if slower == 0.018:
        assert "in one pair of processes, a quarter to half its threshold (5.0%)" in row.reason
        assert "a slowdown of the threshold is not ruled out" in row.reason  # as the gate says
        assert "the pair is 99 % sure of a slowdown, so new pairs of processes measure it" in (
            row.reason
        )
    if verdict == "inconclusive":
        assert f"{row.change:+.1%}" in row.reason
    if slower in (-0.03, -0.018):
        assert f"{row.change:+.1%} in one pair of processes: not a slowdown" in row.reason
    if slower == 0.01:
        assert row.reason == ""  # a change under a quarter of the threshold needs no word
    # Only a slowdown from a quarter of the threshold to the threshold, one pair sure of it, is
    # measured by new pairs under --fail-on-regression: an offset between processes may hide a
    # regression behind it.
    assert doubtful(row, 0.05) is (slower in (0.018, 0.03))


def test_one_pair_leaves_room_under_the_threshold_for_an_offset_between_its_processes():
    # r51, quiet: a Keras CNN made 5 % slower read +1.1 % [-1.6, +3.9] in one pair of ten rounds
    # and was called `unchanged` (the same commit's `benchmark(fn)` row read +5.0 to +6.5 % in
    # three pairs). Rounds that rule out 5 % but not 2.5 % leave no room for an offset between
    # the two processes.
    rows = [row_of(10, 0.04, seed) for seed in range(40)]
    wide = [r for r in rows if r.change < 0.0125 and 0.025 <= r.high < 0.05 and r.low > -0.05]
    assert len(wide) >= 3
    for row in wide:
        assert row.verdict == "inconclusive"
        assert f"{row.change:+.1%} [" in row.reason and "but not half of it" in row.reason
        # Nothing more is measured for it: it costs a passing session nothing.
        assert not doubtful(row, 0.05)
    # Rounds precise enough to rule out half the threshold still say `unchanged`.
    assert row_of(200, 0.005, 4, slower=0.001).verdict == "unchanged"


def test_one_pair_that_could_not_have_caught_the_threshold_does_not_say_unchanged():
    # Trial 23: a Keras LSTM made about 6 % slower read -1.4 % [-4.6, +2.0] in one pair,
    # "detects 5.8 %", and was called `unchanged`; its pairs of processes read -1.4 % to +18 %.
    # Rounds that rule the threshold out only where they read an improvement, and could not have
    # caught it reliably, leave the row `inconclusive` (and cost nothing more).
    rows = [row_of(10, 0.035, seed, slower=-0.01) for seed in range(60)]
    coarse = [
        r
        for r in rows
        if r.low > -0.05 and r.high < 0.025 and r.change < 0.0125 and r.detectable > 0.05
    ]
    assert len(coarse) >= 3
    for row in coarse:
        assert row.verdict == "inconclusive"
        assert "could not have caught its threshold (5.0%) reliably" in row.reason
        assert "a slowdown of the threshold is not ruled out" in row.reason
        assert f"they catch {row.detectable:.1%} 4 times in 5" in row.reason
        assert not doubtful(row, 0.05)
    # Every one-pair `unchanged` row could have caught the threshold.
    assert all(r.detectable <= 0.05 for r in rows if r.verdict == "unchanged")
    # The passing gate counts such a row among those that could hide a slowdown.
    [line] = gate_lines([replace(coarse[0], threshold=0.05)], 5.0, "main")
    said = "INCONCLUSIVE (no regression shown), 1 checked; 1 inconclusive: a 5% slowdown"
    assert f"{said} there is neither shown nor" in line


def test_an_inconclusive_row_under_the_threshold_says_what_one_pair_leaves_open():
    # Trial 23: "no slowdown of 5.0% (the interval stays under it)" on a one-pair row that the
    # passing line counted among the rows that could hide a 5 % slowdown.
    rows = [row_of(10, 0.06, seed, slower=-0.02) for seed in range(60)]
    open_ = [r for r in rows if r.verdict == "inconclusive" and 0.025 <= r.high < 0.05]
    assert open_
    for row in open_:
        assert "no slowdown of 5.0%" not in row.reason
        # Not ruled out first, as the gate's line says (trial 32: read as a contradiction), then
        # why: whose rounds exclude what (trial 70 read "not ruled out; the rounds exclude the
        # threshold" as a contradiction too).
        assert (
            "a slowdown of its threshold (5.0%) is not ruled out: these two processes' rounds "
            "exclude the threshold but not half of it (2.5%)" in row.reason
        )
    # So for one whose rounds could not have caught the threshold (trial 23, after the rule
    # above: -1.9% [-5.3, +1.6], "detects 6.0%").
    coarse = [
        r for r in rows if r.verdict == "inconclusive" and r.high < 0.025 < 0.05 < r.detectable
    ]
    assert coarse
    for row in coarse:
        assert "no slowdown of 5.0%" not in row.reason
        assert "could not have caught its threshold (5.0%) reliably" in row.reason
        assert "a slowdown of the threshold is not ruled out" in row.reason


def test_a_slowdown_under_the_threshold_whose_interval_reaches_it_goes_to_new_pairs():
    # Trial 24: an XLA step made 5-15 % slower read +2.7 % [+0.1, +5.3] in one pair, "catches
    # 4.3 %": past half the threshold, the threshold not ruled out, yet measured by neither new
    # pairs (not 99 % sure) nor more rounds (they could have caught it). New pairs measure it.
    rows = [row_of(pairs, 0.03, seed, slower=0.035) for pairs in (30, 40) for seed in range(80)]
    leaning = [
        r
        for r in rows
        if r.verdict == "inconclusive" and 0.025 <= r.change < 0.05 and r.confidence < 0.99
    ]
    reaching = [r for r in leaning if r.high >= 0.05 and r.detectable <= 0.05]
    assert len(reaching) >= 3
    assert all(doubtful(r, 0.05) for r in reaching)
    # Its interval under the threshold: the threshold is ruled out for these two processes.
    assert not any(doubtful(r, 0.05) for r in leaning if r.high < 0.05)
    # Rounds too few to have caught the threshold are given more of them instead (resolve).
    coarse = [row_of(10, 0.04, seed, slower=0.035) for seed in range(20)]
    coarse = [r for r in coarse if 0.025 <= r.change < 0.05 and r.detectable > 0.05]
    assert coarse and not any(doubtful(r, 0.05) for r in coarse)


@pytest.mark.parametrize(("spread", "seed"), [(0.01, 0), (0.03, 4)])
def test_a_row_a_quarter_to_half_its_threshold_says_whether_new_pairs_measure_it(spread, seed):
    # New-user trial 43: "new pairs of processes measure it where the pair is sure of a slowdown"
    # on a row 96 % sure, which none measured, read as a promise.
    row = row_of(60, spread, seed, slower=0.018)
    assert "a quarter to half its threshold (5.0%)" in row.reason, row.reason
    measured = doubtful(row, 0.05)
    assert measured is (row.confidence >= 0.99)
    said = "the pair is 99 % sure of a slowdown, so new pairs of processes measure it"
    assert (said in row.reason) is measured, row.reason
    assert (
        "only where its pair is 99 % sure of a slowdown, and this one is not" in row.reason
    ) is (not measured)


def test_one_pair_s_improvement_reaching_a_speed_up_of_the_threshold_is_not_unchanged():
    # New-user trial 73: "-7.2% [-11.9, -2.2] unchanged" at 10 %, beside the README's
    # "unchanged: the interval lies within the threshold either way".
    rows = [row_of(12, 0.03, seed, slower=-0.04) for seed in range(60)]
    # (Rounds that could not have caught the threshold say so instead, and stay open.)
    catching = [r for r in rows if r.detectable is not None and r.detectable <= 0.05]
    reaching = [r for r in catching if r.change > -0.05 and r.low <= -0.05 and r.high < 0]
    assert reaching
    for row in reaching:
        assert row.verdict == "inconclusive", row
        assert "is neither shown nor ruled out" in row.reason, row.reason
    # ... those one pair was sure of, as well as those it was not.
    sure = [r for r in reaching if "in one pair of processes: not a slowdown" in r.reason]
    assert sure
    for row in sure:
        assert f"{row.change:+.1%} [" in row.reason
        assert "a speed-up of the threshold (5.0%) is neither shown nor ruled out" in row.reason
    # It rules a slowdown out: the gate passes, and says so.
    said = gate_lines([replace(sure[0], threshold=0.05)], 5.0, "main")
    assert said[0].startswith("regression gate (5%): passed"), said
    assert "each ruling a slowdown of its threshold out" in said[0]
    # Within the threshold either way it stays unchanged, as before.
    within = [r for r in catching if r.low > -0.05 and r.high < 0 and r.change <= -0.0125]
    assert within and all(r.verdict == "unchanged" for r in within)
