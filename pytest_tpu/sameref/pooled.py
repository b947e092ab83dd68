"""A row measured again with more rounds, judged on both its pairs of processes at once.

A row whose first pair's rounds could not resolve the threshold is measured again by a new pair
with more rounds (``resolve``). One pair calls a change ``unchanged`` only where its interval
leaves room under the threshold for an offset between its two processes (half the threshold,
``rows.one_pair``), which its rounds cannot show; so the new pair alone often leaves the row
``inconclusive`` with an interval well inside the threshold (r67, r68: a Keras CNN's unchanged
steps at -1.3 % [-5.8, +3.4] and the like, after 4 times the rounds).

Both pairs measured the same code with independent offsets, and the first was picked for its
coarse rounds, not for what it read. Their changes weighted by the inverse of their rounds'
variance have an offset that is the same weighted mean of two: its spread shrinks by the root of
the sum of the squared weights (0.71 for equal weights, 1 where one pair dominates). So the two
together are called ``unchanged`` where

- they agree (``pairs.apart``: their difference within Student's t on both pairs' rounds; pairs
  that disagree show an offset larger than their rounds, which more pairs must measure);
- their pooled 95 % interval (Student's t on Welch's degrees of freedom) ends under the threshold
  by the one-pair room shrunk by the weights, and their change lies under the threshold by the
  one-pair distance (three quarters of it) shrunk alike;
- and together they could have caught the threshold (their detectable change within it).

Replayed on the logged pairs of r67, r68 and r69 (``experiments/compare_ref/one_pair_rules.py
pooled``): 18 of 58 same-code Keras CNN and matmul rows left ``inconclusive`` by their new pair
alone were ``unchanged`` together, and none of the 26 such rows of the +5 % and +10 % commits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import (
    ONE_PAIR_HIDES,
    ONE_PAIR_OFFSET,
    ONLY_A_SPEEDUP,
    TAIL,
    TWO_PAIRS,
    Change,
    between_pairs,
    from_log,
    welch_df,
)
from pytest_tpu.sameref.judge import interval_text, measured_across
from pytest_tpu.sameref.offsets import AS_THOSE_ALLOW, OWN_PAIR_READ
from pytest_tpu.sameref.pairs import Reading, apart, of_report, of_row

# Says, in a row's reason, that its two pairs disagree (``apart_together``): more pairs measure it.
APART = "further from the first than both pairs' rounds allow"
# Says, in a row's reason, that the pair with more rounds did not settle a slowdown its first pair
# was sure of (``sure_first``): more pairs measure it.
SURE_FIRST = "which does not settle a slowdown the first pair was sure of"
# Says, in a row's reason, that the pair measuring it again (with more rounds, or with the same
# where one pair left no room for an offset) left a slowdown of the threshold open, leaning slower
# (``leaning``): more pairs measure it.
LEANS = "a slowdown of the threshold left open, leaning slower, by a second pair"


def pooled(first: Reading, again: Reading) -> tuple[Change, float]:
    """Two pairs' readings' weighted change, and how much their mean's offset shrinks."""
    weights = (1 / first.se**2, 1 / again.se**2)
    total = math.fsum(weights)
    shares = [w / total for w in weights]
    log = shares[0] * first.log + shares[1] * again.log
    df = welch_df([((s * r.se) ** 2, r.df) for s, r in zip(shares, (first, again), strict=True)])
    source = f"{first.rounds} and {again.rounds} paired rounds in this job, {TWO_PAIRS}"
    change = from_log(log, 1 / math.sqrt(total), df, source)
    return change, math.sqrt(math.fsum(s * s for s in shares))


def apart_together(first: Row, resolved: Row, again: Mapping[str, Any], lead: str) -> Row:
    """``resolved`` (the row as the new pair with more rounds left it) judged on the spread of
    both pairs where the two lie further apart than their rounds allow (``pairs.apart``): their
    processes differ by an offset neither pair's interval shows, so the new pair's reading alone
    is no verdict. New-user trial 40: an untouched 2 ms TensorFlow call read -5.6 % [-11.8, +1.0]
    by its first pair and +5.8 % [+0.3, +11.6] with 4 times the rounds, and the gate named it
    "UNRESOLVED +5.8 % ... 98.0 % sure" slower beside the session's real regressions.

    Both pairs count alike (the first was picked for its coarse rounds, not for what it read):
    their mean, uncertain by their spread on one degree of freedom, and ``inconclusive``; its
    reason says ``APART``, and a third pair then measures it (``resolve``: one degree of freedom
    is an interval too wide to tell anything). A regression the new pair's own new pairs
    confirmed stands: more pairs measured it."""
    if resolved.confirmed is True:  # (pairs that agree were pooled above: never apart)
        return resolved
    if first.confirmed is not None or first.regression:  # not a first pair's own reading
        return resolved
    one, new = of_row(first), of_report(again)
    if one is None or new is None or not one.rounds or not new.rounds or not apart(one, new):
        return resolved
    logs = [one.log, new.log]
    spread = between_pairs(logs, logs, math.hypot(one.se, new.se) / 2)
    why = (
        f"{lead}; that pair read {interval_text(again)}, {APART}: their processes differ by an "
        "offset neither pair shows, so the two are judged together, on their spread"
    )
    return replace(
        measured_across(resolved, spread),
        verdict="inconclusive",
        regression=False,
        confirmed=None,
        reason=why,
    )


def _measured_by_pairs(first: Row, again: Mapping[str, Any]) -> bool:
    """Whether new pairs measured the row before (its first row is not a first pair's own
    reading) or within the nested session that measured it again: their spread decided it."""
    return first.confirmed is not None or first.regression or again.get("confirmed") is not None


def sure_first(
    first: Row, resolved: Row, again: Mapping[str, Any], threshold: float, lead: str
) -> Row:
    """``resolved`` (the row as the new pair with more rounds left it) sent to more pairs, whose
    spread decides (``resolve``), where the first pair was sure of a slowdown that may reach the
    threshold (its 95 % interval above zero and reaching it) and the new pair neither confirmed a
    regression nor ruled a slowdown out (its interval reaching zero and ending under the
    threshold).

    A new pair with more rounds draws a new offset between its two processes, and that offset can
    hide most of a real slowdown under a narrow interval. r89n, beside the neighbour: a Keras CNN
    made 5 % slower read +5.9 % [+0.8, +11.3] in its first pair, +1.1 % [+0.4, +1.9] with 3x the
    rounds, and was called ``unchanged``, while the unchanged CNN copy in that pair read +0.3 %.
    Two pairs that are both sure of a slowdown and differ in its size, or a second that leaves the
    threshold open, show that pairs differ more than one pair's rounds say: only their spread
    tells its size. Unchanged code pays for it only where its coarse first pair was sure of a
    slowdown (none of the 62 unchanged rows measured again with more rounds in r88, r89n and
    r89n2)."""
    if resolved.regression or resolved.confirmed is not None or APART in resolved.reason:
        return resolved
    if _measured_by_pairs(first, again):
        return resolved
    if first.low is None or first.high is None or not (first.low > 0 and first.high >= threshold):
        return resolved
    new = of_report(again)
    if new is None or not new.rounds:
        return resolved
    low, high = (x / 100 for x in (again["ci_low"], again["ci_high"]))
    if low <= 0 and high < threshold:  # the new pair rules a slowdown out: it stands
        return resolved
    why = (
        f"{lead}; that pair read {interval_text(again)}, {SURE_FIRST}: a new pair of processes "
        "draws a new offset, which can hide most of a slowdown, so more pairs measure it and "
        "their spread decides"
    )
    return replace(resolved, verdict="inconclusive", regression=False, confirmed=None, reason=why)


def unchanged_together(found: Change, shrink: float, threshold: float) -> bool:
    """Whether two agreeing pairs' pooled change rules a slowdown of ``threshold`` out, with
    room for the offset of their mean (``shrink`` times one pair's)."""
    return not short_of_unchanged(found, shrink, threshold)


def short_of_unchanged(found: Change, shrink: float, threshold: float) -> str:
    """What keeps two agreeing pairs' pooled change from ``unchanged``, in words; "" where
    nothing does. "Still leave a slowdown of the threshold open" beside an interval under it read
    as a contradiction of the note's "its 95% interval rules a slowdown of the threshold out"
    (session 71: an unchanged Keras CNN, both pairs together -1.2 % [-4.8, +2.5], detects 6.4 %)."""
    if not found.high < threshold:
        return f"together still leave a slowdown of the threshold ({threshold:.1%}) open"
    under = f"their interval stays under the threshold ({threshold:.1%})"
    if not found.detectable <= threshold:
        return f"{under}, but together they could not have caught it reliably"
    room = found.high < threshold * (1 - ONE_PAIR_OFFSET * shrink)
    small = found.estimate < threshold * (1 - (1 - ONE_PAIR_HIDES) * shrink)
    if not (room and small):
        return f"{under}, without the room an offset between their processes needs"
    # Last: the gate takes this reason as ruling a slowdown out (``stats.two_pairs_hide``).
    if not found.low > -threshold:
        return f"{under}, {ONLY_A_SPEEDUP}"
    return ""


def _agreeing(first: Row, resolved: Row, again: Mapping[str, Any]) -> tuple[Change, float] | None:
    """Both pairs' pooled change and how much their offset shrinks, where the new pair left the
    row ``inconclusive`` and the two are plain one-pair readings that agree; else None."""
    if resolved.verdict != "inconclusive" or resolved.regression or first.regression:
        return None
    if first.confirmed is not None:  # new pairs measured it before: not its first pair's reading
        return None
    # A pair whose processes other rows showed apart, or whose own new pair read it, has an
    # offset measured larger than the one-pair room: that room does not hold for it. Nor for the
    # new pair where the rows it measured again showed its processes apart (``offsets``).
    held = f"{first.reason} {again.get('note') or ''}"
    if AS_THOSE_ALLOW in held or OWN_PAIR_READ in first.reason:
        return None
    if first.statistic or again.get("statistic") == TAIL:  # the mean of all rounds: not pooled
        return None
    one, new = of_row(first), of_report(again)
    # Only plain one-pair readings: their intervals are their rounds' own (not widened, not a
    # spread between pairs), so their degrees of freedom are known.
    if one is None or new is None or not one.rounds or not new.rounds or apart(one, new):
        return None
    if not (one.se > 0 and new.se > 0):  # rounds all alike: no weights to give
        return None
    return pooled(one, new)


def resolved_together(
    first: Row, resolved: Row, again: Mapping[str, Any], threshold: float, lead: str
) -> Row:
    """``resolved`` (the row as the new pair with more rounds left it, ``again`` that pair's
    report row) called ``unchanged`` on both pairs where they agree and together rule the
    threshold out; as it is otherwise. ``lead`` opens its reason: how it was measured again."""
    agreeing = _agreeing(first, resolved, again)
    if agreeing is None:
        return resolved
    both, shrink = agreeing
    if not unchanged_together(both, shrink, threshold):
        return resolved
    # Said instead of the new pair's own reason, which explains why one pair could not call it
    # unchanged (trial 23 and others read "not ruled out" beside ``unchanged`` as a contradiction).
    why = (
        f"{lead}; that pair read {interval_text(again)}, which alone leaves a slowdown of the "
        f"threshold ({threshold:.1%}) open (too coarse, or too little room for an offset between "
        f"its two processes); both pairs together {pct(both.estimate)} [{pct(both.low)}, "
        f"{pct(both.high)}]: they agree, and their mean, whose offset is smaller than one "
        "pair's, rules the threshold out"
    )
    return replace(measured_across(resolved, both), verdict="unchanged", reason=why)


def open_together(
    first: Row, resolved: Row, again: Mapping[str, Any], threshold: float, lead: str
) -> Row:
    """``resolved`` shown with both pairs' pooled change where they agree, are not
    ``unchanged`` together (``short_of_unchanged`` says why), and together resolve finer than
    the new pair alone. A new pair can measure a row no better than the first did, with the same
    rounds or with more in a noisier minute, and its reading alone would then show the worse of
    two (new-user trial 69's `pedantic` predict:
    +1.2 % [-1.4, +3.8] in its first pair, "detects 11.6 %" in its second with the same rounds;
    session 71's unchanged Keras CNN `benchmark(fn)`: -0.3 % [-3.9, +3.5] in its first pair,
    -1.6 % [-9.2, +6.7] with 2x the rounds, "detects 14.4 %")."""
    agreeing = _agreeing(first, resolved, again)
    if agreeing is None or APART in resolved.reason or SURE_FIRST in resolved.reason:
        return resolved
    both, shrink = agreeing
    if resolved.detectable is not None and not both.detectable < resolved.detectable:
        return resolved  # the new pair alone resolves it finer: its own reading stands
    why = (
        f"{lead}; that pair read {interval_text(again)}; both pairs together "
        f"{pct(both.estimate)} [{pct(both.low)}, {pct(both.high)}]: they agree, and "
        f"{short_of_unchanged(both, shrink, threshold)}"
    )
    return replace(measured_across(resolved, both), verdict="inconclusive", reason=why)


def leaning(first: Row, judged: Row, again: Mapping[str, Any], threshold: float) -> Row:
    """``judged`` (the row as the pair with more rounds left it, with the first pair where the
    two agree) sent to more pairs, whose spread decides (``resolve``), where it is still
    ``inconclusive`` with a slowdown of the threshold open and its change at least half the
    threshold: the same lean on which five pairs are joined by more (``pairs.leans_open``).

    More rounds shrink a pair's own noise, not the offset between its two processes; a row left
    open after them is left open by that offset, and only more pairs measure it. In the same-job
    runs r111-r116 (8 runs, 5 % threshold) 22 of the 39 rows of a +5 % or +10 % commit that
    the gate did not catch ended so, 18 of them a Keras CNN and 4 the matmul chain; a +10 % CNN
    row read "+6.2 % [-0.1, +13.0], 97.3 % sure" after 4x its rounds (r116). Unchanged code pays
    for it where such a pair leans slower by half the threshold: 7 of the 168 same-code rows."""
    if judged.verdict != "inconclusive" or judged.regression or judged.confirmed is not None:
        return judged
    if APART in judged.reason or SURE_FIRST in judged.reason or OWN_PAIR_READ in first.reason:
        return judged  # more pairs measure it already, or a pair of its own read it before
    if _measured_by_pairs(first, again):
        return judged
    if judged.change is None or judged.high is None or of_report(again) is None:
        return judged
    if not (judged.change >= threshold / 2 and judged.high >= threshold):
        return judged
    why = (
        f"{judged.reason}; {LEANS}: a new pair of processes draws a new offset, which more rounds "
        "of the same pair do not shrink, so more pairs measure it and their spread decides"
    )
    return replace(judged, reason=why)
