"""CNN epoch: the published MNIST model, one epoch of training per call.

One call is one epoch over a fixed number of whole batches, so every round does the same work.
The first call is the first epoch (tracing, compilation, sharding), reported apart.
"""

from __future__ import annotations

from typing import Any

from pytest_tpu.workloads.data import MNIST_CLASSES, MNIST_SHAPE, Arrays
from pytest_tpu.workloads.training import Prepared, Progress, TrainingRounds


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


def epoch_figures(epoch_s: float, steps: int, batch: int) -> dict[str, float]:
    """Epoch seconds, step milliseconds and samples per second of one epoch."""
    return {
        "epoch_s": epoch_s,
        "step_ms": epoch_s / steps * 1e3,
        "samples_per_s": steps * batch / epoch_s,
    }


class CnnEpochs(TrainingRounds):
    """One epoch of the MNIST CNN per call, on every replica of ``strategy``; returns the loss.

    ``per_replica_batch`` is the batch each replica sees; a step consumes ``global_batch``
    samples (per-replica batch x replicas), and an epoch is ``steps`` such steps.
    """

    def __init__(
        self,
        data: Arrays,
        per_replica_batch: int,
        strategy: Any = None,
        jit_compile: bool = False,
        progress: Progress | None = None,
        label: str = "cnn",
    ) -> None:
        ready = Prepared(data, per_replica_batch, strategy, build_cnn, jit_compile)
        self.jit_compile = jit_compile
        self.per_replica_batch = per_replica_batch
        self.global_batch = ready.global_batch
        self.steps = ready.epoch_steps
        super().__init__(
            ready.model, ready.dataset, self.steps, self.steps, ready.strategy, progress, label
        )

    @property
    def samples(self) -> int:
        """Samples trained per epoch (whole global batches only)."""
        return self.steps * self.global_batch

    def figures(self, epoch_s: float) -> dict[str, float]:
        return epoch_figures(epoch_s, self.steps, self.global_batch)

    def step_flops(self) -> float:
        """Model FLOPs of one training step (3x the forward pass over a global batch),
        counted with TensorFlow's graph profiler."""
        import tensorflow as tf

        from pytest_tpu.flops import train_step_flops

        return train_step_flops(self.model, tf.zeros((self.global_batch, 28, 28, 1)))
