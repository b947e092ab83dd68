"""Replay logged same-job pairs with the new pairs' roles taken in turn, as the shipped code does.

Each session's first pair (``run.py --pairs FILE`` logs them, ``pairlog.py``) is judged by the
shipped confirmation rules (``pairs_replay.judged``, rule ``open``), its new pairs drawn at random
from the other pairs of the same cell: the first new pair and every second one after it from the
pairs that ran with the roles swapped, the others from those that did not. Each draw is judged
twice, on the same pairs: with the swapped pairs marked (``pairs.across`` then takes the roles'
offset out, ``stats.weighted_pairs``) and unmarked (the spread between the pairs alone).
Where a cell logged no swapped pair, all its new pairs come from the unswapped ones.

    python experiments/compare_ref/roles_replay.py r53_pairs.jsonl r54_pairs.jsonl
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pairs_replay as pr

from pytest_tpu.gate.compare import Row
from pytest_tpu.sameref.swap import SWAPPED_KEY

THRESHOLD = 0.05
SWAPPED_IDS: set[int] = set()  # the rows of pairs that ran with the roles swapped
MARK = [True]  # whether ``reported`` marks them (False: judged as if all ran alike)
_reported = pr.reported


def reported(row: Row) -> dict[str, Any]:
    out = _reported(row)
    if MARK[0] and id(row) in SWAPPED_IDS:
        out[SWAPPED_KEY] = True
    return out


pr.reported = reported


class Alternating:
    """New pairs as the shipped code makes them: swapped first, then every second one."""

    def __init__(self, normal: list[Row], swapped: list[Row]) -> None:
        self.normal, self.swapped, self.taken = normal, swapped, 0

    def __iter__(self) -> Alternating:
        return self

    def __next__(self) -> Row:
        turned = self.taken % 2 == 0 and bool(self.swapped)
        pool = self.swapped if turned else self.normal
        row = pool[(self.taken // 2) % len(pool)]
        self.taken += 1
        return row


def cells(files: list[str]) -> dict[tuple[str, str, float], list[dict[str, Any]]]:
    found: dict[tuple[str, str, float], list[dict[str, Any]]] = defaultdict(list)
    for name in files:
        for line in Path(name).read_text().splitlines():
            record = json.loads(line)
            match = pr.NAME_RE.search(str(record.get("nodeid")))
            if not match or record.get("stage") not in ("first", "confirm"):
                continue
            arm = pr.arm_of(dict(record), match.group(3))
            session = str(record.get("session", "")).split("-")[-1]
            if record.get("factor") == 1 and arm is not None and session.isdigit():
                found[(match.group(2), match.group(1), arm)].append(record)
    return found


def share(counts: Counter[str], key: str) -> str:
    return f"{counts[key] / max(1, counts['rows']):6.1%}"


def main(files: list[str], draws: int = 100) -> None:
    total: dict[tuple[str, float], Counter[str]] = defaultdict(Counter)
    for cell, records in sorted(cells(files).items()):
        made = [(r, pr.row_of(r, THRESHOLD)) for r in records]
        made = [(r, row) for r, row in made if row.change is not None]
        SWAPPED_IDS.update(id(row) for r, row in made if r.get("swapped"))
        firsts = [row for r, row in made if r["stage"] == "first" and not r.get("swapped")]
        swapped = [row for r, row in made if r.get("swapped")]
        generator = random.Random(0)
        counts = {"plain": Counter[str](), "role": Counter[str]()}
        for first in firsts:
            normal = [row for r, row in made if not r.get("swapped") and row is not first]
            for _ in range(draws):
                one = generator.sample(normal, len(normal))
                two = generator.sample(swapped, len(swapped))
                for rule, mark in (("role", True), ("plain", False)):
                    MARK[0] = mark
                    drawn = Alternating(one, two)
                    out = pr.judged(first, drawn, THRESHOLD, "open")
                    counts[rule][pr._outcome(out, cell[2])] += 1
                    counts[rule]["rows"] += 1
                    counts[rule]["new pairs"] += drawn.taken
        kind, style, arm = cell
        print(
            f"{kind:>12} {style:>9} +{arm:.0%}: {len(firsts)} first pairs, {len(swapped)} swapped"
        )
        for rule, found in counts.items():
            total[(rule, cell[2])].update(found)
    for (rule, arm), found in sorted(total.items()):
        pairs = found["new pairs"] / max(1, found["rows"])
        print(
            f"{rule:5} +{arm:.0%}: failed {share(found, 'failed')} wrong {share(found, 'wrong')} "
            f"unchanged {share(found, 'unchanged')} inconclusive {share(found, 'inconclusive')} "
            f"slower {share(found, 'slower')} new pairs per row {pairs:4.2f} ({found['rows']} rows)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
