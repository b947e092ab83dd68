"""Rules for rows one pair of processes leaves open or settles, replayed on logged pairs.

``run.py --pairs FILE`` logs every pair's rounds. This replays, on those rounds:

- ``pooled``: the shipped rule (``pooled.resolved_together``, since s48): a row measured again
  with more rounds (``resolve``) judged on both its pairs at once. Printed per row, with the
  verdict the new pair alone gave (``rows.one_pair``). The offsets other rows show (which keep a
  first pair from being pooled) are not replayed.
- ``own`` (not shipped): every first-pair row one pair calls ``unchanged`` checked by a new
  pair of its own, drawn from every other pair that measured its workload, style and arm with the
  first pair's rounds, and judged by ``offsets.by_own_pair`` (the shipped rule for rows another
  benchmark's offset holds). Counts per cell how often it stays ``unchanged``.

- ``second`` (not shipped): every row a new pair with more rounds alone calls ``unchanged``
  (neither apart from its first pair nor leaving a slowdown it was sure of, ``pooled``) measured
  by a second such pair, each other pair the cell logged with the same factor in turn: the two
  agreeing (``pairs.apart``) and their pooled change ruling the threshold out
  (``both_pairs.unchanged_together``) keep it ``unchanged``; otherwise the spread of all three
  pairs decides (``judge.by_pairs``; the further pairs it may ask for are not replayed). Counts
  per cell how the draws end.

- ``room`` (shipped in session 69, ``resolve.no_room``): every first-pair row one pair leaves
  ``inconclusive`` only for want of room for an offset (``resolve.factor_for`` gives it a second
  pair with the same rounds) judged with a second pair drawn from each other pair its cell
  logged with the first pair's rounds, in turn, as ``resolve`` judges it: the second alone, both
  together where it leaves the row open, a third pair where they lie apart (not replayed
  further), confirmation where it reads a regression. Counts per cell how the draws end.

A run's pair log holds every try of a session under its name (a try cut short and started again
logs twice), so a row is a session's unswapped first pair and what follows it.

    python experiments/compare_ref/one_pair_rules.py pooled r67_pairs.jsonl r68_pairs.jsonl
    python experiments/compare_ref/one_pair_rules.py own r67_pairs.jsonl
    python experiments/compare_ref/one_pair_rules.py second r88_pairs.jsonl r94_pairs.jsonl
    python experiments/compare_ref/one_pair_rules.py room r88_pairs.jsonl r94_pairs.jsonl
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, arm_of, load  # noqa: E402
from pairs_replay import reported, row_of  # noqa: E402

from pytest_tpu.gate.compare import Row  # noqa: E402
from pytest_tpu.sameref import judge, offsets, pairs, rows  # noqa: E402
from pytest_tpu.sameref import pooled as both_pairs  # noqa: E402
from pytest_tpu.sameref.pooled import resolved_together  # noqa: E402
from pytest_tpu.sameref.resolve import factor_for  # noqa: E402

Cell = tuple[str, str, float]  # workload, style, arm


def _cell(record: Mapping[str, Any]) -> Cell | None:
    name = NAME_RE.search(str(record.get("nodeid")))
    arm = arm_of(dict(record), name.group(3)) if name else None
    if name is None or arm is None or record.get("swapped"):
        return None
    return name.group(2), name.group(1), arm


def measured_again(paths: Sequence[Path]) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Each row measured again with more rounds: its run's file name, its first pair's record and
    its new pair's (the first logged after it)."""
    found = []
    for path in paths:
        by_row: dict[tuple[str, str, int], dict[str, Mapping[str, Any]]] = defaultdict(dict)
        tries: Counter[tuple[str, str]] = Counter()
        for record in sorted(load([path]), key=lambda r: float(r.get("time") or 0)):
            stage, key = str(record.get("stage")), (str(record["session"]), str(record["nodeid"]))
            if _cell(record) is None or stage not in ("first", "rounds"):
                continue
            tries[key] += stage == "first"
            by_row[(*key, tries[key])].setdefault(stage, record)
        for rows_of in by_row.values():
            again = rows_of.get("rounds")
            if "first" in rows_of and again is not None and float(again["factor"]) > 1:
                found.append((path.name, rows_of["first"], again))
    return found


def pooled(paths: Sequence[Path], threshold: float) -> None:
    """Each row measured again with more rounds, judged as the shipped code judges it
    (``pooled.resolved_together``) on its first pair and its new pair; per cell, what the new
    pair alone said and whether both together call it ``unchanged``."""
    tally: Counter[tuple[Cell, str, bool]] = Counter()
    for name, first_record, again_record in measured_again(paths):
        session = str(first_record["session"])
        cell = _cell(first_record)
        first = rows.one_pair(row_of(first_record, threshold), threshold)
        alone = rows.one_pair(row_of(again_record, threshold), threshold)
        if cell is None or first.change is None or alone.change is None:
            continue
        both = resolved_together(first, alone, reported(alone), threshold, "measured again")
        calls = both.verdict == "unchanged" and alone.verdict != "unchanged"
        tally[(cell, str(alone.verdict), calls)] += 1
        print(
            f"{name:18} {session:10} {cell[0]:7} {cell[1]:8} +{cell[2]:.0%}: first "
            f"{first.change:+.1%}, more rounds {alone.change:+.1%} ({alone.verdict}), both "
            f"{both.change:+.1%}{' unchanged' if calls else ''}"
        )
    print("\n| workload | style | work | new pair alone | both together unchanged | rows |")
    print("|---|---|---|---|---|---|")
    for (cell, verdict, calls), count in sorted(tally.items()):
        print(f"| {cell[0]} | {cell[1]} | +{cell[2]:.0%} | {verdict} | {calls} | {count} |")


def own(records: Sequence[Mapping[str, Any]], threshold: float) -> None:
    draws: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    firsts: list[tuple[Cell, Mapping[str, Any]]] = []
    for record in records:
        cell = _cell(record)
        if cell is None or (record.get("factor") != 1 and record.get("stage") != "first"):
            continue
        draws[cell].append(record)
        if record.get("stage") == "first":
            firsts.append((cell, record))
    tally: Counter[tuple[Cell, str]] = Counter()
    for cell, record in firsts:
        row = rows.one_pair(row_of(record, threshold), threshold)
        if row.verdict != "unchanged":
            continue
        for other in draws[cell]:
            if other is not record:
                again = reported(row_of(other, threshold))
                tally[(cell, offsets.by_own_pair(row, row, threshold, again).verdict)] += 1
    print("| workload | style | work | own pair's verdict | checks |")
    print("|---|---|---|---|---|")
    for (cell, verdict), count in sorted(tally.items()):
        print(f"| {cell[0]} | {cell[1]} | +{cell[2]:.0%} | {verdict} | {count} |")


def _alone_unchanged(first: Row, alone: Row, threshold: float) -> bool:
    """Whether the new pair alone settles the row ``unchanged`` (the shipped ``resolve`` sends a
    row on to a third pair where it lies apart from the first, or leaves a slowdown the first was
    sure of)."""
    if alone.verdict != "unchanged":
        return False
    again = reported(alone)
    kept = both_pairs.apart_together(first, alone, again, "measured again")
    return both_pairs.sure_first(first, kept, again, threshold, "measured again") is alone


def _with_second(first: Row, alone: Row, second: Row, threshold: float) -> str:
    """How a row ends on its new pair and a second one with the same rounds."""
    one, two = reported(alone), reported(second)
    this, that = pairs.of_report(one), pairs.of_report(two)
    if this is None or that is None:
        return "no interval"
    agree = not pairs.apart(this, that)
    if agree and both_pairs.unchanged_together(*both_pairs.pooled(this, that), threshold):
        return "unchanged"
    spread = judge.by_pairs(first, [one, two], threshold).verdict
    return f"{'agree' if agree else 'apart'}, spread: {spread}"


def second(paths: Sequence[Path], threshold: float) -> None:
    rows_again = measured_again(paths)
    by_cell: dict[tuple[Cell, float], list[Mapping[str, Any]]] = defaultdict(list)
    for _, first_record, again_record in rows_again:
        cell = _cell(first_record)
        assert cell is not None
        by_cell[(cell, float(again_record["factor"]))].append(again_record)
    settled: Counter[tuple[Cell, float]] = Counter()
    tally: dict[tuple[Cell, float], Counter[str]] = defaultdict(Counter)
    for _, first_record, again_record in rows_again:
        cell = _cell(first_record)
        assert cell is not None  # measured_again keeps only rows of a known cell
        key = (cell, float(again_record["factor"]))
        first = rows.one_pair(row_of(first_record, threshold), threshold)
        alone = rows.one_pair(row_of(again_record, threshold), threshold)
        if not _alone_unchanged(first, alone, threshold):
            continue
        settled[key] += 1
        for other in by_cell[key]:
            if other is not again_record:
                drawn = rows.one_pair(row_of(other, threshold), threshold)
                tally[key][_with_second(first, alone, drawn, threshold)] += 1
    print("| workload | style | work | rounds | rows one new pair settled | draws | how they end |")
    print("|---|---|---|---|---|---|---|")
    for (cell, factor), ends in sorted(tally.items()):
        draws = sum(ends.values())
        shares = "; ".join(f"{end} {count / draws:.1%}" for end, count in ends.most_common())
        row = f"| {cell[0]} | {cell[1]} | +{cell[2]:.0%} | {factor:g}x | {settled[(cell, factor)]}"
        print(f"{row} | {draws} | {shares} |")


def _second_of(first: Row, other: Mapping[str, Any], threshold: float) -> str:
    """How a row ``resolve`` sends to a second pair with the same rounds ends on ``other``."""
    alone = rows.one_pair(row_of(other, threshold), threshold)
    if alone.change is None:
        return "no interval"
    if alone.regression or alone.verdict == "slower":
        return "to confirmation"
    again = reported(alone)
    together = resolved_together(first, alone, again, threshold, "x")
    if alone.verdict == "inconclusive" and together.verdict == "unchanged":
        return "unchanged (both together)"
    judged = both_pairs.apart_together(first, alone, again, "x")
    judged = both_pairs.sure_first(first, judged, again, threshold, "x")
    if judged is not alone:
        return "to a third pair"
    return f"{alone.verdict}{' (alone)' if alone.verdict == 'unchanged' else ''}"


def room(records: Sequence[Mapping[str, Any]], threshold: float) -> None:
    draws: dict[Cell, list[Mapping[str, Any]]] = defaultdict(list)
    firsts: list[tuple[Cell, Mapping[str, Any]]] = []
    for record in records:
        cell = _cell(record)
        if cell is None or record.get("factor") != 1:
            continue
        if record.get("stage") in ("first", "confirm"):
            draws[cell].append(record)
        if record.get("stage") == "first":
            firsts.append((cell, record))
    sent: Counter[Cell] = Counter()
    seen: Counter[Cell] = Counter()
    tally: dict[Cell, Counter[str]] = defaultdict(Counter)
    for cell, record in firsts:
        first = rows.one_pair(row_of(record, threshold), threshold)
        seen[cell] += 1
        # A slowdown one pair is sure of goes to new pairs first (``confirm``), not here.
        if rows.doubtful(first, threshold) or factor_for(first, threshold, 4) != 1:
            continue
        sent[cell] += 1
        for other in draws[cell]:
            if other is not record:
                tally[cell][_second_of(first, other, threshold)] += 1
    print("| workload | style | work | first pairs sent to a second | draws | how they end |")
    print("|---|---|---|---|---|---|")
    for cell, ends in sorted(tally.items()):
        draws_made = sum(ends.values())
        shares = "; ".join(f"{end} {n / draws_made:.0%}" for end, n in ends.most_common())
        print(
            f"| {cell[0]} | {cell[1]} | +{cell[2]:.0%} | {sent[cell]} of {seen[cell]} | "
            f"{draws_made} | {shares} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rule", choices=("pooled", "own", "second", "room"))
    parser.add_argument("pairs", nargs="+", type=Path, help="run.py --pairs files")
    parser.add_argument("--threshold", type=float, default=5.0)
    options = parser.parse_args()
    if options.rule == "pooled":
        pooled(options.pairs, options.threshold / 100)
    elif options.rule == "second":
        second(options.pairs, options.threshold / 100)
    elif options.rule == "room":
        room(load(options.pairs), options.threshold / 100)
    else:
        own(load(options.pairs), options.threshold / 100)


if __name__ == "__main__":
    main()
