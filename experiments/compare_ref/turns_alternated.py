"""How a same-job comparison's conditions move a multi-threaded Keras call's change (trial 36).

Two widths of a small Keras text model (Embedding, Conv1D of 64 or 120 filters, global max pool,
Dense), called alternately in one process, their medians compared. The arguments reproduce what
``--compare-ref`` does to a call: ``pin`` places every thread as its pinning does (the calling
thread on core 1, the others round-robin over cores 0 and 1), ``sleep`` idles 6 ms before each
block (the other side's turn), and the first argument is the calls per block (1: one call a
round, as a 5 ms ``benchmark(fn)`` call gets).

    .venv/bin/python experiments/compare_ref/turns_alternated.py 30        # back to back
    .venv/bin/python experiments/compare_ref/turns_alternated.py 1 pin sleep
"""

from __future__ import annotations

import os
import sys
import threading
import time

import keras
import numpy as np


def build(width: int) -> keras.Model:
    inputs = keras.Input((40,), dtype="int32")
    x = keras.layers.Embedding(2000, 32)(inputs)
    x = keras.layers.Conv1D(width, 5, activation="relu")(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def pin_threads() -> None:
    me = threading.get_native_id()
    others = 0
    for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
        if tid == me:
            os.sched_setaffinity(tid, {1})
        else:
            os.sched_setaffinity(tid, {others % 2})
            others += 1


def main(args: list[str]) -> None:
    x = np.random.default_rng(0).integers(0, 2000, (64, 40)).astype("int32")
    models = {width: build(width) for width in (64, 120)}
    for model in models.values():
        for _ in range(20):
            model(x, training=False)
    if "pin" in args:
        pin_threads()
    per_block = int(args[0])
    times: dict[int, list[float]] = {64: [], 120: []}
    for block in range(40):
        for width in (64, 120) if block % 2 else (120, 64):
            if "sleep" in args:
                time.sleep(0.006)
            start = time.perf_counter()
            for _ in range(per_block):
                models[width](x, training=False)
            times[width].append((time.perf_counter() - start) / per_block)
    narrow, wide = np.median(times[64]), np.median(times[120])
    print(args, f"{narrow * 1e3:.2f} ms {wide * 1e3:.2f} ms ratio {wide / narrow:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
