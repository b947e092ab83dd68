"""Which threads do a call's work in a process that imported TensorFlow, and whether the gate
reads it as TensorFlow work (``pytest_tpu.gate.tfwork``): the measurement behind the choice of
calibration kernel.

Each kind of work runs a first call (a ``tf.function`` traces there, as in a benchmark's first
runner call) and then ``--calls`` more; numpy and Python work run after TensorFlow's, so that its
pools are there to wake. Printed per call: wall time, the CPU time of the calling thread, of
TensorFlow's named threads (``tf_*``) and of the other threads by name, how many tensor ids
TensorFlow took, and the verdict. Thread CPU is read from ``/proc`` (Linux).

    python experiments/gate/tf_work.py --calls 3
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf

from pytest_tpu import threads
from pytest_tpu.gate import calibration, tfwork

Work = Callable[[], object]


def tensorflow_work() -> dict[str, Work]:
    """Calls of a few milliseconds each (on a 2-core VM); made fresh, so the first call traces."""
    x = tf.random.stateless_normal((256, 256), seed=(1, 2)) / 16

    def chain(x: Any) -> Any:
        for _ in range(8):
            x = tf.tanh(tf.matmul(x, x))
        return tf.reduce_sum(x)

    graph = tf.function(chain)
    xla = tf.function(chain, jit_compile=True)
    model = tf.keras.Sequential(
        [tf.keras.Input((64,)), tf.keras.layers.Dense(256, "relu"), tf.keras.layers.Dense(10)]
    )
    data = np.ones((512, 64), "float32")
    x384 = tf.random.stateless_normal((384, 384), seed=(1, 2)) / 20
    w = tf.Variable(tf.random.stateless_normal((384, 384), seed=(3, 4)) / 20)

    @tf.function
    def train_step() -> None:  # returns nothing: no tensor id for the caller
        with tf.GradientTape() as tape:
            y = x384
            for _ in range(4):
                y = tf.tanh(tf.matmul(y, w))
            loss = tf.reduce_sum(y)
        w.assign_sub(0.001 * tape.gradient(loss, w))

    kernel = calibration._tf_kernel("/device:CPU:0")
    return {
        "eager tf.matmul chain": lambda: chain(x).numpy(),
        "tf.function chain": lambda: graph(x).numpy(),
        "tf.function jit_compile": lambda: xla(x).numpy(),
        "tf.function -> None": train_step,
        "keras predict": lambda: model.predict(data, verbose=0),
        "keras model(x) eager": lambda: model(data).numpy(),
        "tf calibration kernel": kernel,
    }


def other_work() -> dict[str, Work]:
    rng = np.random.default_rng(0)
    values = rng.standard_normal(300_000)
    square = rng.standard_normal((384, 384))
    return {
        "np.sort 300k": lambda: np.sort(values),
        "numpy 384 matmul": lambda: square @ square.T,
        "pure Python": lambda: sum(i * i for i in range(150_000)),
        "sleep 5 ms": lambda: time.sleep(0.005),
        "numpy calibration kernel": calibration._numpy_kernel(),
    }


def one_call(label: str, work: Work) -> None:
    caller = threading.get_native_id()
    before = {tid: threads.cpu_ns(tid) for tid in threads.ids()}
    watch = tfwork.Watch.start()
    start = time.perf_counter()
    work()
    wall = time.perf_counter() - start
    verdict = watch.saw_tensorflow()
    # Not the watch's own read: that one has taken its id and read the threads by now.
    tensor_ids = tfwork._tensor_id()
    spent: dict[str, float] = defaultdict(float)
    for tid in threads.ids():
        used = (threads.cpu_ns(tid) - before.get(tid, 0)) / 1e6
        if used > 0:
            spent["caller" if tid == caller else threads.name(tid)] += used
    assert watch.tensor_id is not None
    assert tensor_ids is not None
    ids = tensor_ids - watch.tensor_id - 2  # the watch's two reads
    tf_ms = sum(ms for name, ms in spent.items() if name.startswith(tfwork.THREAD_PREFIX))
    named = ", ".join(
        f"{name} {ms:.2f}" for name, ms in sorted(spent.items(), key=lambda kv: -kv[1])
    )
    print(
        f"{label:26s} {wall * 1e3:7.2f} ms  tf_* {tf_ms:6.2f} ({tf_ms / (wall * 1e3):5.1%})  "
        f"ids {ids:4d}  {verdict!s:5s} | {named}",
        flush=True,
    )


def cost() -> float:
    """Seconds one watch (start and verdict) takes outside the timed call."""
    start = time.perf_counter()
    for _ in range(100):
        tfwork.Watch.start().saw_tensorflow()
    return (time.perf_counter() - start) / 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3, help="after the first call of each")
    options = parser.parse_args()
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} cores")
    for group in (tensorflow_work(), other_work()):
        for label, work in group.items():
            for call in range(1 + options.calls):
                one_call(f"{label}{' (1st)' if call == 0 else ''}", work)
    print(f"threads: {sorted({threads.name(tid) for tid in threads.ids()})}")
    print(f"one watch costs {cost() * 1e6:.0f} us outside the call")


if __name__ == "__main__":
    main()
