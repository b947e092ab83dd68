"""How fast does the machine's speed move, against the length of a round? (``docs/compare-ref.md``,
"Shorter rounds".)

1. One process times the experiment's Keras CNN step (``experiments/gate/workloads.py``) call by
   call: how much calls vary, how much neighbouring calls are alike (autocorrelation at 1 to 16
   calls apart), and how much the process's CPU time for a round of 20 calls varies: fixed work
   whose CPU time varies ran at a varying speed.
2. Two processes of the same step take turns ABBA in blocks of k calls, as a same-job pair's
   sides do with rounds of k steps, for the same number of calls each: the standard error of their
   mean log ratio by k (batch means over 8 blocks, and the naive one for rounds as independent).

    .venv/bin/python experiments/compare_ref/host_speed.py --calls 400
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

GATE = Path(__file__).resolve().parent.parent / "gate"
CHILD = f"""
import gc, sys, time
sys.path.insert(0, {str(GATE)!r})
import workloads
run = workloads.cnn_step()
run(20)
gc.freeze()
print("ready", flush=True)
for line in sys.stdin:
    started = time.perf_counter()
    run(int(line))
    print(time.perf_counter() - started, flush=True)
"""


def autocorrelation(values: list[float], lag: int) -> float:
    mean, variance = statistics.fmean(values), statistics.pvariance(values)
    pairs = zip(values, values[lag:], strict=False)
    return sum((a - mean) * (b - mean) for a, b in pairs) / (len(values) - lag) / variance


def spread_of_sums(values: list[float], size: int) -> float:
    """The standard deviation of the logs of consecutive sums of ``size`` values, in percent."""
    sums = [sum(values[i : i + size]) for i in range(0, len(values) - size + 1, size)]
    return 100 * statistics.stdev(math.log(value) for value in sums)


def one_process(calls: int) -> None:
    sys.path.insert(0, str(GATE))
    import workloads

    run = workloads.cnn_step()
    run(20)
    gc.freeze()
    wall, cpu = [], []
    for _ in range(calls):
        started, used = time.perf_counter(), time.process_time()
        run(1)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    lags = " ".join(f"{lag}: {autocorrelation(wall, lag):.2f}" for lag in (1, 2, 4, 8, 16))
    print(
        f"one process, {calls} calls of {1000 * statistics.median(wall):.1f} ms: calls vary "
        f"{spread_of_sums(wall, 1):.1f} %, rounds of 20 {spread_of_sums(wall, 20):.1f} % (CPU "
        f"time {spread_of_sums(cpu, 20):.1f} %); autocorrelation by calls apart {lags}"
    )


def start() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def block(process: subprocess.Popen[str], calls: int) -> float:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(f"{calls}\n")
    process.stdin.flush()
    return float(process.stdout.readline())


def two_processes(calls: int, blocks: list[int]) -> None:
    first, second = start(), start()
    try:
        for process in (first, second):
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
        for k in blocks:
            ratios = []
            for _ in range(calls // k // 2):  # ABBA: two pairs a cycle
                a, b = block(first, k), block(second, k)
                b2, a2 = block(second, k), block(first, k)
                ratios += [math.log(b / a), math.log(b2 / a2)]
            size = len(ratios) // 8
            means = [statistics.fmean(ratios[j * size : (j + 1) * size]) for j in range(8)]
            batch = 100 * statistics.stdev(means) / math.sqrt(8)
            naive = 100 * statistics.stdev(ratios) / math.sqrt(len(ratios))
            print(
                f"two processes in turns of {k:2d} call(s), {len(ratios)} pairs: mean log ratio "
                f"{100 * statistics.fmean(ratios):+.2f} %, standard error {batch:.2f} % "
                f"(batch means; {naive:.2f} % as if independent)",
                flush=True,
            )
    finally:
        first.kill()
        second.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per side and setting")
    parser.add_argument("--blocks", default="20,5,1", help="calls per turn, a comma list")
    args = parser.parse_args()
    one_process(2 * args.calls)
    two_processes(args.calls, [int(k) for k in args.blocks.split(",")])


if __name__ == "__main__":
    main()
