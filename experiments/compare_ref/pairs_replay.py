"""Replay the same-job confirmation rules on logged pairs of processes, old rules against new.

A same-job session that cannot settle a row in its first pair of processes measures it again in
new pairs (``pytest_tpu.sameref.confirm``). Which rows go to new pairs, and how their readings are
combined, decides how often a change at the threshold is caught and how often unchanged code is
not. Runs of ``run.py`` read both on one day's machine, and days differ (r43 read the +5 % arms'
first pairs at a median +4.8 to +5.2 %, r44 at +5.5 to +6.2 %), so a new rule and an old one are
best compared on the same pairs.

``run.py --pairs FILE`` logs every pair's rounds (``pairlog.py``). Every pair of processes that
measured one workload, style and arm with the first pair's rounds (a session's first pair or a
new pair confirming it) is an independent draw of what a pair of processes reads there. This
takes each session's first pair as the first row (``rows.compare_one`` on its rounds, the shipped
code) and draws the new pairs it asks for at random from the other pairs of the same cell, many
times, under two rules:

- ``old``: only a regression (and an improvement) goes to a new pair; a third pair only where the
  new pair agrees (``853d2ff``);
- ``new``: also a slowdown one pair was sure of between half the threshold and the threshold
  (``rows.doubtful``), and a regression the new pair lies far from (``pairs.disagree``);
- ``quarter``: ``new`` with the band from a quarter of the threshold (not shipped: it catches the
  +5 % rows one pair read at +1 to +2.5 %, but sends unchanged rows to new pairs far more often,
  and now and then fails one);
- ``open``: ``new`` where a new pair (or the pair measuring once more) that leaves a regression
  open sends it to more pairs instead of withdrawing it, and five or more pairs that leave it
  open leaning slower are joined by two more at a time, up to ``pairs.MOST`` (shipped since
  session 25);
- ``band``: ``open`` with the band from a quarter of the threshold (``quarter``'s band under
  today's rules: the spread of pairs decides at 99.5 %, ``pairs.SURE``, and pairs that leave it
  open leaning slower are joined by more). Shipped since session 62: ``rows.doubtful`` itself
  now sends that band to new pairs, so on today's code ``open`` and ``band`` coincide; ``open``
  without the band is the code of ``1c1e21b``, on which r88's replay ran.

The table also gives the new pairs each rule takes per first row: what it costs.

A new pair that could not tell is followed by one more drawn pair (the shipped code gives that one
more rounds; drawn pairs have the first pair's). Rows left open with wide intervals are measured
again with more rounds in a real session (``resolve``); that is not replayed, so the CNN's rows
read lower here than in the experiment.

    python experiments/compare_ref/pairs_replay.py r43q_pairs.jsonl --draws 200
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, arm_of, load  # noqa: E402

from pytest_tpu.gate.compare import Row  # noqa: E402
from pytest_tpu.gate.stats import FAIL_CONFIDENCE  # noqa: E402
from pytest_tpu.results import BenchResult  # noqa: E402
from pytest_tpu.sameref import judge, pairs, rows  # noqa: E402
from pytest_tpu.sameref.turns import Rounds  # noqa: E402
from pytest_tpu.summary import from_gate_row  # noqa: E402

Cell = tuple[str, str, float]  # workload, style, arm
RULES = ("old", "new", "quarter", "open", "band")


class _Counted:
    """An iterator over drawn pairs that counts how many were taken: the rule's cost."""

    def __init__(self, items: Sequence[Row]) -> None:
        self.items, self.taken = items, 0

    def __iter__(self) -> _Counted:
        return self

    def __next__(self) -> Row:
        self.taken += 1
        return self.items[self.taken - 1]


def row_of(record: Mapping[str, Any], threshold: float) -> Row:
    """The row the shipped code makes of one logged pair's rounds."""
    head, base = record["head"], record["base"]
    rounds = Rounds(head=[turn for turn, _ in head], base=[turn for turn, _ in base])
    result = BenchResult(str(record["nodeid"]), "x", None, {}, {}, tuple(v for _, v in head))
    return rows.compare_one(result, [v for _, v in base], rounds, threshold)


def reported(row: Row) -> dict[str, Any]:
    """``row`` as a nested session's report writes it, as the confirmation reads it."""
    return asdict(from_gate_row(row))


def _pairs_of(
    first: Row,
    draws: Iterator[Row],
    threshold: float,
    again: dict[str, Any] | None = None,
    most: int = 5,
    start: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A second pair (``again`` where drawn already) and a third (or ``start``, both drawn), two
    more where three leave it open, and two at a time up to ``most`` pairs while they leave it
    open leaning slower."""
    later = start or [again or reported(next(draws)), reported(next(draws))]
    if pairs.still_open(pairs.across(first, later), threshold):
        later += [reported(next(draws)), reported(next(draws))]
        while len(later) + 1 < most and pairs.leans_open(pairs.across(first, later), threshold):
            later += [reported(next(draws)), reported(next(draws))]
    return later


def quarter(first: Row, threshold: float) -> bool:
    """The ``quarter`` rule's band: a slowdown one pair is 99 % sure of, from a quarter of the
    threshold up (``rows.doubtful`` starts at half)."""
    change, sure = first.change, first.confidence
    if first.regression or first.status != "compared" or change is None or sure is None:
        return False
    return sure >= FAIL_CONFIDENCE and threshold / 4 <= change < threshold


def judged(first: Row, draws: Iterator[Row], threshold: float, rule: str) -> Row:
    """``first`` as the confirmation leaves it under ``rule``, its new pairs from ``draws``."""
    new, most = rule != "old", pairs.MOST if rule in ("open", "band") else 5
    if first.regression:
        again = reported(next(draws))
        if judge.once_more(again, threshold, 4):
            last = reported(next(draws))
            if rule in ("open", "band") and pairs.leaves_open(last, threshold):
                later = _pairs_of(first, draws, threshold, most=most, start=[again, last])
                return judge.by_pairs(first, later, threshold)
            return judge.by_new_pair(first, again, threshold, (4, last))
        if rule in ("open", "band"):
            more = judge.to_more_pairs(first, again, threshold)
        else:  # before session 25 an open new pair withdrew the regression; ``old``: agreeing only
            more = judge.confirms(again, threshold) or (new and pairs.disagree(first, again))
        if more:
            later = _pairs_of(first, draws, threshold, again, most)
            return judge.by_pairs(first, later, threshold)
        return judge.by_new_pair(first, again, threshold)
    if first.status == "compared" and first.verdict == "faster":
        return judge.improvement(first, reported(next(draws)), threshold)
    if (rule in ("new", "open", "band") and rows.doubtful(first, threshold)) or (
        rule in ("quarter", "band") and quarter(first, threshold)
    ):
        return judge.by_pairs(first, _pairs_of(first, draws, threshold, most=most), threshold)
    return first


def cells(records: Sequence[Mapping[str, Any]]) -> dict[Cell, list[dict[str, Any]]]:
    """The pairs measured with a first pair's rounds, by cell; each marked first or not."""
    found: dict[Cell, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        name = NAME_RE.search(str(record.get("nodeid")))
        if not name or record.get("stage") not in ("first", "confirm") or record.get("factor") != 1:
            continue
        arm = arm_of(dict(record), name.group(3))
        if arm is None or not str(record.get("session", "")).split("-")[-1].isdigit():
            continue  # the A/A warm-up session has its own rows; the arms' sessions suffice
        found[(name.group(2), name.group(1), arm)].append(dict(record))
    return found


def replay(
    found: Mapping[Cell, list[dict[str, Any]]], threshold: float, draws: int, seed: int
) -> dict[Cell, dict[str, Counter[str]]]:
    """Per cell and rule, how the first rows came out over ``draws`` random orders of new pairs."""
    outcomes: dict[Cell, dict[str, Counter[str]]] = {}
    for cell, records in sorted(found.items()):
        made = [(record, row_of(record, threshold)) for record in records]
        pool = [row for _, row in made if row.change is not None]
        firsts = [row for record, row in made if record["stage"] == "first"]
        counts: dict[str, Counter[str]] = {rule: Counter() for rule in RULES}
        generator = random.Random(seed)
        for first in firsts:
            others = [row for row in pool if row is not first]
            for _ in range(draws):
                order = generator.sample(others, len(others))
                for rule in RULES:
                    drawn = _Counted(order * 3)
                    row = judged(first, drawn, threshold, rule)
                    counts[rule][_outcome(row, cell[2])] += 1
                    counts[rule]["rows"] += 1
                    counts[rule]["new pairs"] += drawn.taken
        counts["old"]["first pairs"] = len(firsts)
        outcomes[cell] = counts
    return outcomes


def _outcome(row: Row, arm: float) -> str:
    if row.regression:
        return "failed"
    wrong = (arm == 0 and row.verdict in ("slower", "faster")) or (
        arm > 0 and row.verdict in ("unchanged", "faster")
    )
    return "wrong" if wrong else str(row.verdict)


def table(outcomes: Mapping[Cell, Mapping[str, Counter[str]]]) -> str:
    """Per cell: the share of first rows that failed, got a wrong verdict, or stayed
    inconclusive, under each rule."""
    keys = ("failed", "wrong", "inconclusive")
    head = " | ".join(f"{key}, {rule}" for key in keys for rule in RULES)
    head += " | " + " | ".join(f"new pairs per row, {rule}" for rule in RULES)
    lines = [
        f"| workload | style | work | first pairs | {head} |",
        "|---" * (4 + 2 * len(keys)) + "|",
    ]
    for (workload, style, arm), counts in outcomes.items():
        shares = [
            f"{100 * counts[rule][key] / max(1, counts[rule]['rows']):.1f}%"
            for key in keys
            for rule in RULES
        ]
        shares += [f"{counts[r]['new pairs'] / max(1, counts[r]['rows']):.2f}" for r in RULES]
        firsts = counts["old"]["first pairs"]
        lines.append(f"| {workload} | {style} | +{arm:.0%} | {firsts} | {' | '.join(shares)} |")
    return "\n".join(lines)


def arguments(doc: str, draws: int, draws_help: str, seed: int) -> argparse.Namespace:
    """The command line of a replay on logged pairs: the files, threshold, draws and seed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("pairs", nargs="+", type=Path, help="run.py --pairs files")
    parser.add_argument("--threshold", type=float, default=5.0, help="percent (default 5)")
    parser.add_argument("--draws", type=int, default=draws, help=draws_help)
    parser.add_argument("--seed", type=int, default=seed)
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__, 200, "random orders per first pair", 20261125)
    found = cells(load(args.pairs))
    print(table(replay(found, args.threshold / 100, args.draws, args.seed)))


if __name__ == "__main__":
    main()
