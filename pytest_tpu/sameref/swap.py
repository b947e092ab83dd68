"""New pairs of processes with the roles swapped: the base's code in the leading process.

The two processes of a pair do not do the same things: the head is the session that started
everything and leads the turns, the base a child that follows. Some code runs at another speed in
one role than in the other, the same way in every pair made the same way, and new pairs made like
the first then agree with it on a slowdown of unchanged code (measured here: a 50 µs tokenizer,
``re.findall`` and dicts, read +7 to +16 % in 35 of 39 A/A same-job sessions, the head slower;
three new pairs agreed and the gate failed it, exit 6; ``layout`` drew its heap at random and
it still read +6.4 % [+0.9, +12.1] by five pairs in one of three gated sessions).

So the new pairs take turns at the roles: the first new pair and every second one after it run
the base's code in the leading process -- a nested session started in the base's worktree whose
base side borrows this tree as it is (``worktree.BORROW_ENV``) -- and their rows are turned back
into head against base (``inverted``). An offset that comes with a role then changes sign from
pair to pair, and the spread between the pairs shows it instead of confirming it; a change in the
code keeps its sign in every pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tpu.sameref.reportrow import number
from pytest_tpu.sameref.worktree import BORROW_ENV, twin_of

SWAPPED_KEY = "roles_swapped"  # marks a report row turned back by ``inverted``
_FLIPPED = {"slower": "faster", "faster": "slower"}


@dataclass(frozen=True)
class Swap:
    """Where a pair with the roles swapped runs: ``cwd`` is the base worktree's twin of this
    session's root folder, ``head`` this tree's top, which its base side borrows."""

    cwd: Path
    head: Path
    tree: Path | None = None  # the base's worktree, where this tree's paths have their twins

    def twin(self, path: Path) -> Path:
        """``path`` in this tree as its twin in the base's worktree (as it is outside)."""
        return twin_of(path, self.head, self.tree) if self.tree else path

    def env(self) -> dict[str, str]:
        return {BORROW_ENV: str(self.head)}


def swap_for(tree: Path, head: Path, rootdir: Path) -> Swap | None:
    """The swap of a session whose base worktree is ``tree`` and whose tree's top is ``head``;
    None where its root folder lies outside that tree."""
    try:
        return Swap(tree / rootdir.resolve().relative_to(head.resolve()), head, tree)
    except ValueError:
        return None


def _turned(percent: float | None) -> float | None:
    """A change in percent of base against head, as head against base."""
    if percent is None or percent <= -100 or not math.isfinite(percent):
        return None
    return 100.0 * (100.0 / (100.0 + percent) - 1.0)


def inverted(row: Mapping[str, Any]) -> dict[str, Any]:
    """A report row of a pair with the roles swapped (its head ran the base's code), as head
    against base: the change and its interval turned over, the sides and the verdict swapped.
    Its own gate's word is dropped: the rules of ``judge`` judge it on its numbers."""
    out = dict(row)
    low, high = _turned(number(row, "ci_high")), _turned(number(row, "ci_low"))
    sure = {key: number(row, key) for key in ("confidence_pct", "pair_confidence_pct")}
    out.update(
        {key: None if value is None else 100.0 - value for key, value in sure.items()},
        change_pct=_turned(number(row, "change_pct")),
        ci_low=low,
        ci_high=high,
        baseline=row.get("current"),
        current=row.get("baseline"),
        verdict=_FLIPPED.get(str(row.get("verdict")), row.get("verdict")),
        regression=False,
        confirmed=None,
        note="",
        **{SWAPPED_KEY: True},
    )
    return out
