"""The gate experiment's benchmarks: five kinds of work in both pytest-benchmark styles.

Collected only by ``experiments/gate/run.py`` (no ``test_`` file prefix). Every benchmark exists in
three copies (``a``, ``b``, ``c``) that the baseline records identically; in a comparison session
``GATE_ARMS="a=0,b=0.05,c=0.1"`` makes each copy do that much more work, the way a code change
would: one more step in twenty per 5 %, nothing in a name, parameter or environment key changes.
"""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import pytest

CHAIN = 4  # products in one call of the matmul chain
STEPS = 20  # units of work per call; +5 % is one more unit
COPIES = ("a", "b", "c")
ARMS = dict(
    (part.split("=")[0], float(part.split("=")[1]))
    for part in os.environ.get("GATE_ARMS", "a=0,b=0,c=0").split(",")
)


def steps(copy: str) -> int:
    return round(STEPS * (1 + ARMS.get(copy, 0.0)))


# ---------------------------------------------------------------- the five kinds of work


@cache
def matmul_step():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w = tf.constant((rng.standard_normal((192, 192)) / 14).astype("float32"))
    x0 = tf.constant(rng.standard_normal((192, 192)).astype("float32"))

    @tf.function
    def chain(count):
        x = x0
        for _ in tf.range(count):  # each product consumes the last: nothing to hoist
            x = tf.tanh(tf.matmul(x, w))
        return tf.reduce_sum(x)

    count = tf.constant(CHAIN)

    def run(n):
        # A whole call per unit: its dispatch and device sync are part of the work, so one more
        # unit in twenty is 5 % more time (a chain of 20 in one call measured only +4 %).
        for _ in range(n):
            chain(count).numpy()

    return run


@cache
def cnn_step():
    import keras

    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(64, 2, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Dropout(0.3),
            keras.layers.Conv2D(32, 2, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Dropout(0.3),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    rng = np.random.default_rng(1)
    x = rng.random((8, 28, 28, 1), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]
    model.train_on_batch(x, y)

    def run(n):
        for _ in range(n):
            model.train_on_batch(x, y)

    return run


@cache
def transformer_step():
    import keras

    inputs = keras.Input((64,), dtype="int32")
    x = keras.layers.Embedding(2000, 32)(inputs)
    attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=32)(x, x)
    x = keras.layers.LayerNormalization()(x + attention)
    feed = keras.layers.Dense(32)(keras.layers.Dense(64, activation="relu")(x))
    x = keras.layers.LayerNormalization()(x + feed)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 2000, (4, 64)).astype("int32")
    labels = rng.integers(0, 2, 4)
    model.train_on_batch(tokens, labels)

    def run(n):
        for _ in range(n):
            model.train_on_batch(tokens, labels)

    return run


_RNG = np.random.default_rng(3)
_VALUES = _RNG.random(300)


def numpy_step(n):
    """About 5 µs per unit: a sort and a small reduction, 20 units about 100 µs."""
    total = 0.0
    for _ in range(n):
        total += float(np.sort(_VALUES)[-3:].sum())
    return total


def _zscore_features(x, window=44):
    ma = np.convolve(x, np.ones(window) / window, mode="same")
    resid = x - ma
    z = (resid - resid.mean()) / resid.std()
    return np.stack([ma, z, np.abs(np.diff(x, prepend=x[0]))])


@cache
def alloc_step():
    """New-user trial 75's z-score over 200,000 values, 5-10 ms per unit: arrays of 1.6 MB and a
    4.8 MB stack made and freed in every call, whose processes of the same code ran at two or
    three speeds about 10 % apart (``experiments/alloc_offsets.py``). Its input is made here, as
    the trial's test made it, after the other kinds' TensorFlow work: where glibc puts such blocks
    depends on what the process allocated before."""
    signal = np.random.default_rng(4).standard_normal(200_000)

    def run(n):
        for _ in range(n):
            _zscore_features(signal)

    return run


WORK = {
    "matmul": (matmul_step, 40),
    "cnn": (cnn_step, 10),
    "transformer": (transformer_step, 12),
    "numpy": (lambda: numpy_step, 300),
    "alloc": (alloc_step, 10),
}


@pytest.mark.parametrize("copy", COPIES)
@pytest.mark.parametrize("kind", list(WORK))
def test_fn(benchmark, kind, copy):
    """The ``benchmark(fn)`` style: pytest-benchmark chooses rounds and iterations."""
    make, _ = WORK[kind]
    step, n = make(), steps(copy)
    benchmark(step, n)


@pytest.mark.parametrize("copy", COPIES)
@pytest.mark.parametrize("kind", list(WORK))
def test_pedantic(benchmark, kind, copy):
    """The ``benchmark.pedantic`` style with a fixed number of rounds and a warm-up."""
    make, rounds = WORK[kind]
    step, n = make(), steps(copy)
    benchmark.pedantic(step, args=(n,), rounds=rounds, warmup_rounds=2)
