"""Pairs of processes that disagree beyond their rounds' noise: an offset between processes.

A pair's interval is its rounds' own. Processes differ by more than their rounds show (measured
here: a 38 µs numpy function 3.5 % slower read +5.7 % [+5.6 %, +5.9 %], +6.1 % [+5.9 %, +6.4 %],
+2.45 % [+2.36 %, +2.54 %] and +3.8 % by four pairs; the same code's 85 µs Python loop read -4.5 %
to +5.2 % with intervals under ±1 point), and two pairs can agree on such an offset by chance
(trial 17: an unchanged tokenizer +4.5 % and +5.1 %). So a regression a new pair agrees with is
measured by a third pair, and the verdict takes the spread between the pairs as its uncertainty
(``stats.between_pairs``): few degrees of freedom, an honest width. Where a new pair withdraws a
regression but lies further from the first than their intervals allow, the withdrawn row shows
that spread too. Where three pairs leave it
open (the interval from below zero past the threshold), ``FURTHER`` more pairs measure it: with
five pairs the interval is about 2.2 times narrower than with three (Student's t of 4 degrees of
freedom instead of 2, and the mean of four new pairs instead of two). Measured here (r29): a
numpy function made 10 % slower read +13.3 %, +5.8 % and +13.3 % by three pairs, which left it
``inconclusive`` at [-3 %, +24 %].

Where five pairs still leave it open and their change is at least half the threshold (what a
``slower`` verdict asks), pairs are added two at a time, up to ``MOST``: the mean of eight new pairs
with eight degrees of freedom gives an interval about 1.7 times narrower than five pairs do. A
change under half the threshold stops at five (``inconclusive``): unchanged code rarely leans that
far, so passing sessions seldom pay for it. (Measured here, r48 and r49, quiet: of the Keras CNN's
+5 % rows that reached five pairs, 3 of 12 were left open at +2.5 % or more, ``inconclusive``; five
pairs of that workload differ by 2 to 4 % (standard deviation), so their mean's interval is ±3 to
±6 points.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.stats import CONFIDENCE, Change, between_pairs, between_pairs_by_role
from pytest_tpu.sameref.reportrow import numbers
from pytest_tpu.sameref.swap import SWAPPED_KEY

APART = 2.0  # standard errors of their difference: two pairs further apart disagree
FURTHER = 2  # pairs added where three leave a regression open (and, leaning slower, five or more)
MOST = 9  # pairs in all, the first one's included, where five leave a regression open
# The shown intervals are two-sided at CONFIDENCE: their half-width in standard errors.
_Z = NormalDist().inv_cdf(0.5 * (1 + CONFIDENCE))


def _logged(change: float, low: float, high: float) -> tuple[float, float] | None:
    """A change and its 95 % interval (fractions) as a log change and its standard error."""
    if min(change, low, high) <= -1 or not all(map(math.isfinite, (change, low, high))):
        return None
    return math.log1p(change), (math.log1p(high) - math.log1p(low)) / (2 * _Z)


def of_row(row: Row) -> tuple[float, float] | None:
    """A row's change as a log change and its standard error, or None without an interval."""
    if row.change is None or row.low is None or row.high is None:
        return None
    return _logged(row.change, row.low, row.high)


def of_report(again: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """A new pair's report row's change as a log change and its standard error, or None."""
    found = numbers(again or {}, "change_pct", "ci_low", "ci_high")
    return None if found is None else _logged(*(x / 100 for x in found))


def disagree(first: Row, again: Mapping[str, Any] | None) -> bool:
    """Whether the first pair's row and a new pair's report row lie further apart than their
    intervals allow."""
    one, two = of_row(first), of_report(again)
    if one is None or two is None:
        return False
    return abs(one[0] - two[0]) > APART * math.hypot(one[1], two[1])


def across(first: Row, later: Sequence[Mapping[str, Any] | None]) -> Change | None:
    """The change measured by the new pairs (``later``, report rows), uncertain by the spread of
    them all and the first."""
    measured = [of_row(first), *(of_report(row) for row in later)]
    if any(m is None for m in measured):
        return None
    logs = [m[0] for m in measured if m is not None]
    errors = [m[1] for m in measured[1:] if m is not None]
    within = math.hypot(*errors) / len(errors)
    swapped = [bool((row or {}).get(SWAPPED_KEY)) for row in later]
    by_role = between_pairs_by_role(logs, logs[1:], swapped, within)
    return by_role if by_role is not None else between_pairs(logs, logs[1:], within)


def leaves_open(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row neither agrees with a regression nor rules it out: its 95 %
    interval reaches below zero and up to the threshold (``threshold`` a fraction)."""
    found = numbers(again or {}, "ci_low", "ci_high")
    return found is not None and found[0] <= 0 and found[1] >= threshold * 100


def leans_open(found: Change | None, threshold: float) -> bool:
    """Whether the pairs' spread leaves a regression open (``still_open``) with their change at
    least half the threshold: worth more pairs (``MOST``)."""
    return found is not None and still_open(found, threshold) and found.estimate >= threshold / 2


def still_open(found: Change | None, threshold: float) -> bool:
    """Whether the pairs' spread leaves a regression of ``threshold`` neither shown nor ruled out:
    its 95 % interval reaches below zero and up to the threshold."""
    return found is not None and found.low <= 0 and found.high >= threshold
