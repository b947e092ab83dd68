"""Two cost leads checked on logged runs, before building either: unpaired rounds, hopeless rows.

1. **Unpaired rounds.** Under ``benchmark(fn)`` each side calibrates its own number of rounds, and
   the side with more runs its extra rounds alone, outside the verdict. This prints, per workload
   and style, the share of all logged rounds that no round of the other side paired: what making
   both sides run the same rounds would save.
2. **Hopeless rows.** The rows a first pair leaves ``inconclusive`` are measured again with up to
   ``--tpu-compare-ref-rounds`` (4) times the rounds. A row whose first pair could detect only
   ``--cut`` or more could not resolve the threshold even so; skipping it would save its
   re-measurements. This prints what skipping would have saved (the re-measured rounds' time) and
   what it would have cost: the rows doing more work that the gate caught, and whose first pair
   was past the cut.

Each ``NAME_pairs.jsonl`` (``run.py --pairs``) is read with its ``NAME.json`` (``run.py --out``):

    python experiments/compare_ref/futility.py r105_pairs.jsonl r105n_pairs.jsonl --cut 20
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, arm_of, load  # noqa: E402

Key = tuple[str, str, str]  # (condition, workload, style)


def _seconds(record: dict[str, object]) -> float:
    return sum(float(x) for side in ("head", "base") for _, x in record[side])  # type: ignore[attr-defined]


def _index(session: str) -> int | None:
    tail = session.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def unpaired(records: list[dict[str, object]], condition: str, out: Counter[Key]) -> None:
    """Adds each record's rounds (index 0) and rounds no other-side round paired (index 1)."""
    for record in records:
        found = NAME_RE.search(str(record["nodeid"]))
        if not found:
            continue
        head = {turn // 2 for turn, _ in record["head"]}  # type: ignore[attr-defined]
        base = {turn // 2 for turn, _ in record["base"]}  # type: ignore[attr-defined]
        key = (condition, found.group(2), found.group(1))
        out[(*key, "all")] += len(head) + len(base)  # type: ignore[index]
        out[(*key, "alone")] += len(head ^ base)  # type: ignore[index]


def hopeless(
    records: list[dict[str, object]],
    verdicts: list[dict[str, object]],
    condition: str,
    cut: float,
    out: Counter[tuple[object, ...]],
) -> None:
    """Counts first pairs past ``cut`` by arm and final outcome, and the seconds of rounds spent
    re-measuring rows past it and not."""
    failed = {
        (v["session"], v["workload"], v["style"], v["arm"]): bool(v["failed"]) for v in verdicts
    }
    later: Counter[tuple[str, str]] = Counter()
    for record in records:
        if record["stage"] != "first":
            later[(str(record["session"]), str(record["nodeid"]))] += _seconds(record)
    for record in records:
        found = NAME_RE.search(str(record["nodeid"]))
        if record["stage"] != "first" or not found:
            continue
        detectable = record.get("detectable")
        past = isinstance(detectable, float) and detectable * 100 > cut
        spent = later[(str(record["session"]), str(record["nodeid"]))]
        out[(condition, "seconds re-measured", "past the cut" if past else "within it")] += spent
        arm, index = arm_of(record, found.group(3)), _index(str(record["session"]))
        if not past or not arm or index is None:
            continue
        caught = failed.get((index, found.group(2), found.group(1), arm), False)
        out[(condition, found.group(2), found.group(1), f"+{arm:.0%}", caught)] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", type=Path, help="run.py --pairs files")
    parser.add_argument("--cut", type=float, default=20.0, help="detectable change, percent")
    args = parser.parse_args()
    rounds: Counter[Key] = Counter()
    skipped: Counter[tuple[object, ...]] = Counter()
    for path in args.pairs:
        run = path.with_name(path.name.replace("_pairs.jsonl", ".json"))
        verdicts = json.loads(run.read_text(encoding="utf-8"))
        condition = str(verdicts[0]["condition"]) if verdicts else "?"
        records = load([path])
        unpaired(records, condition, rounds)
        hopeless(records, verdicts, condition, args.cut, skipped)
    print("rounds no round of the other side paired (all stages):")
    for key in sorted({k[:3] for k in rounds}):
        total, alone = rounds[(*key, "all")], rounds[(*key, "alone")]  # type: ignore[index]
        print(f"  {' '.join(key):28} {alone:7d} of {total:8d}  {alone / max(total, 1):6.1%}")
    print(f"first pairs detecting more than {args.cut:g} %, rows doing more work (caught or not):")
    for key, count in sorted(skipped.items(), key=str):
        print(f"  {' '.join(str(part) for part in key):60} {count:8.0f}")


if __name__ == "__main__":
    main()
