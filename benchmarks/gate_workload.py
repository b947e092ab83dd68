"""The regression gate's experiment workload: chained matrix products on the CPU.

Run by ``benchmarks/gate_experiment.py``; a plain ``pytest benchmarks`` does not collect it (no
``test_`` prefix). ``GATE_EXPERIMENT_EXTRA=0.05`` makes the work 5 % larger the way a code change
would: nothing in the test's name, parameters or environment key changes.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

# One thread each way: on a shared 2-core machine two intra-op threads measure the scheduler's
# placement of them among other tenants more than the work (measured: 40 % between sessions).
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

# Big steps, so the graph call's fixed cost (about 4 ms here) is small beside the steps and one
# more step is about 1/STEPS more time.
SIZE = 512
STEPS = 20
ROUNDS = int(os.environ.get("GATE_EXPERIMENT_ROUNDS", "60"))
EXTRA = float(os.environ.get("GATE_EXPERIMENT_EXTRA", "0"))


def _chain(steps: int):
    rng = np.random.default_rng(0)
    w = tf.constant((rng.standard_normal((SIZE, SIZE)) / np.sqrt(SIZE)).astype("float32"))
    x0 = tf.constant(rng.standard_normal((SIZE, SIZE)).astype("float32"))

    @tf.function
    def run(count):
        x = x0
        for _ in tf.range(count):  # each product consumes the previous one: nothing to hoist
            x = tf.tanh(tf.matmul(x, w))
        return tf.reduce_sum(x)

    count = tf.constant(steps)
    return lambda: run(count).numpy()


def test_chained_matmul(benchmark, accelerator):
    steps = round(STEPS * (1 + EXTRA))
    with accelerator.scope():
        fn = _chain(steps)
        benchmark.extra_info.update(dtype="float32", workload_size=f"{SIZE}x{STEPS}")
        benchmark.pedantic(fn, rounds=ROUNDS, warmup_rounds=3)
