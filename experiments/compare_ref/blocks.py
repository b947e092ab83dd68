"""Judge logged paired rounds again, offline, under other rules for a same-job row's uncertainty.

``run.py --pairs FILE`` logs every compared row's paired rounds (``pairlog.py``). This reads
them and, per workload, style and arm, compares rules for the standard error of the paired change:
the shipped one (batch means over at most ``MAX_BLOCKS`` contiguous blocks) and others with more
blocks. Two things are measured for each rule:

- **calibration**, which no offset between processes can spoil: each row's pairs are cut into a
  first and a second half, each half is judged by the rule, and the difference of the two halves
  is divided by its stated error. Where the rule's error is honest, that exceeds the two-sided
  95 % t quantile 5 % of the time; more often means the rule is too sure of its rounds.
- **what it would decide**, on the first pair of each session: how often same code would be sent
  to confirmation as a regression (99 % sure slower and at least half the threshold), how often a
  slowdown would be, and the median smallest detectable change.

    python experiments/compare_ref/blocks.py pairs.jsonl --threshold 5
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from pytest_tpu.gate import stats  # noqa: E402

ARMS = (0.0, 0.05, 0.10)
COPIES = ("a", "b", "c")
NAME_RE = re.compile(r"::test_(\w+)\[(\w+)-([abc])\]$")
SESSION_RE = re.compile(r"-(\d+)$")

Rule = Callable[[Sequence[float]], int]  # the number of blocks for this many paired rounds


def shipped(differences: Sequence[float]) -> int:
    return min(stats.MAX_BLOCKS, len(differences))


def root_n(differences: Sequence[float]) -> int:
    """Batch means with blocks of about sqrt(n) pairs: as many blocks as pairs per block."""
    n = len(differences)
    return min(n, max(stats.MAX_BLOCKS, math.isqrt(n)))


def halves(differences: Sequence[float]) -> int:
    """Blocks of two pairs."""
    return max(min(len(differences), stats.MIN_BLOCKS), len(differences) // 2)


def every_pair(differences: Sequence[float]) -> int:
    """Every pair its own block: the pairs taken as independent."""
    return len(differences)


RULES: dict[str, Rule] = {
    "shipped (at most 8 blocks)": shipped,
    "sqrt(n) blocks, at least 8": root_n,
    "blocks of 2 pairs": halves,
    "every pair a block": every_pair,
}


def judged(differences: Sequence[float], rule: Rule) -> stats.Change | None:
    """``stats.paired_change`` with the rule's number of blocks."""
    count = rule(differences)
    if count < stats.MIN_BLOCKS:
        return None
    delta = stats._trimmed(differences)
    blocks = [stats._trimmed(block) for block in stats._blocks(differences, count)]
    noise = stats.Noise(0.0, count - 1, "offline", True)
    return stats._from(delta, stats.sample_sd(blocks) / math.sqrt(count), count - 1, noise)


def split_z(differences: Sequence[float], rule: Rule) -> tuple[float, float] | None:
    """The two halves' difference over its stated error, and the t quantile it is held to."""
    middle = len(differences) // 2
    first, second = judged(differences[:middle], rule), judged(differences[middle:], rule)
    if first is None or second is None or first.se == 0 or second.se == 0:
        return None
    z = (first.log - second.log) / math.hypot(first.se, second.se)
    df = min(first.df, second.df)
    return z, stats.t_ppf(0.975, df)


def arm_of(record: dict[str, object], copy: str) -> float | None:
    session = str(record.get("session") or "")
    if session.endswith("-aa"):
        return 0.0
    found = SESSION_RE.search(session)
    if not found:
        return None
    rotation = int(found.group(1)) % 3
    return ARMS[(rotation + COPIES.index(copy)) % 3]


def lag1(values: Sequence[float]) -> float:
    """The lag-1 autocorrelation of ``values`` (0 for fewer than three)."""
    if len(values) < 3:
        return 0.0
    mean = math.fsum(values) / len(values)
    centred = [v - mean for v in values]
    denominator = math.fsum(c * c for c in centred)
    if denominator == 0:
        return 0.0
    return math.fsum(a * b for a, b in itertools.pairwise(centred)) / denominator


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else math.nan


def load(paths: Sequence[Path]) -> list[dict[str, object]]:
    records = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def calibration_table(records: Sequence[dict[str, object]]) -> str:
    """Per workload and style, every stage: how often the halves disagree beyond 95 %."""
    groups: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    for record in records:
        found = NAME_RE.search(str(record["nodeid"]))
        if found:
            groups[(found.group(2), found.group(1))].append(list(record["differences"]))  # type: ignore[call-overload]
    lines = [
        "| workload | style | rows | median pairs | median lag-1 autocorrelation | "
        + " | ".join(f"halves apart beyond 95 %: {name}" for name in RULES)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(RULES),
    ]
    for (workload, style), rows in sorted(groups.items()):
        cells = []
        for rule in RULES.values():
            found = [z for row in rows if (z := split_z(row, rule))]
            beyond = sum(abs(z) > t for z, t in found)
            cells.append(f"{beyond}/{len(found)} ({beyond / max(1, len(found)):.0%})")
        lines.append(
            f"| {workload} | {style} | {len(rows)} | {median([len(r) for r in rows]):.0f} "
            f"| {median([lag1(r) for r in rows]):+.2f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def decision_table(records: Sequence[dict[str, object]], threshold: float) -> str:
    """First pairs only: what each rule would have sent to confirmation, per arm."""
    groups: dict[tuple[str, str, float], list[list[float]]] = defaultdict(list)
    for record in records:
        found = NAME_RE.search(str(record["nodeid"]))
        if not found or record.get("stage") != "first":
            continue
        arm = arm_of(record, found.group(3))
        if arm is not None:
            key = (found.group(2), found.group(1), arm)
            groups[key].append(list(record["differences"]))  # type: ignore[call-overload]
    lines = [
        "| workload | style | work | rows | "
        + " | ".join(f"{name}: regression / median detectable" for name in RULES)
        + " |",
        "|---|---|---|---|" + "---|" * len(RULES),
    ]
    for (workload, style, arm), rows in sorted(groups.items()):
        cells = []
        for rule in RULES.values():
            changes = [c for row in rows if (c := judged(row, rule))]
            failing = sum(
                c.p_slower >= stats.FAIL_CONFIDENCE
                and c.estimate >= threshold / 2
                and c.high >= threshold
                for c in changes
            )
            detectable = median([c.detectable for c in changes])
            cells.append(f"{failing}/{len(changes)} / {detectable:+.1%}")
        lines.append(
            f"| {workload} | {style} | +{arm:.0%} | {len(rows)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="+", help="files written by run.py --pairs")
    parser.add_argument("--threshold", type=float, default=5.0, help="in percent")
    options = parser.parse_args()
    records = load(options.pairs)
    print(f"{len(records)} rows from {len({r.get('session') for r in records})} sessions\n")
    print(calibration_table(records))
    print()
    print(decision_table(records, options.threshold / 100))


if __name__ == "__main__":
    main()
