"""How often the spread between pairs of processes covers the change, on logged pairs.

A same-job row that new pairs measure is judged on the spread between its pairs
(``stats.weighted_pairs``: each new pair weighted by its rounds' error plus the offsets' variance
the pairs show, Hartung-Knapp on Student's t). With three pairs that variance is estimated from
two degrees of freedom: where one new pair's rounds are fine and the other's coarse, the fine one
sets the estimate, and an offset of its two processes goes into it whole. Session 87's run r117
had one such row: a Keras CNN made 5 % slower called ``unchanged`` at +0.5 % [-3.5, +4.6] by
three pairs reading +2.7 % [+0.4, +5.1], +3.5 % [-4.1, +11.6] and +0.2 % [-2.1, +2.5].

This asks how often that happens, on real pairs rather than a model. ``run.py --pairs FILE`` logs
every pair's rounds; every pair measured with a first pair's rounds is an independent draw of
what a pair of processes reads in its cell (workload, style, extra work). Same code's change is
zero; a change made by more work is taken as the mean log change of all its cell's pairs (dozens,
from several runs: their offsets average out, and an hour in which the extra work reads smaller
makes this an underestimate of the coverage, not an overestimate). For 3, 5 and 9 pairs, drawn
at random many times (a session's first pair first, then new pairs with the roles in turn), it
counts:

- **coverage**: the 95 % interval holds the cell's change;
- **unchanged**: the rule of ``judge.on_spread`` would call the row ``unchanged`` (the interval
  within the threshold, the change under half of it) -- wrong for a cell with extra work;
- **fails**: a regression by the rule of ``pairs.fails`` (sure of a slowdown whose interval
  reaches the threshold, on five pairs or more), as the last of as many pairs would judge it.

    python experiments/compare_ref/spread_coverage.py r117_pairs.jsonl r118_pairs.jsonl ...
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import load  # noqa: E402
from pairs_replay import Cell, arguments, cells, reported, row_of  # noqa: E402

from pytest_tpu.gate.compare import Row  # noqa: E402
from pytest_tpu.sameref import judge, pairs  # noqa: E402
from pytest_tpu.sameref.swap import SWAPPED_KEY  # noqa: E402

COUNTS = (3, 5, 9)


def drawn(
    firsts: Sequence[Row],
    led: Sequence[Row],
    followed: Sequence[Row],
    count: int,
    rng: random.Random,
) -> tuple[Row, list[dict[str, Any]]]:
    """A first pair and ``count - 1`` new ones, the roles in turn (the first new pair swapped)."""
    first = rng.choice(firsts)
    later = []
    for i in range(count - 1):
        pool = followed if i % 2 == 0 else led
        report = reported(rng.choice(pool))
        report[SWAPPED_KEY] = i % 2 == 0
        later.append(report)
    return first, later


def tally(
    found: Mapping[Cell, list[dict[str, Any]]], threshold: float, draws: int, seed: int
) -> str:
    """Per cell and count of pairs: coverage, ``unchanged`` and ``fails`` shares."""
    rng = random.Random(seed)
    head = " | ".join(f"{n} pairs: covered / unchanged / fails" for n in COUNTS)
    lines = [f"| workload | style | work | pairs logged | change | {head} |", "|---" * 8 + "|"]
    for (workload, style, arm), records in sorted(found.items()):
        made = [(r, row_of(r, threshold)) for r in records]
        usable = [(r, row) for r, row in made if pairs.of_row(row) is not None]
        if len(usable) < 6:
            continue
        # Same code's change is zero, whatever the pairs' mean; more work's is not known exactly.
        logs = [math.log1p(row.change or 0.0) for _, row in usable]
        truth = math.expm1(math.fsum(logs) / len(logs)) if arm else 0.0
        firsts = [row for r, row in usable if r["stage"] == "first"] or [row for _, row in usable]
        led = [row for r, row in usable if not r.get("swapped")]
        followed = [row for r, row in usable if r.get("swapped")] or led
        cells_text = []
        for count in COUNTS:
            covered = unchanged = fails = 0
            for _ in range(draws):
                first, later = drawn(firsts, led, followed, count, rng)
                spread = pairs.across(first, later)
                if spread is None:
                    continue
                covered += spread.low <= truth <= spread.high
                unchanged += judge.on_spread(first, spread, "", threshold).verdict == "unchanged"
                fails += pairs.fails(spread, threshold, count)
            cells_text.append(
                f"{covered / draws:.1%} / {unchanged / draws:.1%} / {fails / draws:.1%}"
            )
        lines.append(
            f"| {workload} | {style} | +{arm:.0%} | {len(usable)} | {truth:+.1%} | "
            + " | ".join(cells_text)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    args = arguments(__doc__, 2000, "random draws per cell and count", 20261204)
    print(tally(cells(load(args.pairs)), args.threshold / 100, args.draws, args.seed))


if __name__ == "__main__":
    main()
