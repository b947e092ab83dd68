"""Rows of a same-job comparison: head's rounds against base's, pair by pair (plain data)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_tpu.gate.compare import Measured, Row, decide, row_of, tail
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import (
    FAIL_CONFIDENCE,
    ONE_PAIR_HIDES,
    SPREAD_OF_PAIRS,
    TAIL,
    Change,
    by_one_pair,
    clean,
    one_pair_cannot_catch,
    one_pair_may_hide,
    pair_differences,
    paired_change,
    paired_mean_change,
    paired_rounds,
)
from pytest_tpu.results import BenchResult
from pytest_tpu.sameref.nested import factors
from pytest_tpu.sameref.turns import Rounds

TAIL_ENV = "PYTEST_TPU_REF_TAIL"  # node ids a nested session judges on the mean, as JSON
# How far apart two processes with the same code were seen, for the notes of one-pair rows: new
# pairs of processes read a 0.4 ms regex tokenizer from -7.6 % to +15.1 % in new-user trial 45.
OFFSETS_SEEN = "a percent or two for most code measured here, up to 15 % for pure-Python code"

# What a one-pair row a quarter to half its threshold says where new pairs will not measure it; a
# row that is itself a re-measurement's new pair says it of further pairs (``resolve``).
NOT_SURE_ENOUGH = (
    "new pairs of processes measure such a row only where its pair is 99 % sure of a slowdown, "
    "and this one is not"
)
NOT_SURE_AGAIN = (
    "a further pair measures such a row only where this new pair is 99 % sure of a slowdown, "
    "and this one is not"
)


def _measured(turns: Sequence[int], samples: Sequence[float]) -> list[tuple[int, float]]:
    """The measured rounds with their turns: they are the last runner calls of a benchmark."""
    if not samples or len(turns) < len(samples):
        return []
    return list(zip(turns[-len(samples) :], samples, strict=True))


def _geomean(values: Sequence[float]) -> float | None:
    data = sorted(clean(values))
    if not data:
        return None
    cut = len(data) // 4
    middle = data[cut : len(data) - cut]
    return math.exp(math.fsum(math.log(x) for x in middle) / len(middle))


def _common(nodeid: str) -> dict[str, Any]:
    return {"nodeid": nodeid, "metric": "time", "unit": "s", "higher_is_better": False}


def _values(
    head: Sequence[tuple[int, float]], base: Sequence[tuple[int, float]], found: Change | None
) -> dict[str, Any]:
    """A row's base and current round times, the same statistic as its change: the base's paired
    rounds, and that times the paired change. (Rounds one side ran alone, faster without the
    turns, made the two sides' own averages disagree with the change, even in sign.)"""
    pairs = {turn // 2 for turn, _ in head}
    base_value = _geomean([value for turn, value in base if turn // 2 in pairs])
    if found is None or base_value is None:
        return {}
    return {"base_value": base_value, "current_value": base_value * (1 + found.estimate)}


def compare_one(
    head: BenchResult, base_samples: Sequence[float], rounds: Rounds, threshold: float
) -> Row:
    """The row of a benchmark measured on both sides."""
    head_rounds = _measured(rounds.head, head.samples)
    base_rounds = _measured(rounds.base, base_samples)
    differences = pair_differences(head_rounds, base_rounds)
    found = paired_change(differences)
    values = _values(head_rounds, base_rounds, found) or {
        "base_value": _geomean(base_samples),
        "current_value": _geomean(head.samples),
    }
    if found is None:
        return _unpaired(head.nodeid, values)
    # Without the first pair: its rounds may be the first calls (``history.steady``).
    steady = paired_rounds(head_rounds, base_rounds)[1:]
    if head.nodeid in judged_on_the_mean():
        return _on_the_mean(head.nodeid, steady, threshold) or _unpaired(head.nodeid, values)
    measured = Measured(found, "paired", None)
    row = row_of(measured, decide(measured, threshold), {**values, **_common(head.nodeid)}, False)
    row = _tail(one_pair(row, threshold), steady, threshold)
    seconds = _round_seconds(head)
    more = more_rounds(
        found.detectable, threshold, len(differences), factors().get(head.nodeid, 1.0), seconds
    )
    hint = "; or ".join(
        part for part in (more, shorter_rounds(found.detectable, threshold, seconds)) if part
    )
    return (
        replace(row, reason=f"{row.reason}; {hint}")
        if row.verdict == "inconclusive" and hint
        else row
    )


def _unpaired(nodeid: str, values: Mapping[str, Any]) -> Row:
    return Row(
        status="compared",
        verdict="inconclusive",
        reason="no rounds ran next to each other (one side ran alone)",
        **values,
        **_common(nodeid),
    )


def judged_on_the_mean() -> set[str]:
    """The benchmarks a nested session re-measures on the mean of all rounds: a first pair
    failed them on slow calls in the tail, and a new pair must agree on that statistic, not on
    the middle half of its ratios (seen: a miss on every 5th call read +52 % on the means, and
    the new pairs' middle halves +5 to +6 %: withdrawn)."""
    try:
        found = json.loads(os.environ.get(TAIL_ENV) or "[]")
    except ValueError:
        return set()
    return {str(nodeid) for nodeid in found} if isinstance(found, list) else set()


def _mean_values(pairs: Sequence[tuple[float, float]]) -> dict[str, float]:
    count = len(pairs)
    return {
        "base_value": math.fsum(b for _, b in pairs) / count,
        "current_value": math.fsum(h for h, _ in pairs) / count,
    }


def _on_the_mean(nodeid: str, pairs: Sequence[tuple[float, float]], threshold: float) -> Row | None:
    """The row of a benchmark judged on the paired means alone, by the gate's usual rule."""
    found = paired_mean_change(pairs)
    if found is None:
        return None
    measured = Measured(found, "paired", None)
    common = {**_mean_values(pairs), **_common(nodeid)}
    return replace(row_of(measured, decide(measured, threshold), common, False), statistic=TAIL)


def _tail(row: Row, pairs: Sequence[tuple[float, float]], threshold: float) -> Row:
    """``row`` failed on the paired rounds' means where slow calls in the tail made head's the
    threshold or more slower (``gate.tail``); a new pair confirms it on the means."""
    found = paired_mean_change(pairs)
    if found is None:
        return row
    return tail(row, Measured(found, "paired", None), threshold, _mean_values(pairs))


def one_pair(row: Row, threshold: float) -> Row:
    """``row`` as far as one pair of processes can tell it.

    Two processes with the same code can differ by a percent or two for a whole session (where
    their buffers land, how their dicts hash), and the rounds of one pair cannot show it: their
    interval is the rounds' own. Only a regression is measured again by a new pair (``confirm``),
    so one pair's change between half the threshold and the threshold is no verdict either way:
    ``slower`` or ``faster`` would blame the code for the processes, and ``unchanged`` could hide
    a regression of the threshold that an offset made look smaller. (Measured here, A/A, a 37 µs
    numpy function with a bursty neighbour: 3 of 10 rows ``slower`` at +2.5 to +2.7 %, intervals
    ±0.2 %; between sessions its A/A changes had a spread of 1.7 %.) A change under half the
    threshold stays ``unchanged``, and an improvement of the threshold or more ``faster`` (new
    pairs check it, ``confirm``). A slowdown between half the threshold and the threshold is
    measured by new pairs (``doubtful``), and their spread decides.

    An improvement between half the threshold and the threshold is ``unchanged``: no offset of
    that size can hide a regression behind it, and ``inconclusive`` would say a slowdown is not
    ruled out where it is (trial 14: -2.6 % [-2.7, -2.5] ``inconclusive`` beside +1.9 %
    ``unchanged``); where its interval reaches a speed-up of the threshold it is
    ``inconclusive`` (``_speedup_open``), which the gate does not count as hiding a slowdown.

    A change under a quarter of the threshold whose interval reaches half of it is
    ``inconclusive`` (``leaves_no_room``): its rounds rule the threshold out, but with an offset
    of half the threshold taken as possible (as above), not the regression.

    A change one pair's rounds could not have caught reliably (``cannot_catch``: its detectable
    change past the threshold) is ``inconclusive`` rather than ``unchanged`` even where its
    interval rules the threshold out: that interval is the two processes', and only a pair that
    could have seen the threshold vouches for the code (trial 23, a Keras LSTM).

    A slowdown from a quarter to half the threshold is ``inconclusive`` too (``leans_slower``):
    its rounds rule the threshold out, an offset between the processes does not. Where the pair
    is 99 % sure of it, new pairs measure it as they do a slowdown of half the threshold or more
    (``doubtful``). (r47, beside the bursty neighbour: 9 of 120 rows of a +5 % commit were called
    ``unchanged`` on one pair's -0.3 to +2.5 %, 7 of them in this band; r86, quiet: 4 of the 10
    misses of a +5 % commit read +1.7 to +2.5 % in one pair. A replay of r43's pairs under the
    rules of that day failed unchanged code now and then when new pairs measured this band; the
    spread between pairs has had to be 99.5 % sure since (``pairs.SURE``), and r88's replay
    failed none: experiments/compare_ref/RESULTS.md, "The band from a quarter".)
    """
    if row.change is None or row.regression:
        return row
    if row.verdict == "inconclusive" and row.high is not None and row.high < threshold:
        # Its interval rules the threshold out for these two processes; "no slowdown of the
        # threshold" beside a passing line that counts it among the rows that could hide one
        # read as a contradiction (trial 23): say what one pair leaves open.
        if leaves_no_room(row, threshold):
            return replace(row, reason=_no_room(row, row.change, threshold))
        if cannot_catch(row, threshold):
            return replace(row, reason=_coarse(row, row.change, threshold))
        return row
    if row.verdict not in ("slower", "faster", "unchanged"):
        return row
    if row.verdict == "unchanged" and leans_slower(row.change, threshold):
        # "Not ruled out" first, as the gate's line says it (trial 32 read "its rounds rule the
        # threshold out" beside "neither shown nor ruled out" as a contradiction). Whether new
        # pairs measure it is said of this row: "new pairs measure it where the pair is sure"
        # read as a promise on a row they never measured (new-user trial 43, at 96 %).
        then = (
            "the pair is 99 % sure of a slowdown, so new pairs of processes measure it"
            if sure_of_slowdown(row)
            else NOT_SURE_ENOUGH
        )
        why = (
            f"{row.change:+.1%} in one pair of processes, a quarter to half its threshold "
            f"({threshold:.1%}): a slowdown of the threshold is not ruled out: the pair's rounds "
            f"exclude it, but an offset between two processes with the same code ({OFFSETS_SEEN}) "
            f"could hide it; {then}"
        )
        return replace(row, verdict="inconclusive", reason=why)
    if row.verdict == "unchanged" and leaves_no_room(row, threshold):
        return replace(row, verdict="inconclusive", reason=_no_room(row, row.change, threshold))
    if row.verdict == "unchanged" and cannot_catch(row, threshold):
        return replace(row, verdict="inconclusive", reason=_coarse(row, row.change, threshold))
    # An improvement from a quarter of the threshold up says why it is no verdict, as the
    # slowdowns of that size do (trial 31: -2.2 % [-2.5, -1.9] ``unchanged`` without a word,
    # beside the session's line that reads such a change as inconclusive).
    improves = row.change < 0 and threshold * ONE_PAIR_HIDES <= -row.change < threshold
    if not (improves or under_threshold(row.change, threshold)):
        return row
    if row.change < 0 and cannot_catch(row, threshold):
        return replace(row, verdict="inconclusive", reason=_coarse(row, row.change, threshold))
    if row.change < 0 and row.low is not None and row.low <= -threshold:
        return replace(row, verdict="inconclusive", reason=_speedup_open(row, threshold))
    if row.change < 0:
        why = (
            f"{row.change:+.1%} in one pair of processes: not a slowdown, and an improvement "
            f"under the threshold ({threshold:.1%}) is not told from an offset between two "
            "processes with the same code"
        )
        return replace(row, verdict="unchanged", reason=why)
    why = (
        f"{row.change:+.1%} in one pair of processes, between half its threshold and the "
        f"threshold ({threshold:.1%}): the pair's rounds cannot tell a change from an offset "
        f"between two processes with the same code ({OFFSETS_SEEN}); new pairs of processes "
        "measure it"
    )
    return replace(row, verdict="inconclusive", reason=why)


def _speedup_open(row: Row, threshold: float) -> str:
    """Why one pair's improvement under the threshold whose interval reaches a speed-up of it is
    ``inconclusive``, not ``unchanged``: that word says the interval lies within the threshold
    either way (new-user trial 73 read ``-7.2% [-11.9, -2.2] unchanged`` at 10 % beside it). It
    rules a slowdown out, so the gate does not count it among the rows that could hide one."""
    return (
        f"{row.change:+.1%} [{pct(row.low)}, {pct(row.high)}] in one pair of processes: not a "
        f"slowdown, and a speed-up of the threshold ({threshold:.1%}) is neither shown nor ruled "
        "out: one pair's improvement under the threshold is not told from an offset between two "
        "processes with the same code"
    )


def _no_room(row: Row, change: float, threshold: float) -> str:
    return (
        f"{change:+.1%} [{pct(row.low)}, {pct(row.high)}] in one pair of processes: a slowdown "
        f"of its threshold ({threshold:.1%}) is not ruled out: these two processes' rounds "
        f"exclude the threshold but not half of it ({threshold / 2:.1%}), and an offset between "
        f"two processes with the same code, which one pair cannot show ({OFFSETS_SEEN}), could "
        "hide the rest"
    )


def _coarse(row: Row, change: float, threshold: float) -> str:
    return (
        f"{change:+.1%} [{pct(row.low)}, {pct(row.high)}] in one pair of processes, whose "
        f"rounds could not have caught its threshold ({threshold:.1%}) reliably (they catch "
        f"{row.detectable or math.inf:.1%} 4 times in 5): a slowdown of the threshold is not "
        "ruled out; their interval excludes it for these two processes, but an offset between "
        f"two processes with the same code, which one pair cannot show ({OFFSETS_SEEN}), could "
        "hide it"
    )


def cannot_catch(row: Row, threshold: float) -> bool:
    """Whether one pair's rounds could not have caught a slowdown of ``threshold`` reliably: its
    smallest detectable slowdown lies past it. Their interval may still rule the threshold out
    for those two processes, where it reads an improvement; but ``unchanged`` from one pair
    vouches for the code only where the pair could have seen the threshold. (Trial 23: a Keras
    LSTM made about 6 % slower read -1.4 % [-4.6, +2.0] in one pair, "detects 5.8 %", and was
    called ``unchanged``; its pairs of processes read -1.4 % to +18 % for that change, and -7 %
    to +13 % for unchanged code.)"""
    return one_pair_cannot_catch(row.detectable, threshold)


def one_pair_note(rows: Sequence[Row]) -> str:
    """What the intervals of rows that one pair of processes measured cover, or "" where there
    are none: their rounds, not an offset between processes. Said once under the counts (trial
    22: an unchanged 60 µs function read -3.89 % [-4.22, -3.57] ``unchanged``, "detects 0.6 %",
    and its intervals left out zero in 38 of 40 rows)."""
    alone = sum(row.status == "compared" and by_one_pair(row.noise_source) for row in rows)
    if not alone:
        return ""
    # One short line with the heading of the rules, not the rules themselves (trial 32: six
    # rules in one 660-character line, in every session's log).
    # "Each": beside "measured ... again in a new pair of processes", a bare "one pair" read as if
    # the rows measured again had been left out (trial 44).
    return (
        f"{alone} row(s) measured by one pair of processes each (the session's first pair, or the "
        "new pair that measured it again): their intervals and 'detects' are that pair's rounds' "
        "own; two processes with the same code can differ by more (a few "
        'percent for some code), and the gate allows for it (docs/compare-ref.md: "One pair of '
        'processes does not call a change under the threshold")'
    )


def doubtful(row: Row, threshold: float) -> bool:
    """Whether one pair measured a slowdown from a quarter of the threshold to the threshold that
    it was sure of, or one of half the threshold or more whose interval reaches the threshold
    (``one_pair`` left it ``inconclusive``):
    an offset between its two processes can make a regression of the threshold read that small,
    or an unchanged benchmark read that large, so new pairs measure it and their spread decides
    (``confirm``). (r43, the same job, quiet: a numpy function 4.7 % slower by a plain run read
    +2.7 % to +4.4 % in 12 of its 40 rows, each interval under a point wide, and was left
    ``inconclusive`` at a 5 % threshold; its first pairs of processes differed by 1.7 %
    (standard deviation) for the same change.) Where the rounds could not have caught the
    threshold, more rounds measure it instead (``resolve``). (New-user trial 24: an XLA step
    made 5-15 % slower read +2.7 % [+0.1, +5.3], "catches 4.3 %", and went to neither.)"""
    if row.status != "compared" or row.verdict != "inconclusive" or row.regression:
        return False
    if row.change is None or row.confidence is None or SPREAD_OF_PAIRS in row.noise_source:
        return False
    if leans_slower(row.change, threshold):
        return sure_of_slowdown(row)
    if not under_threshold(row.change, threshold):
        return False
    open_here = leaves_threshold_open(row, threshold) and not cannot_catch(row, threshold)
    return sure_of_slowdown(row) or open_here


def sure_of_slowdown(row: Row) -> bool:
    """Whether one pair is as sure of a slowdown as the gate must be to fail (99 %): what sends a
    slowdown under the threshold to new pairs (``doubtful``), and what its row says of them."""
    return row.confidence is not None and row.confidence >= FAIL_CONFIDENCE


def leaves_threshold_open(row: Row, threshold: float) -> bool:
    """Whether one pair's row leans slower by half the threshold or more, the least a ``slower``
    verdict asks, and its interval reaches the threshold: a regression it could neither find nor
    rule out. New pairs measure it where its rounds could have caught the threshold
    (``doubtful``), more rounds where they could not (``resolve``)."""
    change, high = row.change, row.high
    return change is not None and high is not None and change >= threshold / 2 and high >= threshold


def leaves_no_room(row: Row, threshold: float) -> bool:
    """Whether one pair's ``unchanged`` row leaves no room under its threshold for an offset
    between its two processes: its interval reaches half the threshold (``one_pair_may_hide``).
    (r51, quiet: a Keras CNN made 5 % slower read +1.1 % [-1.6, +3.9] in one pair of ten rounds
    and was called ``unchanged``; the same commit's ``benchmark(fn)`` row in that session read
    +6.5 %, +5.0 % and +6.3 % in three pairs.)"""
    if row.change is None or row.high is None:
        return False
    return one_pair_may_hide(row.change, row.high, threshold)


def leans_slower(change: float, threshold: float) -> bool:
    """Whether ``change`` lies from a quarter to half the threshold: more than one pair's
    ``unchanged`` can vouch for, and measured by new pairs only where that pair is sure of it
    (``doubtful``), not where it merely leaves the threshold open."""
    return threshold * ONE_PAIR_HIDES <= change < threshold / 2


def under_threshold(change: float, threshold: float) -> bool:
    """Whether ``change`` lies between half the threshold and the threshold: the least a
    ``slower`` verdict asks (``decide``), short of a regression."""
    return threshold / 2 <= change < threshold


def rounds_factor(detectable: float, threshold: float) -> float:
    """How many times its paired rounds a comparison that detects ``detectable`` needs to detect
    ``threshold``: within one job the uncertainty shrinks as one over the square root of their
    number (on the log scale)."""
    return (math.log1p(detectable) / math.log1p(threshold)) ** 2


def factor_within(detectable: float, threshold: float, most: int) -> int:
    """``rounds_factor`` as a whole factor for a new pair: at least 2 (fewer would not be worth a
    new pair), at most ``most``; ``most`` where nothing was detectable at all."""
    if not math.isfinite(detectable):
        return most
    return max(2, min(most, math.ceil(rounds_factor(detectable, threshold))))


# A new pair of processes that checks one pair's reading is there to draw another offset between
# processes, not to resolve finer than the first pair's rounds did: where those resolved far finer
# than the threshold, it takes fewer rounds, enough to resolve an eighth of it, and at least this
# share of the first pair's. (Measured here, passing sessions: four new pairs that checked three
# `benchmark(fn)` rows of a 77 µs numpy function, 4,300 rounds a side and +/-0.1 % in one pair, and
# a pedantic one, took 29 s of an 82 s session, their pairs reading -2.8 to +1.6 %, each to
# +/-0.1-0.5 %; with fewer rounds, four pairs that checked five such rows took 8 s.)
LEAN_SHARE = 1 / 8
LEAN_RESOLVES = 1 / 8  # of the threshold
LEAN_FEWEST_ROUNDS = 20  # benchmark.pedantic's rounds in a new pair with fewer of them


def lean_factor(row: Row, threshold: float) -> float:
    """The share of its first pair's rounds a new pair takes to check ``row``: 1 (all of them)
    unless they resolved finer than an eighth of the threshold, never under ``LEAN_SHARE``. A
    row failed on slow calls in the tail keeps them all: the tail needs its calls."""
    detectable = row.detectable
    if row.statistic == TAIL or detectable is None or not math.isfinite(detectable):
        return 1.0
    if not detectable > 0:
        return LEAN_SHARE
    return min(1.0, max(LEAN_SHARE, rounds_factor(detectable, threshold * LEAN_RESOLVES)))


def more_rounds(
    detectable: float, threshold: float, pairs: int, factor: float = 1.0, seconds: float = 0.0
) -> str:
    """How many paired rounds would resolve ``threshold``, when this many could not; ``factor``
    times the benchmark's own rounds, in a pair that measures it again (trial 37 read "about 163
    paired rounds instead of 160" beside its `rounds=40` and could not tell what to set), and,
    given a round's ``seconds``, how long they would take a side (new-user trial 42 read "about
    3553 paired rounds" for rounds of 150 ms and could not see that it meant 9 minutes a side).

    Within one job the uncertainty is the rounds' own, and it shrinks as one over the square root
    of their number: the factor is (detectable / threshold) squared, on the log scale. It assumes
    the rounds vary as they did; a difference between the two processes does not shrink.
    """
    if not (math.isfinite(detectable) and detectable > threshold > 0) or pairs < 1:
        return ""
    needed = math.ceil(pairs * rounds_factor(detectable, threshold))
    had = (
        f"this pair had {pairs}, {factor:g}x the benchmark's own"
        if factor > 1
        else f"instead of {pairs}"
    )
    # Beside the rounds it times, not inside the parenthesis on the pair's own (new-user trial
    # 46 read "this pair had 40, ..., about 3 min of rounds a side" as what the pair had taken).
    took = f" ({_duration(needed * seconds)} a side)" if seconds > 0 else ""
    return (
        f"about {needed} paired rounds{took} would resolve {threshold:.1%} ({had}; more rounds: "
        "benchmark.pedantic(rounds=...) or --benchmark-max-time / --benchmark-min-rounds)"
    )


def _duration(seconds: float) -> str:
    """A span for a reader planning a CI job: seconds under two minutes, else minutes."""
    if seconds < 120:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"


# Rounds at least this long get the hint that shorter ones may resolve more (``shorter_rounds``).
LONG_ROUND_S = 0.05


def _round_seconds(result: BenchResult) -> float:
    """How long one of the head's rounds took: its calls' median times the calls in a round."""
    samples = sorted(result.samples)
    return samples[len(samples) // 2] * result.iterations if samples else 0.0


def shorter_rounds(detectable: float, threshold: float, seconds: float) -> str:
    """Where rounds are long, that shorter rounds of the same work may resolve what more rounds
    of this length would take long to: a pair of rounds cancels only what the machine does more
    slowly than the pair lasts. Measured here (``experiments/compare_ref/granularity.py``, A/A,
    quiet): the experiment's Keras CNN and transformer steps, 200 steps a side, detected 8.6 %
    and 20.4 % at the median in rounds of 20 steps (about 200 ms), 3.4 % and 6.1 % in rounds of
    two, in about the same time (docs/compare-ref.md, "Shorter rounds")."""
    if not (math.isfinite(detectable) and detectable > threshold > 0) or seconds < LONG_ROUND_S:
        return ""
    return (
        # "A median": the table's times are another statistic of the same rounds, which differ
        # where rounds are bimodal (trial 44: "take 84 ms" beside 130 and 138 ms in the table).
        f"shorter rounds of the same work (a step a call, not an epoch): its head rounds "
        f"took a median {seconds * 1000:.0f} ms, and a pair of rounds cancels only what the "
        'machine does more slowly than that (docs/compare-ref.md, "Shorter rounds")'
    )


def build_rows(
    head: Sequence[BenchResult],
    head_failed: Sequence[str],
    base: Mapping[str, Mapping[str, Any]],
    rounds: Mapping[str, Rounds],
    threshold: float,
    own: Mapping[str, float] | None = None,
) -> list[Row]:
    """Every row: compared, new (head only), missing (base only), failed on either side.

    ``threshold`` is the time threshold (a fraction); ``own`` a benchmark's own, by node id.
    """
    rows = []
    for result in head:
        other = base.get(result.nodeid) or _uncollected(base, result.nodeid)
        if other is None:
            rows.append(Row(status="new", **_common(result.nodeid)))
        elif other.get("outcome") != "passed":
            why = other.get("error") or other.get("outcome", "did not run")
            rows.append(
                Row(
                    status="base failed",
                    reason=f"failed on the base side ({why}); the head result stands",
                    **_common(result.nodeid),
                )
            )
        else:
            samples = [float(x) for x in other.get("samples", ())]
            rows.append(
                compare_one(
                    result,
                    samples,
                    rounds.get(result.nodeid, Rounds()),
                    (own or {}).get(result.nodeid, threshold),
                )
            )
    measured = {result.nodeid for result in head} | set(head_failed)
    rows += [Row(status="failed", **_common(nodeid)) for nodeid in head_failed]
    rows += [
        Row(status="missing", **_common(nodeid))
        for nodeid, other in base.items()
        if nodeid not in measured and other.get("outcome") == "passed"
    ]
    return rows


def _uncollected(base: Mapping[str, Mapping[str, Any]], nodeid: str) -> Mapping[str, Any] | None:
    """The base's failure to collect the module or folder that holds ``nodeid``, or None: such a
    benchmark is not ``new`` (a test module that does not import in REF's worktree read as if
    REF lacked the benchmark)."""
    for name, other in base.items():
        if other.get("collector") and (not name or nodeid.startswith((f"{name}::", f"{name}/"))):
            return other
    return None


def not_run(rows: Sequence[Row], collected: Collection[str]) -> list[Row]:
    """``rows`` where a benchmark the head collected but never ran (the session stopped early) is
    ``unmeasured``, not ``missing``, which says it is gone from the code (trial 17: ``-x`` left six
    benchmarks "missing")."""
    why = "collected but not run: the session stopped early (-x, --maxfail)"
    return [
        replace(row, status="unmeasured", reason=why)
        if row.status == "missing" and row.nodeid in collected
        else row
        for row in rows
    ]


def base_crashed(rows: Sequence[Row], in_base: Callable[[str], bool], why: str) -> list[Row]:
    """``rows`` after the base session died: a benchmark without a base result that the base
    revision has (``in_base``) is ``base failed`` with ``why``, not ``new`` (trial 15: a base
    that crashed on a segfault showed its last three benchmarks as "new")."""
    return [
        replace(row, status="base failed", reason=f"no result from the base side: {why}")
        if row.status == "new" and in_base(row.nodeid)
        else row
        for row in rows
    ]


def unchecked(rows: Sequence[Row]) -> list[Row]:
    """The first pair's ``rows`` where the session was interrupted before new pairs of processes
    checked them: a regression or a ``slower`` or ``faster`` that only new pairs may call so is
    ``inconclusive``, its reason saying what the pair read (trial 32: an interrupted session
    showed one pair's "SLOWER" and counted "1 slower" above "the gate was not applied")."""
    found = []
    for row in rows:
        first = by_one_pair(row.noise_source) and row.confirmed is None
        if row.status != "compared" or not first:
            found.append(row)
            continue
        if not (row.regression or row.verdict in ("slower", "faster")):
            found.append(row)
            continue
        why = (
            f"{pct(row.change)} [{pct(row.low)}, {pct(row.high)}] in one pair of processes; the "
            "session was interrupted before new pairs of processes could check it"
        )
        found.append(replace(row, verdict="inconclusive", regression=False, reason=why))
    return found
