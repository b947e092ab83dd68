"""What the experiments' "+5 %" and "+10 %" arms change in time, measured alone.

The gate experiments (``gate/run.py``, ``compare_ref/run.py``) make a copy of a benchmark do 5 % or
10 % more work: 21 or 22 units where the base does 20. Time need not follow work: a unit's cost can
depend on how many ran before it in the same call. So this alternates the three versions in one
process, round by round (20, 21, 22 units, then 22, 21, 20), and gives the median ratio of each
cycle's rounds to its 20-unit round, pinned as ``--compare-ref`` pins (``sameref.pinning``) and
not. Those are the changes a gate should report for each arm; a gate at a 5 % threshold that does
not fail an arm measured below 5 % here is right.

    python experiments/arms_truth.py --cycles 80 cnn numpy matmul transformer
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "gate"))

import workloads

from pytest_tpu.sameref.pinning import Pin, shared_core

UNITS = (20, 21, 22)  # the base, +5 % and +10 % (workloads.STEPS units and one or two more)
SHORT_S = 0.001  # rounds shorter than this repeat their call, so that a round is not all timer


def _timer(step: Callable[[int], object], units: int) -> Callable[[], float]:
    start = time.perf_counter()
    step(units)
    inner = max(1, round(SHORT_S / max(time.perf_counter() - start, 1e-9)))

    def timed() -> float:
        begin = time.perf_counter()
        for _ in range(inner):
            step(units)
        return (time.perf_counter() - begin) / inner

    return timed


def measure(kind: str, cycles: int, pinned: bool) -> dict[str, str]:
    """The median change of the +5 % and +10 % versions of ``kind`` against the base."""
    make, _ = workloads.WORK[kind]
    step = make()
    timers = {units: _timer(step, units) for units in UNITS}
    for timed in timers.values():  # warm, both ways
        timed()
    pin = Pin(shared_core() if pinned else None)
    ratios: dict[int, list[float]] = {units: [] for units in UNITS[1:]}
    try:
        for cycle in range(cycles):
            got = {}
            for units in UNITS if cycle % 2 == 0 else UNITS[::-1]:
                pin.before_round()
                got[units] = timers[units]()
            for units in UNITS[1:]:
                ratios[units].append(got[units] / got[UNITS[0]])
    finally:
        pin.release()
    return {f"+{units * 5 - 100}%": _median_interval(r) for units, r in ratios.items()}


def _median_interval(ratios: list[float]) -> str:
    """The median change in % with its 95 % interval from order statistics (a sign test)."""
    data = sorted(ratios)
    n = len(data)
    half = 0.98 * n**0.5  # 1.96 / 2 standard deviations of a binomial(n, 1/2) count
    low, high = data[max(0, int(n / 2 - half))], data[min(n - 1, int(n / 2 + half))]
    middle, low, high = (100 * (x - 1) for x in (statistics.median(data), low, high))
    return f"{middle:+.1f}% [{low:+.1f}, {high:+.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", default=["matmul", "cnn", "numpy"])
    parser.add_argument("--cycles", type=int, default=60)
    options = parser.parse_args()
    for kind in options.kinds:
        for pinned in (True, False):
            found = measure(kind, options.cycles, pinned)
            print(json.dumps({"kind": kind, "pinned": pinned, **found}), flush=True)


if __name__ == "__main__":
    main()
