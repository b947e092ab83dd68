"""Two rules for rows one pair of processes leaves open, replayed on logged pairs.

``run.py --pairs FILE`` logs every pair's rounds. This replays, on those rounds:

- ``pooled``: the shipped rule (``pooled.resolved_together``, since s48): a row measured again
  with more rounds (``resolve``) judged on both its pairs at once. Printed per row, with the
  verdict the new pair alone gave (``rows.one_pair``). The offsets other rows show (which keep a
  first pair from being pooled) are not replayed.
- ``own`` (not shipped): every first-pair row one pair calls ``unchanged`` checked by a new
  pair of its own, drawn from every other pair that measured its workload, style and arm with the
  first pair's rounds, and judged by ``offsets.by_own_pair`` (the shipped rule for rows another
  benchmark's offset holds). Counts per cell how often it stays ``unchanged``.

    python experiments/compare_ref/one_pair_rules.py pooled r67_pairs.jsonl r68_pairs.jsonl
    python experiments/compare_ref/one_pair_rules.py own r67_pairs.jsonl
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

from pytest_tpu.sameref import offsets, rows  # noqa: E402
from pytest_tpu.sameref.pooled import resolved_together  # noqa: E402

Cell = tuple[str, str, float]  # workload, style, arm


def _cell(record: Mapping[str, Any]) -> Cell | None:
    name = NAME_RE.search(str(record.get("nodeid")))
    arm = arm_of(dict(record), name.group(3)) if name else None
    if name is None or arm is None or record.get("swapped"):
        return None
    return name.group(2), name.group(1), arm


def pooled(paths: Sequence[Path], threshold: float) -> None:
    """Each row measured again with more rounds, judged as the shipped code judges it
    (``pooled.resolved_together``) on its first pair and its new pair; per cell, what the new
    pair alone said and whether both together call it ``unchanged``."""
    by_row: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for path in paths:  # sessions are named alike in every run: a row is its file's
        for record in sorted(load([path]), key=lambda r: float(r.get("time") or 0)):
            stage = str(record.get("stage"))
            if _cell(record) is None or stage not in ("first", "rounds"):
                continue
            key = (path.name, str(record["session"]), str(record["nodeid"]))
            by_row[key].setdefault(stage, record)
    tally: Counter[tuple[Cell, str, bool]] = Counter()
    for (name, session, _), found in sorted(by_row.items()):
        if "first" not in found or "rounds" not in found or found["rounds"]["factor"] <= 1:
            continue
        cell = _cell(found["first"])
        first = rows.one_pair(row_of(found["first"], threshold), threshold)
        alone = rows.one_pair(row_of(found["rounds"], threshold), threshold)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rule", choices=("pooled", "own"))
    parser.add_argument("pairs", nargs="+", type=Path, help="run.py --pairs files")
    parser.add_argument("--threshold", type=float, default=5.0)
    options = parser.parse_args()
    if options.rule == "pooled":
        pooled(options.pairs, options.threshold / 100)
    else:
        own(load(options.pairs), options.threshold / 100)


if __name__ == "__main__":
    main()
