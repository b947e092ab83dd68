"""Plain Keras idioms under ``--tpu-virtual-cpus=2`` (MirroredStrategy) and the one line that
replaces a per-replica failure. Under ``--tpu-workers=2`` (MultiWorkerMirroredStrategy on
loopback) they run in ``test_cluster.py``'s one cluster session.

The Keras runs happen in fresh pytest processes (TensorFlow must not load in this one).
"""

from __future__ import annotations

import pytest
from test_workloads import TINY_CHECKS

from pytest_tpu.keras_rules import KERAS_ISSUE, short_failure

# The keras-io mnist_convnet way: a compiled model, then fit / evaluate / predict on arrays.
IDIOMS = """
import numpy as np
import tensorflow as tf
import keras
from keras import layers


def build(strategy):
    with strategy.scope():
        model = keras.Sequential([
            keras.Input((8, 8, 1)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.Flatten(),
            layers.Dense(10, activation="softmax"),
        ])
        model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    return model


def data(n):
    rng = np.random.default_rng(0)
    x = rng.random((n, 8, 8, 1), dtype=np.float32)
    return x, np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]


def test_fit_numpy_evaluate_predict(tpu_strategy):
    x, y = data(72)  # 72 = 4 batches of 16 and a partial one, split 3:1 for validation
    model = build(tpu_strategy)
    history = model.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and "val_accuracy" in history.history
    loss, accuracy = model.evaluate(x, y, batch_size=16, verbose=0)
    assert np.isfinite(loss) and 0.0 <= accuracy <= 1.0
    assert model.predict(x, batch_size=16, verbose=0).shape == (72, 10)


def test_fit_dataset(tpu_strategy):
    x, y = data(64)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    history = build(tpu_strategy).fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
"""

# A custom loop's mistake: reducing an (x, y) pair at once. MirroredStrategy accepts it; the
# multi-worker strategy fails with every value of the batch in the message.
PER_REPLICA_MISTAKE = """
import numpy as np
import tensorflow as tf


def test_reduce_a_pair(tpu_strategy):
    x = np.zeros((64, 8), dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, x)).batch(16)
    batch = next(iter(tpu_strategy.experimental_distribute_dataset(dataset)))
    tpu_strategy.reduce("MEAN", batch, axis=None)
"""

# The new workloads, tiny, over 2 replicas: a request of 3 is padded to 4.
TINY_WORKLOADS = """
import pytest
from pytest_tpu.timing import measure
from pytest_tpu.workloads import (
    PredictBatches, ResnetEpochs, TimeseriesSteps, cifar10, imdb, weather,
)


def test_resnet(tpu_strategy):
    # Built, not trained: its train step is the CNN's (TrainingRounds), trained in
    # test_workloads; tracing ResNet-20's gradients would double this test's time.
    epochs = ResnetEpochs(cifar10(32), 8, tpu_strategy)
    assert epochs.model.output_shape == (None, 10) and epochs.steps == 2
    assert sum(1 for layer in epochs.model.layers if "conv" in layer.name) == 21
    assert epochs.model.count_params() == 274_442  # ResNet-20 v1: "0.27M" in the Keras example


def test_timeseries(accelerator, tpu_strategy):
    steps = TimeseriesSteps(weather(8, steps=16), 2, 1, tpu_strategy)
    assert steps.model.output_shape == (None, 16, 3) and steps.global_batch == 4
    result = measure(steps, rounds=1, warmup=0, sync=accelerator.sync)
    assert steps.figures(result.samples[0])["epoch_s"] == pytest.approx(10 * result.samples[0])


def test_inference(accelerator, tpu_strategy):
    predict = PredictBatches(imdb(32), 3, 2, tpu_strategy)
    assert predict.padded_batch == 4 and predict.padding.startswith("padded 3 → 4 rows")
    result = measure(predict, rounds=2, warmup=1, sync=accelerator.sync)
    assert [len(times) for times in predict.latencies] == [2, 2, 2]
    figures = predict.figures(result.median_s, 2)
    assert figures["samples_per_s"] == pytest.approx(3 * 2 / result.median_s)
    assert 0 < figures["latency_p50_ms"] <= figures["latency_p90_ms"]
"""

ARGS = ("--accelerator=cpu", "-p", "no:cacheprovider", "-q")


def test_a_per_replica_failure_becomes_one_line():
    message = "Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor: ...>\n}) to a Tensor."
    line = short_failure(message)
    assert line is not None and "\n" not in line and "tf.Tensor" not in line
    assert line.startswith("ValueError: Attempt to convert a value …") and KERAS_ISSUE in line
    assert short_failure("Invalid reduction dimension 0 for input with 0 dimensions [Op:X]")
    assert short_failure("some other error") is None


def test_keras_idioms_and_new_workloads_on_virtual_cpus(pytester: pytest.Pytester) -> None:
    # With them, test_workloads.py's checks of the suite's workloads on two replicas.
    tiny_checks = TINY_CHECKS.replace("@REPLICAS@", "2")
    pytester.makepyfile(test_idioms=IDIOMS, test_tiny=TINY_WORKLOADS, test_tiny_checks=tiny_checks)
    result = pytester.runpytest_subprocess(*ARGS, "--tpu-virtual-cpus=2", timeout=300)
    result.assert_outcomes(passed=8)
