"""More pairs of processes where the spread of those so far leaves a row open.

Shared by the two places that judge a row on several pairs: a regression (or a slowdown in doubt)
that new pairs measured (``confirm``), and a row measured again with more rounds whose new pair
lay further from the first than both pairs' rounds allow (``resolve``). Both add pairs the same
way, ``pairs.FURTHER`` where three leave the row open and two at a time up to ``pairs.MOST`` where
five or more leave it open leaning slower, so that a row's verdict does not depend on which of the
two sent it to more pairs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.stats import TAIL, Change
from pytest_tpu.sameref import pairs
from pytest_tpu.sameref.judge import by_pairs, with_rounds
from pytest_tpu.sameref.nested import CONFIRM_ENV, ROUNDS_ENV, nested
from pytest_tpu.sameref.rows import TAIL_ENV
from pytest_tpu.sameref.swap import Swap

_Open = Callable[[Change | None, float], bool]  # pairs.still_open or pairs.leans_open


def confirming_env(rows: Iterable[Row]) -> dict[str, str]:
    """The environment of a nested session that re-measures ``rows``: it does not confirm or
    resolve again, and judges those found on the mean of all rounds on that statistic."""
    tailed = [row.nodeid for row in rows if row.statistic == TAIL]
    return {CONFIRM_ENV: "1", **({TAIL_ENV: json.dumps(tailed)} if tailed else {})}


@dataclass(frozen=True)
class Nested:
    """What every further pair's nested session is started with."""

    commit: str
    pct: float
    rootdir: Path
    measuring: Sequence[str]
    swap: Swap | None


@dataclass(frozen=True)
class Spread:
    """Rows judged on the spread between pairs: their first rows, thresholds and rounds, and how
    their further pairs are started."""

    rows: Mapping[str, Row]
    thresholds: Mapping[str, float]
    rounds: Mapping[str, float]
    session: Nested
    marked: Mapping[str, float]  # rows whose pairs take more rounds than the first: by how many
    # What a further pair that cannot run leaves, for the summary line.
    broken_leaves: str = "the first one stands"

    def further(self, later: dict[str, list[Mapping[str, Any] | None]]) -> tuple[set[str], str]:
        """Add ``pairs.FURTHER`` pairs' rows to ``later`` where three pairs leave a regression
        open, and two at a time up to ``pairs.MOST`` where five or more leave it open leaning
        slower (``pairs.leans_open``); the node ids whose further pairs could not run, and what
        the summary line adds."""
        opened = self._left(later, pairs.still_open)
        if not opened:
            return set(), ""
        note = f"; {len(opened)} that three pairs left open measured by {pairs.FURTHER} more"
        short = [
            n
            for n in opened
            if pairs.too_few(self._found(n, later[n]), self.thresholds[n], len(later[n]) + 1)
        ]
        if short:  # open as to the code: sure of a slowdown, but on too few pairs to fail it
            note += f" ({len(short)} sure of a slowdown: a regression needs {pairs.FEWEST} pairs)"
        adding, first = opened, 0
        while adding:
            broken = self._add(adding, later)
            if broken:  # as everywhere: a broken re-measurement must not decide a row
                return set(adding), f"{note} (that re-measurement {broken}: {self.broken_leaves})"
            adding = self._left(later, pairs.leans_open)
            if adding and not first:
                first = len(adding)
                note += f"; {first} that five left open, leaning slower, measured by up to "
                note += f"{pairs.MOST - 5} more"
        return set(), note

    def _left(self, later: Mapping[str, list[Mapping[str, Any] | None]], still: _Open) -> list[str]:
        """The rows whose pairs so far (fewer than ``pairs.MOST``) leave them ``still`` open, or
        are sure of a slowdown but too few to fail it (``pairs.too_few``)."""
        return [n for n, rows in later.items() if self._open(n, rows, still)]

    def _open(self, nodeid: str, rows: Sequence[Mapping[str, Any] | None], still: _Open) -> bool:
        """Whether ``nodeid``'s pairs so far leave it for more (``_left``)."""
        count, threshold = len(rows) + 1, self.thresholds[nodeid]
        if count >= pairs.MOST:
            return False
        found = self._found(nodeid, rows)
        return still(found, threshold) or pairs.too_few(found, threshold, count)

    def _found(self, nodeid: str, rows: Sequence[Mapping[str, Any] | None]) -> Change | None:
        """The change ``nodeid``'s pairs so far measure together."""
        return pairs.across(self.rows[nodeid], rows)

    def _add(self, nodeids: Sequence[str], later: dict[str, list[Mapping[str, Any] | None]]) -> str:
        """``pairs.FURTHER`` more pairs' rows for ``nodeids``, appended to ``later``; what went
        wrong, or ""."""
        rounds = json.dumps({n: self.rounds[n] for n in nodeids})
        env = {**confirming_env(self.rows.values()), ROUNDS_ENV: rounds}
        at = self.session
        for index in range(pairs.FURTHER):  # the roles swapped in every second pair, as before
            roles = at.swap if index % 2 == 0 else None
            found, problem = nested(
                list(nodeids), at.commit, at.pct, at.rootdir, at.measuring, env, roles
            )
            if problem:
                return problem
            for nodeid in nodeids:
                later[nodeid].append(with_rounds(found.get(nodeid), self.marked.get(nodeid, 1)))
        return ""


def on_more_pairs(
    first: Mapping[str, Row],
    second: Mapping[str, Mapping[str, Any] | None],
    spread: Spread,
    roles: Swap | None,
) -> tuple[dict[str, Row], str, str]:
    """The rows of ``first`` (by node id) that a new pair measured (``second``, their report
    rows) measured by a third pair with the same rounds (``spread.rounds``), taking ``roles``, and
    by more where three leave them open (``Spread.further``), then judged on the spread of them
    all (``judge.by_pairs``). Returns the rows judged, by node id (a row the third pair gave no
    interval for is left out); what broke the third pair (then none is judged); and what the
    summary line adds of the further pairs."""
    measured = list(second)
    rounds = json.dumps({n: spread.rounds[n] for n in measured})
    env = {**confirming_env(first[n] for n in measured), ROUNDS_ENV: rounds}
    at = spread.session
    third, problem = nested(measured, at.commit, at.pct, at.rootdir, at.measuring, env, roles)
    if problem:
        return {}, problem, ""
    later = {
        n: [with_rounds(second[n], spread.rounds[n]), with_rounds(third.get(n), spread.rounds[n])]
        for n in measured
    }
    later = {n: rows for n, rows in later.items() if pairs.across(first[n], rows) is not None}
    _, note = spread.further(later)
    judged = {n: by_pairs(first[n], rows, spread.thresholds[n]) for n, rows in later.items()}
    return judged, "", note
