"""Two rules for rows one pair of processes leaves open, replayed on logged pairs (not shipped).

``run.py --pairs FILE`` logs every pair's rounds. This replays, on those rounds:

- ``pooled``: a row measured again with more rounds (``resolve``) judged on both its pairs at
  once: their changes weighted by the inverse of their rounds' variance, the interval Student's t
  on Welch's degrees of freedom, and the room for an offset between processes that one pair must
  leave (half the threshold) shrunk as the weights shrink the mean's offset (the root of the sum
  of the squared shares). ``unchanged`` where the two pairs agree (95 %), the pooled interval
  leaves that room under the threshold, its change lies under the threshold less three quarters
  of it shrunk alike, and it could have caught the threshold. Printed per row, with the verdict
  the new pair alone gave (the shipped code, ``rows.one_pair``).
- ``own``: every first-pair row one pair calls ``unchanged`` checked by a new pair of its own,
  drawn from every other pair that measured its workload, style and arm with the first pair's
  rounds, and judged by ``offsets.by_own_pair`` (the shipped rule for rows another benchmark's
  offset holds). Counts per cell how often it stays ``unchanged``.

    python experiments/compare_ref/one_pair_rules.py pooled r67_pairs.jsonl r68_pairs.jsonl
    python experiments/compare_ref/one_pair_rules.py own r67_pairs.jsonl
"""

from __future__ import annotations

import argparse
import math
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

from pytest_tpu.gate import stats  # noqa: E402
from pytest_tpu.gate.stats import ONE_PAIR_HIDES, ONE_PAIR_OFFSET, Change  # noqa: E402
from pytest_tpu.sameref import offsets, rows  # noqa: E402

Cell = tuple[str, str, float]  # workload, style, arm


def _cell(record: Mapping[str, Any]) -> Cell | None:
    name = NAME_RE.search(str(record.get("nodeid")))
    arm = arm_of(dict(record), name.group(3)) if name else None
    if name is None or arm is None or record.get("swapped"):
        return None
    return name.group(2), name.group(1), arm


def pooled_unchanged(changes: Sequence[Change], threshold: float) -> tuple[bool, float]:
    """Whether the pooled rule calls two pairs' changes ``unchanged``, and their pooled change."""
    weights = [1 / c.se**2 for c in changes]
    shares = [w / math.fsum(weights) for w in weights]
    mean = math.fsum(s * c.log for s, c in zip(shares, changes, strict=True))
    parts = [(s * c.se) ** 2 for s, c in zip(shares, changes, strict=True)]
    df = math.fsum(parts) ** 2 / math.fsum(p**2 / c.df for p, c in zip(parts, changes, strict=True))
    se = 1 / math.sqrt(math.fsum(weights))
    shrink = math.sqrt(math.fsum(s * s for s in shares))
    high = math.expm1(mean + stats.t_ppf(1 - (1 - stats.CONFIDENCE) / 2, df) * se)
    first, again = changes
    agree = abs(first.log - again.log) < 1.96 * math.hypot(first.se, again.se)
    room = high < threshold * (1 - ONE_PAIR_OFFSET * shrink)
    small = math.expm1(mean) < threshold * (1 - (1 - ONE_PAIR_HIDES) * shrink)
    seen = math.expm1(stats._detectable(df) * se) <= threshold
    return agree and room and small and seen, math.expm1(mean)


def pooled(records: Sequence[Mapping[str, Any]], threshold: float) -> None:
    by_row: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for record in sorted(records, key=lambda r: float(r.get("time") or 0)):
        stage = str(record.get("stage"))
        if _cell(record) is None or stage not in ("first", "rounds"):
            continue
        by_row[(str(record["session"]), str(record["nodeid"]))].setdefault(stage, record)
    tally: Counter[tuple[Cell, str, bool]] = Counter()
    for (session, _), found in sorted(by_row.items()):
        if "first" not in found or "rounds" not in found or found["rounds"]["factor"] <= 1:
            continue
        cell = _cell(found["first"])
        first = stats.paired_change(found["first"]["differences"])
        again = stats.paired_change(found["rounds"]["differences"])
        if cell is None or first is None or again is None:
            continue
        alone = rows.one_pair(row_of(found["rounds"], threshold), threshold).verdict
        calls, change = pooled_unchanged([first, again], threshold)
        tally[(cell, alone, calls)] += 1
        print(
            f"{session:10} {cell[0]:7} {cell[1]:8} +{cell[2]:.0%}: first {first.estimate:+.1%}, "
            f"more rounds {again.estimate:+.1%} ({alone}), pooled {change:+.1%}"
            f"{' unchanged' if calls else ''}"
        )
    print("\n| workload | style | work | new pair alone | pooled unchanged | rows |")
    print("|---|---|---|---|---|---|")
    for (cell, alone, calls), count in sorted(tally.items()):
        print(f"| {cell[0]} | {cell[1]} | +{cell[2]:.0%} | {alone} | {calls} | {count} |")


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
    replay = pooled if options.rule == "pooled" else own
    replay(load(options.pairs), options.threshold / 100)


if __name__ == "__main__":
    main()
