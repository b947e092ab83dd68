"""How far apart the first pair's two processes were, as the rows measured again show it.

One pair of processes calls a change ``unchanged`` where its rounds' interval stays well under the
threshold: under a quarter of it, the interval under half (``rows.one_pair``). That leaves room for
an offset between the two processes of half the threshold or more, which their rounds cannot show.
Offsets are larger than that at times: beside a bursty neighbour (r56n), one first pair read a
numpy function made 5 % slower at +0.6 % [+0.5, +0.7] and +1.1 %, ``unchanged``, while its
unchanged copies read -4.1 % and its copies made 10 % slower +5.6 %, which new pairs measured at
about +10 %: that pair of processes was some 4 % off for that code.

The rows measured again by new pairs (``confirm``) show that offset: the first pair's change less
the mean of the new pairs' is the first pair's offset for that benchmark plus the rounds' noise of
both, while a change in the code cancels. So wherever some rows were measured again, the first
pair's offsets are estimated from them: their root mean square, the rounds' noise taken out, over
the rows whose rounds resolve a quarter of their threshold (a Keras CNN's rounds, 10-15 % apart,
say nothing of an offset of a percent). A row that pair alone called ``unchanged`` stays so only
where its interval's upper end lies under the threshold by more than an offset drawn from them
would reach 97.5 % of the time: 1.96 times their root mean square. (Student's t, with as many
degrees of freedom as rows, asked 12.7 times one row's offset: a new user's unchanged Keras GRU,
-0.2 % [-1.1, +0.7] in one pair, was held `inconclusive`, "detects 274 %", because one numpy
function measured again read 6.6 % off. On the interval ends of the unchanged rows of r57 and r58n
the normal quantile's room covered 170 of 170 and 112 of 112, as t's did.) Otherwise it is
``inconclusive``, its smallest detectable change counting the offset. The rows measured again
were picked for reading large, so the estimate leans high: more ``inconclusive``, never a failure.
A session whose rows one pair settled has no such estimate and keeps the rule.

Offsets differ between benchmarks (a pinned TensorFlow matmul's are tenths of a percent, a numpy
function's percents, a 23 µs pure-Python function's up to 12 %), so one benchmark's stands for
another's only as a warning. (New-user trial 30: that Python function, measured again, read 12 %
off in its first pair, and held a numpy row at +0.4 % [+0.2, +0.7] and a Keras row at -2.6 %
[-3.8, -1.2] ``inconclusive``, "detects 45 %", in every same-job session of unchanged code.) So a
row the warning would hold is measured by a new pair of processes of its own, with as few rounds
as check its reading (``rows.lean_factor``), and its own offset decides (``by_own_pair``): it stays
``unchanged`` where that pair's reading is one that one pair alone would call so, and the offset
between its two pairs leaves its interval room under the threshold as above; otherwise it is
``inconclusive``, saying what its own pair read. Where that pair cannot run or cannot resolve an
offset, the warning stands. A row its own pair would keep ``unchanged`` is measured by a third pair
of its own, and by more where three leave it open, and their spread decides (``confirm``): where a
process runs at one of a few speeds, two pairs share an offset often (the gate experiment's
``alloc`` workload, a2: copies made 5 % and 10 % slower, read -3.7 % and +0.5 % in their first
pair and -4.1 % and -0.6 % in their own, were called ``unchanged``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import FAIL_CONFIDENCE, POWER, by_one_pair, one_pair_may_hide
from pytest_tpu.sameref.judge import interval_text
from pytest_tpu.sameref.pairs import of_report, of_row
from pytest_tpu.sameref.reportrow import numbers

# An ``unchanged`` row's interval is 95 % two-sided: its upper end a 97.5 % one-sided bound. The
# offset it must leave room for is held to the same.
COVER = 0.975
_ROOM = NormalDist().inv_cdf(COVER)
# A row's rounds must resolve this share of its threshold for its offset to count: noisier rounds
# hide an offset of that size in their own noise.
RESOLVES = 0.25
# A change the gate catches 4 times in 5 lies this many standard errors out (normal errors).
_DETECT = NormalDist().inv_cdf(FAIL_CONFIDENCE) + NormalDist().inv_cdf(POWER)


@dataclass(frozen=True)
class Offset:
    """The first pair's offsets between its processes, on the log scale: their root mean square
    over ``count`` rows measured again, the largest one's node id and offset, and the room a row
    that pair alone measured must leave under its threshold (``bound``)."""

    rms: float
    count: int
    largest: str
    largest_log: float

    @property
    def bound(self) -> float:
        return _ROOM * self.rms


def first_pair_offset(
    first: Mapping[str, Row],
    later: Mapping[str, Sequence[Mapping[str, Any] | None]],
    thresholds: Mapping[str, float],
) -> Offset | None:
    """The first pair's offsets from the rows measured again: ``first`` the first pair's rows by
    node id, ``later`` the report rows of the pairs that measured each again, ``thresholds``
    each row's (a fraction). None where no row measured again resolves its offset."""
    found: list[tuple[str, float, float]] = []  # node id, offset, and its squared rounds' noise
    for nodeid, rows in later.items():
        one = of_row(first[nodeid]) if nodeid in first else None
        again = [m for m in map(of_report, rows) if m is not None]
        if one is None or not again or nodeid not in thresholds:
            continue
        mean = math.fsum(m.log for m in again) / len(again)
        noise = one.se**2 + math.fsum(m.se**2 for m in again) / len(again) ** 2
        if math.sqrt(noise) <= RESOLVES * math.log1p(thresholds[nodeid]):
            found.append((nodeid, one.log - mean, noise))
    if not found:
        return None
    # Each difference holds both sides' rounds' noise too: only what lies past it is offset.
    squares = [max(0.0, d * d - noise) for _, d, noise in found]
    nodeid, largest, _ = max(found, key=lambda item: abs(item[1]))
    return Offset(math.sqrt(math.fsum(squares) / len(squares)), len(found), nodeid, largest)


# Says, in a row's reason, that the offsets other rows showed in its pair held it (``allowed_for``).
AS_THOSE_ALLOW = "as large as those allow"


def allowed_for(row: Row, threshold: float, offset: Offset | None) -> Row:
    """``row`` as it stands once the first pair's measured ``offset`` is allowed for: a row that
    pair alone called ``unchanged`` whose interval does not clear the threshold by the room the
    offsets ask (``Offset.bound``) becomes ``inconclusive``, its detectable change widened by
    them.

    A row that pair left ``inconclusive`` stays so, its reason saying the same where its interval
    leaves no such room: a pair that measures it again with more rounds is then not pooled with
    it into ``unchanged``, and neither is this row where it is that pair's own reading
    (``pooled.resolved_together``). (r86, quiet, a Keras CNN made 5 % slower: the pair that
    measured it again with 4x the rounds read it -1.5 % [-3.6, +0.7], its unchanged copy -4.9 %,
    and a row it measured that new pairs measured again 4.2 % off; pooled with the first pair's
    +3.5 % [-2.0, +9.2], it was called ``unchanged`` at -0.8 % [-2.7, +1.1].)"""
    if offset is None or offset.rms <= 0 or row.status != "compared":
        return row
    if row.verdict not in ("unchanged", "inconclusive") or not by_one_pair(row.noise_source):
        return row
    if row.change is None or row.high is None or row.high <= -1:
        return row
    if math.log1p(row.high) + offset.bound < math.log1p(threshold):
        return row
    if row.verdict == "inconclusive":
        return replace(row, reason=_joined(row.reason, f"but {_offset_text(offset)}"))
    detectable = row.detectable
    if detectable is not None and math.isfinite(detectable) and detectable > -1:
        # The rounds' error and the offset's add as variances, the offset's scaled as the
        # rounds' is.
        detectable = math.expm1(math.hypot(math.log1p(detectable), _DETECT * offset.rms))
    why = (
        f"{row.change:+.1%} [{pct(row.low)}, {pct(row.high)}] in one pair of processes, within "
        f"its threshold ({threshold:.1%}) by its rounds; but {_offset_text(offset)}"
    )
    return replace(row, verdict="inconclusive", reason=why, detectable=detectable)


def _offset_text(offset: Offset) -> str:
    """What the rows measured again showed of the pair's offsets, and what it means for a row."""
    return (
        f"the {offset.count} benchmark(s) new pairs measured again read "
        f"{math.expm1(offset.rms):.1%} off in this pair (root mean square; {offset.largest} "
        f"{math.expm1(offset.largest_log):+.1%}): an offset between its two processes "
        f"{AS_THOSE_ALLOW} ({math.expm1(offset.bound):.1%}) could hide a regression of the "
        "threshold"
    )


# Opens what a row's own new pair read, in its reason (``by_own_pair``).
OWN_PAIR_READ = "a new pair of processes of its own read it"


def by_own_pair(row: Row, held: Row, threshold: float, again: Mapping[str, Any] | None) -> Row:
    """``row``, which one pair called ``unchanged`` and the rows measured again would hold
    (``held``, from ``allowed_for``), judged on a new pair of its own (``again``, its report row):
    ``unchanged`` where that pair's reading would be called so by one pair too (``vouches``) and
    the two pairs' difference, this benchmark's own offset, leaves room under the threshold; else
    ``inconclusive``, by its own offset where that is the larger, saying what the pair read.
    ``held`` where the pair tells nothing. (An ``unchanged`` row is measured by a third pair of
    its own before it stands: ``confirm``.)"""
    own = first_pair_offset({row.nodeid: row}, {row.nodeid: [again]}, {row.nodeid: threshold})
    reading = interval_text(again or {})
    if again is None or own is None or reading is None:
        why = "gave no row" if again is None or reading is None else "could not resolve its offset"
        return replace(held, reason=_joined(held.reason, f"a new pair of its own {why}"))
    kept = allowed_for(row, threshold, own)
    if kept.verdict == "unchanged" and vouches(again, threshold):
        said = f"{OWN_PAIR_READ} {reading}, within the threshold too"
        return replace(row, reason=_joined(row.reason, said))
    wider = kept if _detects(kept) > _detects(held) else held
    said = f"{OWN_PAIR_READ} {reading}"
    return replace(wider, verdict="inconclusive", reason=_joined(held.reason, said))


def vouches(again: Mapping[str, Any], threshold: float) -> bool:
    """Whether a new pair's report row reads a change one pair would call ``unchanged``: its
    interval above minus the threshold, its change and upper end where no offset between its
    processes could hide the threshold (``one_pair_may_hide``). Its own verdict does not say:
    a nested session that checks readings does not apply that rule."""
    found = numbers(again, "change_pct", "ci_low", "ci_high")
    if found is None:
        return False
    change, low, high = (x / 100 for x in found)
    return low > -threshold and not one_pair_may_hide(change, high, threshold)


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def _detects(row: Row) -> float:
    """A row's smallest detectable change, with none as nothing detectable."""
    found = row.detectable
    return found if found is not None and math.isfinite(found) else math.inf
