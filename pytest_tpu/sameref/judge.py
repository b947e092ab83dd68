"""What new pairs of processes make of a row one pair found: confirmed, withdrawn, or judged on the
spread between the pairs (``pairs``), with every pair's numbers in its reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_tpu.gate.compare import Row, interval_agrees, with_change
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import TAIL, Change, one_pair_may_hide
from pytest_tpu.sameref import pairs
from pytest_tpu.sameref.reportrow import confidence, number, numbers
from pytest_tpu.sameref.rows import factor_within
from pytest_tpu.sameref.swap import SWAPPED_KEY

# Marks a new pair's report row measured with more rounds than the first pair (``with_rounds``).
ROUNDS_KEY = "rounds_factor"


def to_more_pairs(first: Row, again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a regression goes to a third pair (``confirm.remeasure``): the new pair's row
    ``again`` agrees with it, lies further from it than both pairs' rounds allow, or leaves it
    open (its interval from below zero to the threshold): one pair's offset either way could
    have made it, and only more pairs tell (``confirm.remeasure`` sends a pair that measured once
    more and left it open to them too)."""
    return (
        confirms(again, threshold)
        or pairs.disagree(first, again)
        or pairs.leaves_open(again, threshold)
    )


def once_more(again: Mapping[str, Any] | None, threshold: float, most: int) -> int:
    """How many times its rounds a last pair needs where the new pair ``again`` (a report row, in
    percent) could not tell either way; 0 where it could (or ``most`` allows no more)."""
    if again is None or most < 2:
        return 0
    found = numbers(again, "ci_low", "ci_high", "detectable_pct")
    if found is None:
        return 0
    low, high, detectable = found
    limit = threshold * 100
    # Below zero and past the threshold, with a threshold it could not reliably catch: noise.
    if low > 0 or high < limit or not detectable > limit:
        return 0
    return factor_within(detectable / 100, threshold, most)


def by_new_pair(
    row: Row,
    again: Mapping[str, Any] | None,
    threshold: float,
    extra: tuple[int, Mapping[str, Any] | None] | None = None,
) -> Row:
    """``row`` confirmed or withdrawn by the new pair's row ``again`` (threshold 0.05: 5 %), or,
    where that pair could not tell, by ``extra``: the last pair's factor of rounds and row."""
    if not row.regression:
        return row
    if again is None:
        return withdrawn(row, "the re-measurement has no row for it")
    interval = interval_text(again)
    if interval is None:
        return withdrawn(row, f"the re-measurement was {again.get('verdict')}: no interval")
    text = f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {interval}"
    every = [again]  # the new pairs, for the spread between pairs below
    if extra is not None:
        factor, last = extra
        again = last or {}
        every.append(again)
        interval = interval_text(again)
        if interval is None:
            return withdrawn(row, f"not confirmed: {text}; once more, no interval")
        text += f", once more with {factor}x the rounds {interval}"
    if confirms(again, threshold):
        return confirmed_by(row, again, text)
    # Both pairs sure of a slowdown of at least half the threshold, the new one that it is below
    # the threshold: slower, no more. (Not the new pair's verdict: one pair alone says no more
    # than ``inconclusive`` there, ``rows.one_pair``; two pairs are what it lacks.)
    low, change = numbers(again, "ci_low", "change_pct") or [0.0, 0.0]  # interval_text found them
    why = f"not confirmed by a new pair of processes: {text}"
    if low > 0 and change >= threshold * 50:  # half the threshold, in percent
        return withdrawn(row, why, "slower", again)
    # Every pair counts: the first and the last alone leave one degree of freedom, and an
    # interval 12.7 standard errors wide each way (trial 21: -0.1 % [-3.1, +2.9] by the last
    # pair, shown as [-39, +64] "detects 388 %").
    found = pairs.across(row, every) if pairs.disagree(row, again) else None
    if found is not None:
        # Further apart than both pairs' rounds allow: the new pair's own interval would show an
        # offset between processes as a precise "no change" (seen: a 30 us function read +7.8 %
        # [+7.1, +8.4], then +0.3 % [-0.2, +0.8], shown "inconclusive" beside that interval).
        return on_spread(row, found, f"{why}; the spread between the pairs counted", threshold)
    # Two pairs within each other's reach, the new one precise enough to show the change within
    # the threshold, and under half of it: its own verdict, as a first pair's would be (trial 17:
    # +1.3 % [+0.5, +2.1] under a 3 % threshold read "inconclusive", beside an interval that
    # settled it).
    still = "unchanged" if settles_unchanged(again, threshold) else "inconclusive"
    return withdrawn(row, why, still, again)


def settles_unchanged(again: Mapping[str, Any], threshold: float) -> bool:
    """Whether a new pair's report row says ``unchanged`` as one pair may (``rows.one_pair``), on
    its numbers as head against base. A pair with the roles swapped judged its change the other
    way round: -2.4 % there, an improvement under the threshold, ``unchanged``; turned back, a
    slowdown of +2.4 %, which one pair cannot vouch for (r51, quiet: a matmul chain made 5 %
    slower, first +4.8 % [+3.2, +6.5], again +2.4 % [+0.6, +4.3] with the roles swapped, and
    ``unchanged``)."""
    found = numbers(again, "change_pct", "ci_low", "ci_high")
    if again.get("verdict") != "unchanged" or found is None:
        return False
    change, low, high = (value / 100 for value in found)
    return low > -threshold and not one_pair_may_hide(change, high, threshold)


def improves(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row agrees with an improvement: its 95 % interval lies below
    zero and reaches the threshold below it (the rule for a regression, mirrored)."""
    found = None if again is None else numbers(again, "ci_low", "ci_high")
    return found is not None and found[1] < 0 and found[0] <= -threshold * 100


def turns_round(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row, checking an improvement, reads a slowdown instead, and
    is sure of it: its 95 % interval above zero and its change at least half the threshold (what
    ``slower`` asks). An offset between the first pair's processes can turn a regression round,
    and withdrawing the improvement on two pairs let it pass (trial 23, beside the bursty
    neighbour: a Python function 8 % slower read -6.2 % [-6.3, -6.0] in the first pair, +7.9 %
    [+7.3, +8.4] in the new one, and the row ended ``inconclusive``)."""
    found = None if again is None else numbers(again, "change_pct", "ci_low")
    return found is not None and found[1] > 0 and found[0] >= threshold * 50  # half, in percent


# What an inconclusive row's "not confirmed" was about where one pair read it faster: beside no
# regression, "not confirmed by new pairs" left a reader asking what was (session 43, an A/A
# numpy row whose nested pair read -5.1 %).
SPEEDUP = "a speed-up"


def improvement(
    row: Row,
    again: Mapping[str, Any] | None,
    threshold: float,
    later: Sequence[Mapping[str, Any] | None] | None = None,
) -> Row:
    """``row``, faster by the threshold or more in one pair, confirmed where the new pair agrees
    (``improves``) and, with a third pair's row in ``later``, the spread of all the pairs does
    too. Withdrawn otherwise, mirroring a regression: judged on the spread of both pairs where
    they lie further apart than their rounds allow, else as the new pair says (``faster`` by
    half the threshold or more, ``unchanged``, or ``inconclusive``)."""
    interval = None if again is None else interval_text(again)
    if again is None or interval is None:
        why = f"{SPEEDUP} not confirmed: the new pair of processes has no interval for it"
        return replace(row, verdict="inconclusive", reason=why)
    if later and (found := pairs.across(row, later)) is not None:
        return faster_across(row, found, later, threshold)
    text = f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {interval}"
    if improves(again, threshold):
        return confirmed_by(row, again, text)
    why = f"{SPEEDUP} not confirmed by a new pair of processes: {text}"
    if pairs.disagree(row, again) and (found := pairs.across(row, [again])) is not None:
        # Further apart than both pairs' rounds allow: the new pair's narrow interval alone would
        # show the offset between processes as a precise change, beside a verdict that is not
        # (trial 22: -5.5 % withdrawn, shown "+0.24% [+0.09, +0.38] inconclusive").
        why += "; the spread between the pairs counted"
        return on_spread(row, found, why, threshold, faster=True)
    # Within each other's reach: what the new pair says, as for a withdrawn regression.
    high, change = numbers(again, "ci_high", "change_pct") or [0.0, 0.0]
    still = "unchanged" if settles_unchanged(again, threshold) else "inconclusive"
    if high < 0 and change <= -threshold * 50:  # half the threshold, in percent
        still = "faster"
    return withdrawn(row, why, still, again)


def faster_across(
    row: Row, found: Change, later: Sequence[Mapping[str, Any] | None], threshold: float
) -> Row:
    """``row``, an improvement the new pair agreed with, judged on the spread of every pair."""
    text = pairs_text(row, later)
    measured = measured_across(row, found)
    if found.high < 0 and found.low <= -threshold:
        why = f"confirmed by new pairs of processes, the spread between pairs counted ({text})"
        return replace(measured, verdict="faster", confirmed=True, reason=why)
    why = f"{SPEEDUP} not confirmed by new pairs of processes, the spread between pairs counted: "
    return replace(measured, verdict="inconclusive", confirmed=False, reason=why + text)


def pairs_text(row: Row, later: Sequence[Mapping[str, Any] | None]) -> str:
    """Every pair's change and interval, the first one's first."""
    shown = [str(interval_text(one or {})) for one in later]
    return (
        f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {shown[0]}, "
        f"a third pair {shown[1]}" + "".join(f", then {one}" for one in shown[2:])
    )


def confirmed_by(row: Row, again: Mapping[str, Any], text: str) -> Row:
    """``row`` confirmed by the new pair's report row ``again``, shown with that pair's numbers:
    the first pair was picked for looking slow (or fast), so it overstates (trial 16: +20.1 %
    headed a row whose later pairs read +1.6 % and +11.4 %); ``text`` keeps every pair's."""
    why = f"confirmed by a new pair of processes ({text})"
    return replace(row, confirmed=True, reason=why, **measured_as(row, again))


def confirms(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row agrees with a regression: its own gate fails, or its 95 %
    interval lies above zero and reaches the threshold."""
    if again is None:
        return False
    low, high = numbers(again, "ci_low", "ci_high") or [0.0, 0.0]
    return again.get("regression") is True or interval_agrees(low, high, threshold * 100)


def by_pairs(row: Row, later: Sequence[Mapping[str, Any] | None], threshold: float) -> Row:
    """``row`` confirmed or withdrawn by the new pairs' rows ``later``, uncertain by the spread of
    them all and the first (``pairs``): each pair's interval is its rounds' own, and only the
    spread between pairs shows an offset between processes."""
    found = pairs.across(row, later)
    if found is None:  # no third measurement: the two pairs decide
        return by_new_pair(row, later[0], threshold)
    text = pairs_text(row, later)  # each pair has an interval: pairs.across found them
    # A row one pair measured under the threshold (``rows.doubtful``) was no regression yet.
    was = row.regression
    # The rule of by_new_pair on the pairs' spread, sure at 99.5 % (``pairs.sure_slower``), on
    # enough pairs (``pairs.fails``).
    if pairs.fails(found, threshold, len(later) + 1):
        how = "confirmed by" if was else "a regression by"
        why = f"{how} new pairs of processes, the spread between pairs counted ({text})"
        measured = measured_across(row, found)
        return replace(measured, verdict="slower", regression=True, confirmed=True, reason=why)
    how = "not confirmed by" if was else "measured by"
    why = f"{how} new pairs of processes, the spread between pairs counted: {text}"
    if pairs.too_few(found, threshold, len(later) + 1):  # further pairs could not run
        why += f"; a regression fails only on {pairs.FEWEST} pairs or more"
    judged = on_spread(row, found, why, threshold)
    # Nothing was to be confirmed in a row that never was a regression: its notes said "not
    # confirmed" beside "slower" (trial 29: +3.0 % in three pairs that agreed, at 5 %).
    return judged if was else replace(judged, confirmed=None)


def measured_across(row: Row, found: Change) -> Row:
    """``row`` with the change the pairs measured together."""
    base = row.base_value
    current = None if base is None else base * (1 + found.estimate)
    return replace(with_change(row, found), current_value=current)


def on_spread(row: Row, found: Change, why: str, threshold: float, faster: bool = False) -> Row:
    """``row`` withdrawn, with the change and interval of several pairs, uncertain by their
    spread: ``slower`` where that interval lies above zero and the change is at least half the
    threshold (mirrored, ``faster``, for a withdrawn improvement), ``unchanged`` where it lies
    within the threshold either way and the change is under half of it (what a single new pair
    needs, ``by_new_pair``: the spread already counts the offsets between processes), and
    ``inconclusive`` otherwise."""
    if faster:
        leans = found.high < 0 and found.estimate <= -threshold / 2
    else:
        leans = found.low > 0 and found.estimate >= threshold / 2
    within = -threshold < found.low and found.high < threshold
    if leans:
        still = "faster" if faster else "slower"
    else:
        still = "unchanged" if within and abs(found.estimate) < threshold / 2 else "inconclusive"
    measured = measured_across(row, found)
    return replace(measured, verdict=still, regression=False, confirmed=False, reason=why)


def interval_text(row: Mapping[str, Any]) -> str | None:
    """A report row's change and 95 % interval as text, or None where it has none."""
    found = numbers(row, "change_pct", "ci_low", "ci_high")
    if found is None:
        return None
    change, low, high = found
    roles = " (roles swapped)" if row.get(SWAPPED_KEY) else ""
    factor = row.get(ROUNDS_KEY)
    more = f" ({factor:g}x the rounds)" if isinstance(factor, (int, float)) and factor > 1 else ""
    return f"{change:+.1f}% [{low:+.1f}%, {high:+.1f}%]{more}{roles}"


def with_rounds(row: Mapping[str, Any] | None, factor: float) -> Mapping[str, Any] | None:
    """A new pair's report row ``row`` marked as measured with ``factor`` times the first pair's
    rounds, so that the pairs' text says which ones had more (``interval_text``)."""
    if row is None or not factor > 1:
        return row
    return {**row, ROUNDS_KEY: factor}


def withdrawn(
    row: Row, why: str, verdict: str = "inconclusive", last: Mapping[str, Any] | None = None
) -> Row:
    """``row`` withdrawn; with the numbers of ``last``, the pair that withdrew it, where given:
    a row more rounds would resolve is then measured again only if that pair leaves it open."""
    fields = measured_as(row, last) if last is not None else {}
    return replace(row, verdict=verdict, regression=False, confirmed=False, reason=why, **fields)


def measured_as(row: Row, again: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``row`` that a new pair's report row ``again`` (in percent) measured."""
    return {
        "change": number(again, "change_pct", 100),
        "low": number(again, "ci_low", 100),
        "high": number(again, "ci_high", 100),
        "confidence": confidence(again, 100),
        "detectable": number(again, "detectable_pct", 100),
        "noise_source": str(again.get("noise_source") or row.noise_source),
        "base_value": number(again, "baseline") or row.base_value,
        "current_value": number(again, "current") or row.current_value,
        "statistic": TAIL if again.get("statistic") == TAIL else "",
    }
