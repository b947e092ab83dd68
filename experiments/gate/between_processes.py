"""How far apart fresh processes of the same code measure, one after another: stored baselines'
noise between sessions, with every thread left to the scheduler and pinned as ``--compare-ref``
pins them (``sameref.pinning``).

Each process builds the gate experiment's workloads (``workloads.py``), runs 32 rounds of 20
units of each and prints the median of rounds 3-32; processes alternate unpinned and pinned.
The summary gives, per workload and placement, the spread (SD of the log) of those medians.

    python experiments/gate/between_processes.py --processes 16 matmul cnn transformer
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROUNDS = 32
SETTLING = 2  # rounds left out of the median: the first calls after building


def one_process(kinds: list[str], pinned: bool) -> dict[str, float]:
    """Medians of one process's rounds, in seconds, by workload."""
    sys.path.insert(0, str(HERE))
    import workloads

    from pytest_tpu.sameref.pinning import Pin, shared_core

    found = {}
    for kind in kinds:
        step = workloads.WORK[kind][0]()
        pin = Pin(shared_core() if pinned else None)
        times = []
        for _ in range(ROUNDS):
            pin.before_round()
            start = time.perf_counter()
            step(workloads.STEPS)
            times.append(time.perf_counter() - start)
        pin.release()
        found[kind] = statistics.median(times[SETTLING:])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", default=["matmul", "cnn", "transformer"])
    parser.add_argument("--processes", type=int, default=16, help="per placement")
    parser.add_argument("--child", choices=("pinned", "unpinned"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(one_process(options.kinds, options.child == "pinned")))
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    medians: dict[tuple[str, str], list[float]] = {}
    for index in range(2 * options.processes):
        placement = ("unpinned", "pinned")[index % 2]
        args = [sys.executable, __file__, *options.kinds, "--child", placement]
        done = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
        for kind, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
            medians.setdefault((kind, placement), []).append(seconds)
    for (kind, placement), values in sorted(medians.items()):
        logs = [math.log(v) for v in values]
        print(
            f"{kind:12s} {placement:9s} median {statistics.median(values) * 1e3:7.2f} ms, "
            f"spread between processes {statistics.stdev(logs):.1%} "
            f"({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f} ms, {len(values)} processes)"
        )


if __name__ == "__main__":
    main()
