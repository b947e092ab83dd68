"""The best any rule on one session's reading could have done, in hindsight, on a gate experiment.

``run.py --keep DIR`` keeps each session's report. Each benchmark's reading in a session is its
median over pytest-benchmark's baseline's (the first saved run). A rule that fails a row where
that reading lies past some cut, whatever else it does, and fails no row of unchanged code, needs
its cut at or above the highest reading of unchanged code; the oracle puts it exactly there, knowing
every session's reading in advance, and counts the +5 % and +10 % rows above it. No rule that
judges a session by how far its raw reading lies from a fixed reference can catch more of them
without failing unchanged code (the reference only shifts every reading alike); a rule that also
reads a covariate (the gate's calibration kernel, the host's memory copies) is not bounded by it.
It measures what varies between sessions on the machine, not a rule::

    .venv/bin/python experiments/gate/oracle.py DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from run import ARMS, COPIES  # this folder: the arms and copies the sessions ran

Cell = tuple[str, str, str]  # condition, workload, style


def readings(keep: Path) -> dict[Cell, dict[float, list[float]]]:
    """Every row's log reading (its session's median over the baseline's), by cell and arm."""
    found: dict[Cell, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for folder in sorted(p for p in keep.iterdir() if p.is_dir()):
        base = next((folder / "pytest-benchmark").rglob("0001_*.json"), None)
        if base is None:
            continue
        saved = json.loads(base.read_text())["benchmarks"]
        medians = {b["name"]: b["stats"]["median"] for b in saved}
        for index, session in enumerate(sorted(folder.glob("session-*.json"))):
            # The copies' arms rotate by session, as run.py gives them.
            arms = {copy: ARMS[(index + j) % 3] for j, copy in enumerate(COPIES)}
            for row in json.loads(session.read_text()).get("round_times", []):
                name = str(row["name"]).split("::")[-1]  # test_fn[numpy-b]
                test, _, param = name.partition("[")
                workload, _, copy = param.rstrip("]").rpartition("-")
                if row.get("seconds") and name in medians and copy in arms:
                    cell = (folder.name, workload, test.removeprefix("test_"))
                    found[cell][arms[copy]].append(math.log(row["seconds"] / medians[name]))
    return found


def table(cells: dict[Cell, dict[float, list[float]]]) -> Iterator[str]:
    yield (
        "| condition | workload | style | unchanged: median / highest reading | "
        "oracle catches +5 % | +10 % | unchanged rows past +5 % |"
    )
    yield "|---|---|---|---|---|---|---|"
    for (condition, workload, style), arms in sorted(cells.items()):
        same, five, ten = (arms[arm] for arm in ARMS)
        if not same:
            continue
        cut = max(same)
        middle = sorted(same)[len(same) // 2]
        yield (
            f"| {condition} | {workload} | {style} | {math.expm1(middle):+.1%} / "
            f"{math.expm1(cut):+.1%} | {sum(x > cut for x in five)}/{len(five)} | "
            f"{sum(x > cut for x in ten)}/{len(ten)} | "
            f"{sum(x > math.log(1.05) for x in same)}/{len(same)} |"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keep", nargs="+", type=Path, help="run.py --keep folders")
    options = parser.parse_args(argv)
    cells: dict[Cell, dict[float, list[float]]] = {}
    for keep in options.keep:
        cells.update(readings(keep))
    print("\n".join(table(cells)))


if __name__ == "__main__":
    main()
