"""Rows the first pair could not resolve are measured again, with more rounds, by a new pair.

Within one job the uncertainty of a paired change is the rounds' own, so it shrinks as one over the
square root of their number. A row left ``inconclusive`` whose rounds could not have caught the
threshold (its detectable change lies past it) is therefore measured again by a new head process
and a new base process, a nested ``--compare-ref`` session of just those benchmarks, with up to
``--tpu-compare-ref-rounds`` times the rounds (as many as its detectable change asks for):
``benchmark.pedantic``'s given rounds, and ``benchmark(fn)``'s ``--benchmark-max-time`` and
``--benchmark-min-rounds``. The nested session decides as the first does, confirms its own
regressions by yet another pair, and its row replaces the first. Rows the first pair resolved
cost nothing more. (Measured here: a Keras CNN's steps, about 120 ms a round and 15-20 % apart
round to round, left 10 paired rounds able to catch only 10-15 %.)

Whatever the coarse pair's change: it reads its rounds' noise plus an offset between its two
processes, and the new pair draws both afresh. (r63, quiet, a Keras CNN made 5 % slower: 5 of the
10 rows not caught were such pairs, reading -0.1 to +1.9 %, detecting 6.1-12.5 %, and left
``inconclusive`` unmeasured because they leaned slower by less than half the threshold; r24
measured every such row leaning slower at all, and caught 7 and 7 of 20 +5 % CNN rows where the
half-threshold rule caught 4 and 6, with no same-code row failed either way.)

Where the new pair lies further from the first than both pairs' rounds allow, an offset between
processes neither pair shows is at work, and two readings of it say little of its size: a third
pair with the same rounds measures the row, and more where three leave it open, and their spread
decides (``_apart_by_more_pairs``), as for a regression that new pairs measure (``confirm``).
So where the first pair was sure of a slowdown that may reach the threshold and the new pair
neither confirms a regression nor rules a slowdown out (``pooled.sure_first``): its narrow
interval says nothing of its own pair's offset (r89n: a Keras CNN made 5 % slower, +5.9 % in its
first pair, +1.1 % [+0.4, +1.9] with 3x the rounds, called ``unchanged``). So too where the new
pair calls ``unchanged`` a row that this session's offsets between processes held
(``offset_stands``): the new pair draws one more such offset, which its rounds do not show.
And where the new pair (with the first, where the two agree) still leaves a slowdown of the
threshold open, leaning slower by half of it (``pooled.leaning``; r116: a Keras CNN made 10 %
slower, +6.2 % [-0.1, +13.0] with 4x the rounds): more rounds do not shrink the offset that holds
it open.

A row whose rounds could catch the threshold but leave no room under it for an offset between
the two processes (``rows.leaves_no_room``: its interval rules the threshold out, not half of it)
is measured again too, by a new pair with the same rounds (``no_room``): more rounds would not
help it, a second offset drawn does. The two pairs are then judged as above, on both at once
where they agree. (Replayed on the logged first pairs of r88-r94, 5 % threshold: of the unchanged
rows one pair left so, a second pair settled 75-85 % of the matmul chain's `unchanged` and 23-33 %
of the Keras CNN's, sent 2-7 % to a third pair, and 1-2 % to confirmation; new-user trial 69's
unchanged Keras text classifier, +0.0 % [-2.7, +2.8] in one pair, was named among the rows that
could hide a slowdown.)
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import SPREAD_OF_PAIRS, by_one_pair
from pytest_tpu.sameref import judge, nested, pooled
from pytest_tpu.sameref.further import Nested, Spread, on_more_pairs
from pytest_tpu.sameref.offsets import AS_THOSE_ALLOW, OWN_PAIR_READ
from pytest_tpu.sameref.reportrow import number
from pytest_tpu.sameref.rows import (
    LEAN_FEWEST_ROUNDS,
    NOT_SURE_AGAIN,
    NOT_SURE_ENOUGH,
    factor_within,
    leaves_no_room,
)
from pytest_tpu.sameref.swap import Swap


def resolving() -> bool:
    """Whether this session is itself a re-measurement with more rounds."""
    return bool(os.environ.get(nested.ROUNDS_ENV))


def factor_for(row: Row, threshold: float, most: int) -> int:
    """How many times its rounds a row needs to resolve ``threshold``, at most ``most``; 0 when
    it needs none (resolved, leaning faster, no interval)."""
    if most < 2 or row.status != "compared" or row.verdict != "inconclusive" or row.regression:
        return 0
    if SPREAD_OF_PAIRS in row.noise_source:  # offsets between processes: rounds do not help
        return 0
    detectable = row.detectable
    if detectable is None or not math.isfinite(detectable):
        return 0
    # Rounds that could catch the threshold leave only an offset between processes, which more
    # rounds do not shrink: a new pair with the same rounds draws another (``no_room``).
    if detectable <= threshold:
        return 1 if no_room(row, threshold) else 0
    return factor_within(detectable, threshold, most)


def no_room(row: Row, threshold: float) -> bool:
    """Whether only the first pair measured ``row``, and its interval rules the threshold out
    but leaves no room under it for an offset between its two processes: a second pair, which
    draws another offset, can settle it. Rows new pairs measured (a regression, a doubtful
    slowdown, a row held to another's offset and measured by its own pair) are not sent again."""
    if not by_one_pair(row.noise_source) or row.confirmed is not None:
        return False
    if OWN_PAIR_READ in row.reason or row.high is None:
        return False
    return row.high < threshold and leaves_no_room(row, threshold)


def rounds_text(factor: int) -> str:
    """How many rounds a new pair took, in words."""
    return "with the same rounds" if factor == 1 else f"with {factor}x the rounds"


def scale_rounds(fixture: Any, factor: float, fewest: int = 0) -> None:
    """Give one pytest-benchmark fixture instance ``factor`` times its rounds, in either style:
    more where a row needs resolving, fewer (a factor under 1) for a new pair that checks a
    reading its first pair resolved far finer than the threshold (``rows.lean_factor``).

    ``fewest`` is the rounds the session's first pair paired, where known: ``benchmark(fn)``
    takes at least ``factor`` times them. Its rounds come from the time one calibrating call
    took, and a call the machine slowed sizes fewer than the factor was worked out for (beside
    a bursty neighbour, rows of a Keras CNN meant to take 4 times 10 rounds took 20, the
    minimum, and stayed ``inconclusive``: r108n)."""
    if not factor > 0:
        return
    if hasattr(fixture, "_max_time") and hasattr(fixture, "_min_rounds"):
        fixture._max_time = float(fixture._max_time) * factor  # benchmark(fn): rounds from time
        if factor > 1:  # fewer: the minimum stays, for calls too slow for the time to count
            fixture._min_rounds = math.ceil(int(fixture._min_rounds) * factor)
        if factor >= 1 and fewest > 0:
            fixture._min_rounds = max(int(fixture._min_rounds), math.ceil(fewest * factor))
    if factor == 1:
        return
    original: Callable[..., Any] | None = getattr(fixture, "_raw_pedantic", None)
    if not callable(original):
        return

    def scaled(target: Any, *args: Any, rounds: int = 1, **kwargs: Any) -> Any:
        return original(target, *args, rounds=scaled_rounds(rounds, factor), **kwargs)

    fixture._raw_pedantic = scaled  # pedantic() passes rounds by keyword


def scaled_rounds(rounds: int, factor: float) -> int:
    """``benchmark.pedantic``'s ``rounds`` times ``factor``; fewer never below
    ``LEAN_FEWEST_ROUNDS`` (nor above what was given): a new pair needs enough pairs of rounds
    for an interval."""
    if factor >= 1:
        return math.ceil(rounds * factor)
    return min(rounds, max(LEAN_FEWEST_ROUNDS, math.ceil(rounds * factor)))


def resolve(
    rows: Sequence[Row],
    commit: str,
    percent: float,
    rootdir: Path,
    measuring: Sequence[str],
    own: Mapping[str, float],
    most: int,
    swap: Swap | None = None,
) -> tuple[list[Row], str]:
    """``rows`` with each unresolved one replaced by a new pair's, and a line on what ran.

    ``percent`` is the session's time threshold in percent; ``own`` a benchmark's own (a
    fraction, from its marker), by node id; ``most`` the largest factor of rounds. With ``swap``,
    a third pair, where two lie apart, runs with the roles swapped.
    """
    thresholds = {row.nodeid: own.get(row.nodeid, percent / 100) for row in rows}
    wanted = {
        row.nodeid: factor
        for row in rows
        if (factor := factor_for(row, thresholds[row.nodeid], most))
    }
    if not wanted:
        return list(rows), ""
    factors_env = {nested.ROUNDS_ENV: json.dumps(wanted)}
    again, problem = nested.nested(list(wanted), commit, percent, rootdir, measuring, factors_env)
    if problem:
        return list(rows), f"the re-measurement with more rounds {problem}"
    line = _measured_line(wanted) + _confirmed_there(again, wanted)
    resolved = [
        _resolved(row, again.get(row.nodeid), wanted.get(row.nodeid, 0), thresholds[row.nodeid])
        for row in rows
    ]
    at = Nested(commit, percent, rootdir, measuring, swap)
    resolved, more = _apart_by_more_pairs(rows, resolved, again, wanted, thresholds, at)
    return resolved, line + more


def _apart_by_more_pairs(
    first: Sequence[Row],
    resolved: Sequence[Row],
    again: Mapping[str, Mapping[str, Any]],
    factors: Mapping[str, int],
    thresholds: Mapping[str, float],
    at: Nested,
) -> tuple[list[Row], str]:
    """``resolved`` with each row whose new pair lay further from the first than both pairs'
    rounds allow (``pooled.apart_together``), did not settle a slowdown the first pair was sure
    of (``pooled.sure_first``), or called unchanged a row this session's offsets held
    (``offset_stands``), measured by a third pair with the same rounds, and by more
    where three leave it open (``further.Spread``), then judged on the spread of them all
    (``judge.by_pairs``); what the summary line adds.

    Two pairs' spread has one degree of freedom: an interval 12.7 standard errors wide each way,
    which said nothing a user could act on (r85, quiet: an unchanged Keras CNN row two pairs read
    -3.4 % and +1.9 %, shown ``inconclusive``, "detects 195 %"; r86: -2.8 % and +1.9 %, "detects
    161 %"). Three pairs have two, at a third of that width."""
    apart = [row.nodeid for row in resolved if pooled.APART in row.reason]
    doubted = [row.nodeid for row in resolved if pooled.SURE_FIRST in row.reason]
    stood = [row.nodeid for row in resolved if OFFSET_STANDS in row.reason]
    leaning = [row.nodeid for row in resolved if pooled.LEANS in row.reason]
    measured = apart + doubted + stood + leaning
    if not measured:
        return list(resolved), ""
    rounds = {nodeid: factors[nodeid] for nodeid in measured}
    by_id = {row.nodeid: row for row in first}
    spread = Spread(by_id, thresholds, rounds, at, rounds, broken_leaves="judged on those so far")
    # The new pair with more rounds led as the first did: the third takes the other roles.
    second = {nodeid: again.get(nodeid) for nodeid in measured}
    judged, problem, further = on_more_pairs(by_id, second, spread, at.swap)
    note = _third_note(len(apart), len(doubted), len(stood), len(leaning))
    if problem:  # as the second pair left them: inconclusive
        return list(resolved), f"{note} (that re-measurement {problem}: inconclusive on two pairs)"
    # A row the third pair has no interval for keeps the two pairs' spread.
    return [judged.get(row.nodeid, row) for row in resolved], note + further


def _measured_line(wanted: Mapping[str, int]) -> str:
    """The summary line's words for the rows measured again: with more rounds, and those one
    pair left no room for an offset with the same rounds (counted apart, so that the count of
    rows with more rounds reads as it did)."""
    more = [factor for factor in wanted.values() if factor > 1]
    same = len(wanted) - len(more)
    room = "one pair left no room for an offset"
    if not more:
        return (
            f"measured {same} inconclusive benchmark(s) again with the same rounds in a new pair "
            f"of processes ({room})"
        )
    line = (
        f"measured {len(more)} inconclusive benchmark(s) again with up to {max(more)}x the rounds "
        "in a new pair of processes"
    )
    return line + (f", and {same} that {room} with the same rounds" if same else "")


def _third_note(apart: int, doubted: int, stood: int, leaning: int) -> str:
    """The summary line's words for the rows a third pair measured, by why."""
    why = [f"{apart} whose two pairs lay apart"] if apart else []
    why += [f"{doubted} whose first pair's slowdown the new pair did not settle"] if doubted else []
    held = f"{stood} that the new pair called unchanged under this session's offsets"
    why += [held] if stood else []
    why += [f"{leaning} left open leaning slower"] if leaning else []
    return f"; {' and '.join(why)} measured by a third pair"


def _confirmed_there(again: Mapping[str, Mapping[str, Any]], wanted: Mapping[str, int]) -> str:
    """The regressions the re-measurement found and its own new pairs of processes confirmed,
    said on the line: they ran inside it, and the summary said nothing of them (trial 32: a row
    "confirmed by new pairs ... a third pair" under a line that named only the re-measurement)."""
    kept = sum(
        again.get(nodeid, {}).get("regression") is True
        and again.get(nodeid, {}).get("confirmed") is True
        for nodeid in wanted
    )
    if not kept:
        return ""
    found = "a regression" if kept == 1 else "regressions"  # trial 70: "1 of them regression(s)"
    return f"; {kept} of them {found}, confirmed there by further new pairs of processes"


def _resolved(row: Row, again: Mapping[str, Any] | None, factor: int, threshold: float) -> Row:
    """``row`` replaced by the new pair's row ``again`` (a report row, in percent); where that
    pair alone leaves it ``inconclusive``, judged on both pairs at once (``pooled``)."""
    if not factor:
        return row
    first = f"the session's first pair read {pct(row.change)} [{pct(row.low)}, {pct(row.high)}]"
    # Withdrawn, or held by its own new pair: its numbers are a new pair's; its reason says both.
    if row.confirmed is False or OWN_PAIR_READ in row.reason:
        first = row.reason
    if again is None or number(again, "change_pct") is None:
        why = "no row" if again is None else str(again.get("verdict"))
        return replace(row, reason=f"{row.reason}; measured again with more rounds: {why}")
    # The report says "regression (N% sure it is slower, ...)" first; this row will again.
    if again.get("regression") is True and again.get("confirmed") is not True:
        # Its own confirmation did not run (a test failed there, or it broke): the first stands.
        why = "found a regression it could not confirm"
        return replace(row, reason=f"{row.reason}; measured again with more rounds: {why}")
    note = re.sub(r"^regression \([^)]*\)(; )?", "", str(again.get("note") or ""))
    # Its own confirmation names its pairs "first" and "again" ("(first +9.7% ...", "counted:
    # first +9.7% ..."); said apart from the session's first pair (trials 33 and 35 read the two
    # "first" readings as one pair's).
    note = re.sub(r"(\(|: )first (?=[+-])", rf"\1the first {rounds_text(factor)} ", note)
    # Its note speaks of one pair's row, which new pairs would measure: this row is that new pair
    # (trial 75 read "new pairs ... measure such a row only where ..., and this one is not" under
    # "measured again ... in a new pair of processes" as a contradiction).
    note = note.replace(NOT_SURE_ENOUGH, NOT_SURE_AGAIN)
    lead = f"measured again {rounds_text(factor)} in a new pair of processes ({first})"
    replaced = replace(
        row,
        verdict=str(again.get("verdict") or "inconclusive"),
        regression=again.get("regression") is True,
        confirmed=again.get("confirmed") if isinstance(again.get("confirmed"), bool) else None,
        reason=lead + (f"; {note}" if note else ""),
        **judge.measured_as(row, again),
    )
    together = pooled.resolved_together(row, replaced, again, threshold, lead)
    apart = pooled.apart_together(row, together, again, lead)
    judged = pooled.sure_first(row, apart, again, threshold, lead)
    if judged.verdict == "inconclusive" and not judged.regression:
        together = pooled.open_together(row, judged, again, threshold, lead)
        return pooled.leaning(row, together, again, threshold)
    return offset_stands(row, judged)


# Why a new pair's ``unchanged`` does not settle a row that this session's offsets held.
OFFSET_STANDS = (
    "within the threshold by that pair's rounds, but this session showed its processes further "
    "apart than that leaves room for, and one more pair draws one more such offset"
)


def offset_stands(row: Row, judged: Row) -> Row:
    """``judged``, the new pair's verdict on ``row``, left ``inconclusive`` where that pair alone
    calls it ``unchanged`` but ``row`` was left ``inconclusive`` by its first pair and held by the
    offsets this session measured between processes (``offsets.allowed_for``): more rounds do not
    shrink such an offset, and the new pair's own session, measuring that one row, has none to
    allow for. A third pair then measures it, and the spread of the three decides
    (``_apart_by_more_pairs``): an unchanged row's pairs agree, and are called so. (The gate
    experiment's ``alloc`` workload, a2, quiet: a copy made 10 % slower read
    +0.8 % [-3.1, +4.8] in a first pair whose processes other rows showed 9.6 % apart, then +0.4 %
    [-1.2, +2.1] with 2x the rounds in a new pair, and was called ``unchanged``; its pairs in other
    sessions read 0, +10 and +20 %.) A row a new pair of its own measured (``offsets.by_own_pair``)
    has had that pair already, and the pair with more rounds is its third: it settles it, as it
    did before. Its detectable change keeps the offset's share."""
    held = AS_THOSE_ALLOW in row.reason and OWN_PAIR_READ not in row.reason
    if not held or judged.verdict != "unchanged" or not by_one_pair(judged.noise_source):
        return judged
    widest = max(
        (x for x in (judged.detectable, row.detectable) if x is not None and math.isfinite(x)),
        default=judged.detectable,
    )
    read = f"{pct(judged.change)} [{pct(judged.low)}, {pct(judged.high)}]"
    why = f"{judged.reason}; that pair read {read}, {OFFSET_STANDS}"
    return replace(judged, verdict="inconclusive", reason=why, detectable=widest)
