"""What one pair of processes reads, from logged pairs: its offset, and what it calls ``unchanged``.

Every first pair of a same-job session (the head leads), and every pair measuring a row again with
more rounds, is one draw of what a single pair of processes reads for a workload, style and arm.
For unchanged rows this prints the mean change of the first pairs (the head leads in all of them:
a bias that comes with the roles shows as a mean away from zero) and their spread (standard
deviation: the rounds' noise and the offset between two processes together). For every arm it
counts the rows the shipped code (``rows.compare_one``, run on the logged rounds) calls
``unchanged`` from one pair: on a +5 % arm each of them is a wrong verdict. Run it from a
worktree of an older commit to count under that commit's rules.

    python experiments/compare_ref/first_pairs.py r50_pairs.jsonl r51_pairs.jsonl
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, arm_of, load  # noqa: E402
from pairs_replay import row_of  # noqa: E402

Cell = tuple[str, str, float]  # workload, style, arm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", type=Path, help="run.py --pairs files")
    args = parser.parse_args()
    changes: dict[Cell, list[float]] = defaultdict(list)
    rows: dict[Cell, int] = defaultdict(int)
    unchanged: dict[Cell, int] = defaultdict(int)
    for record in load(args.pairs):
        name = NAME_RE.search(str(record.get("nodeid")))
        if not name or record.get("stage") not in ("first", "rounds") or record.get("swapped"):
            continue
        arm = arm_of(dict(record), name.group(3))
        if arm is None:
            continue
        cell = (name.group(2), name.group(1), arm)
        row = row_of(record, float(str(record.get("threshold") or 0.05)))
        rows[cell] += 1
        unchanged[cell] += row.verdict == "unchanged"
        differences = record.get("differences")
        if record["stage"] == "first" and isinstance(differences, list) and differences:
            changes[cell].append(100 * math.expm1(statistics.median(differences)))
    print("| workload | style | work | rows | one pair `unchanged` | first pairs | mean | SD |")
    print("|---|---|---|---|---|---|---|---|")
    for cell in sorted(rows):
        found = changes[cell]
        spread = f"{statistics.stdev(found):.2f} %" if len(found) > 1 else "-"
        mean = f"{statistics.fmean(found):+.2f} %" if found else "-"
        workload, style, arm = cell
        print(
            f"| {workload} | {style} | +{arm:.0%} | {rows[cell]} | {unchanged[cell]} | "
            f"{len(found)} | {mean} | {spread} |"
        )


if __name__ == "__main__":
    main()
