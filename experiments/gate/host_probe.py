"""Which cheap measurement follows the gate experiment's Keras steps from process to process?

Runs ``--processes`` fresh Python processes one after another. Each builds the experiment's
workloads (``workloads.py``) and a few candidate probes, warms them, then times every one of
them in 8 interleaved blocks (the mean of the fastest half of each block's calls). The parent
prints, per probe, its correlation with the Keras CNN's and transformer's steps across processes
(each process's median block) and within processes (blocks against their process's median),
and each probe's spread. Candidates: the gate's TensorFlow calibration kernel (128x128, 4
products), the experiment's matmul chain, a copy of 64 MiB and of 16 MiB (numpy), an
element-wise TensorFlow op over 16 MiB, and a 512x512 TensorFlow matmul.

    .venv/bin/python experiments/gate/host_probe.py --processes 30 --out probe.jsonl
    .venv/bin/python experiments/gate/host_probe.py --table probe.jsonl

Nothing else of ours may run meanwhile: a second process copying memory doubles the copies'
times (seen while writing ``pytest_tpu/gate/bandwidth.py``).
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

HERE = Path(__file__).resolve().parent
BLOCKS = 8


def _fastest_half_mean(call: Callable[[], object], count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.fmean(times[: max(1, count // 2)])


def _probes() -> dict[str, tuple[Callable[[], object], int]]:
    sys.path.insert(0, str(HERE))
    import numpy as np
    import tensorflow as tf
    import workloads  # the experiment's own benchmarks

    cnn, transformer, chain = (
        workloads.cnn_step(),
        workloads.transformer_step(),
        workloads.matmul_step(),
    )
    x0 = tf.random.stateless_normal((128, 128), seed=(1, 2))
    w = tf.random.stateless_normal((128, 128), seed=(3, 4)) / 128**0.5

    @tf.function
    def kernel() -> object:
        x = x0
        for _ in range(4):
            x = tf.tanh(tf.matmul(x, w))
        return tf.reduce_sum(x)

    big, big_to = np.ones(16 * 2**20, np.float32), np.empty(16 * 2**20, np.float32)
    small, small_to = np.ones(4 * 2**20, np.float32), np.empty(4 * 2**20, np.float32)
    a = tf.random.stateless_normal((4 * 2**20,), seed=(5, 6))
    b = tf.random.stateless_normal((4 * 2**20,), seed=(7, 8))
    m = tf.random.stateless_normal((512, 512), seed=(9, 9))

    @tf.function
    def elementwise() -> object:
        return tf.reduce_sum(a * b + a)

    @tf.function
    def matmul512() -> object:
        return tf.reduce_sum(tf.matmul(m, m))

    return {
        "cnn": (lambda: cnn(1), 20),
        "transformer": (lambda: transformer(1), 20),
        "matmul chain": (lambda: chain(1), 40),
        "tf kernel": (lambda: kernel().numpy(), 100),
        "copy 64 MiB": (lambda: np.copyto(big_to, big), 8),
        "copy 16 MiB": (lambda: np.copyto(small_to, small), 30),
        "tf elementwise": (lambda: elementwise().numpy(), 30),
        "tf matmul 512": (lambda: matmul512().numpy(), 30),
    }


def child() -> None:
    probes = _probes()
    for call, _ in probes.values():
        for _ in range(5):
            call()
    blocks: dict[str, list[float]] = {name: [] for name in probes}
    for _ in range(BLOCKS):
        for name, (call, count) in probes.items():
            blocks[name].append(_fastest_half_mean(call, count))
    print(json.dumps({"t": time.time(), "blocks": blocks}), flush=True)


def _corr(x: list[float], y: list[float]) -> float:
    return statistics.correlation(x, y) if len(x) > 2 else float("nan")


def table(path: Path) -> str:
    import math

    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    names = list(records[0]["blocks"])
    level = {n: [math.log(statistics.median(r["blocks"][n])) for r in records] for n in names}
    within = {
        n: [
            math.log(x) - math.log(statistics.median(r["blocks"][n]))
            for r in records
            for x in r["blocks"][n]
        ]
        for n in names
    }
    lines = [
        f"{len(records)} processes",
        "| probe | across processes: with cnn | with transformer | within: with cnn | "
        "with transformer | spread across processes |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        lines.append(
            f"| {n} | {_corr(level['cnn'], level[n]):+.2f} | "
            f"{_corr(level['transformer'], level[n]):+.2f} | "
            f"{_corr(within['cnn'], within[n]):+.2f} | "
            f"{_corr(within['transformer'], within[n]):+.2f} | "
            f"{100 * statistics.stdev(level[n]):.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=30)
    parser.add_argument("--out", type=Path, help="one JSON line per process")
    parser.add_argument("--table", type=Path, help="only print the table of a finished run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    if args.table:
        print(table(args.table))
        return
    if args.out is None:
        parser.error("--out is required to run (or --table FILE to print one)")
    with args.out.open("a", encoding="utf-8") as out:
        for _ in range(args.processes):
            done = subprocess.run(
                [sys.executable, __file__, "--child"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                sys.exit(f"a probe process failed:\n{done.stderr[-2000:]}")
            out.write(done.stdout)
            out.flush()
    print(table(args.out))


if __name__ == "__main__":
    main()
