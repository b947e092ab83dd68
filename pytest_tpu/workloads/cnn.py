"""CNN epoch: the published MNIST model, one epoch of training per call.

One call is one epoch over a fixed number of whole batches, so every round does the same work.
The first call is the first epoch (tracing, compilation, sharding), reported apart.
"""

from __future__ import annotations

from typing import Any

from pytest_tpu.workloads.data import MNIST_CLASSES, MNIST_SHAPE
from pytest_tpu.workloads.training import EpochRounds


def build_cnn(jit_compile: bool) -> Any:
    """The published MNIST CNN, compiled (Adam, categorical cross-entropy, accuracy).

    Build it inside ``strategy.scope()`` to spread it over the strategy's replicas.
    """
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(MNIST_SHAPE),
            layers.Conv2D(64, 2, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Dropout(0.3),
            layers.Conv2D(32, 2, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Dropout(0.3),
            layers.Flatten(),
            layers.Dense(256, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(MNIST_CLASSES, activation="softmax"),
        ]
    )
    model.compile(
        optimizer="adam",
        loss="categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model


class CnnEpochs(EpochRounds):
    """One epoch of the MNIST CNN per call, on every replica of ``strategy``; returns the loss.

    ``per_replica_batch`` is the batch each replica sees; a step consumes ``global_batch``
    samples (per-replica batch x replicas), and an epoch is ``steps`` such steps.
    """

    build = staticmethod(build_cnn)
    input_shape = MNIST_SHAPE
    default_label = "cnn"
