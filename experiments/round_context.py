"""Does the way rounds are taken change a measured change? The experiments' arms, three ways.

Same-job comparisons (``--compare-ref``) read the Keras CNN's "+5 %" and "+10 %" arms lower
(+3.5 to +4.4 % and +7.7 to +10.8 %) than ``arms_truth.py`` does (+5.0 % and +11.2 %, the arms
alternated in one process). Either is a way of taking rounds; this measures the same arms three
ways on the same machine, one after another, to tell which one differs:

- ``together``: the three arms alternated round by round in one process (``arms_truth.py``);
- ``idle``: the same, with each round after an idle gap as long as a round, the way a same-job
  side waits while the other side runs its round;
- ``other``: the same, with each round after a round of a second copy of the work (its own model
  and data), as the other side's round leaves the caches in a same-job comparison;
- ``processes``: each arm in processes of its own, back to back (a plain pytest-benchmark run's
  way), processes of the three arms alternated; the change is the ratio of the processes' medians.

Each change is the median of the cycles' ratios (of the processes' medians for ``processes``)
with a 95 % interval from order statistics. The same-job readings come from the experiment's
pairs log (``compare_ref/run.py --pairs``).

    python experiments/round_context.py --cycles 60 --processes 8 cnn
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "gate"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # arms_truth, when imported

import workloads
from arms_truth import _median_interval

UNITS = (20, 21, 22)  # the base, +5 % and +10 % (workloads.STEPS units and one or two more)


def _rounds(step: Callable[[int], object], units: int, count: int) -> list[float]:
    times = []
    for _ in range(count):
        begin = time.perf_counter()
        step(units)
        times.append(time.perf_counter() - begin)
    return times


def _fresh(kind: str) -> Callable[[int], object]:
    """A second copy of the work: the workloads' makers are cached, their wrapped ones are not."""
    make = workloads.WORK[kind][0]
    return getattr(make, "__wrapped__", make)()


def in_one_process(kind: str, cycles: int, before: str) -> dict[str, str]:
    """The arms alternated round by round; ``before`` each round: nothing, ``idle`` (as long as
    a round) or ``other`` (a round of a second copy of the work)."""
    step = workloads.WORK[kind][0]()
    other = _fresh(kind) if before == "other" else step
    for units in UNITS:  # warm, every arm
        _rounds(step, units, 3)
        _rounds(other, units, 1)
    typical = statistics.median(_rounds(step, UNITS[0], 5))
    ratios: dict[int, list[float]] = {units: [] for units in UNITS[1:]}
    for cycle in range(cycles):
        got = {}
        for units in UNITS if cycle % 2 == 0 else UNITS[::-1]:
            if before == "idle":
                time.sleep(typical)
            elif before == "other":
                other(UNITS[0])
            got[units] = _rounds(step, units, 1)[0]
        for units in UNITS[1:]:
            ratios[units].append(got[units] / got[UNITS[0]])
    return {f"+{units * 5 - 100}%": _median_interval(r) for units, r in ratios.items()}


def child(kind: str, units: int, rounds: int) -> None:
    """One process's rounds of one arm, after a warm-up, as JSON on stdout."""
    step = workloads.WORK[kind][0]()
    _rounds(step, units, 3)
    print(json.dumps(_rounds(step, units, rounds)))


def in_processes(kind: str, processes: int, rounds: int) -> dict[str, str]:
    """Each arm in ``processes`` processes of its own; the medians' ratios, cycle by cycle."""
    ratios: dict[int, list[float]] = {units: [] for units in UNITS[1:]}
    for cycle in range(processes):
        got = {}
        for units in UNITS if cycle % 2 == 0 else UNITS[::-1]:
            command = [sys.executable, __file__, "--child", kind, str(units), str(rounds)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            got[units] = statistics.median(json.loads(out.strip().splitlines()[-1]))
        for units in UNITS[1:]:
            ratios[units].append(got[units] / got[UNITS[0]])
    return {f"+{units * 5 - 100}%": _median_interval(r) for units, r in ratios.items()}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", default=["cnn"])
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--processes", type=int, default=8, help="processes per arm")
    parser.add_argument("--rounds", type=int, default=40, help="rounds per process")
    parser.add_argument(
        "--ways", default="together,idle,other,processes", help="comma list of the ways to run"
    )
    options = parser.parse_args()
    for kind in options.kinds:
        for way in options.ways.split(","):
            started = time.monotonic()
            if way == "processes":
                found = in_processes(kind, options.processes, options.rounds)
            else:
                found = in_one_process(kind, options.cycles, "" if way == "together" else way)
            took = round(time.monotonic() - started)
            print(json.dumps({"kind": kind, "way": way, **found, "seconds": took}), flush=True)


if __name__ == "__main__":
    main()
