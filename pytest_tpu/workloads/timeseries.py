"""Weather time-series RNN: GRU(512) over 1344 hourly steps, a fixed number of steps per call.

The reference is the Keras weather tutorial the published run follows (its notebook is not in
the post): GRU(512, return_sequences=True) → Dense(3, sigmoid), MSE, RMSprop, on windows of
(1344, 20). The first call is a single step (tracing, compilation), reported apart; every later
call runs ``steps_per_round`` steps.
"""

from __future__ import annotations

from typing import Any

from pytest_tpu.workloads.data import WEATHER_TARGETS, Arrays
from pytest_tpu.workloads.training import Prepared, Progress, TrainingRounds

UNITS = 512
PUBLISHED_EPOCH_STEPS = 10  # the published GPU log: epochs of 10 steps, about 4 s each


def build_gru(jit_compile: bool, steps: int, signals: int) -> Any:
    """GRU(512, return_sequences=True) → Dense(3, sigmoid); RMSprop(1e-3), mean squared error.

    Build it inside ``strategy.scope()`` to spread it over the strategy's replicas.
    """
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input((steps, signals)),
            layers.GRU(UNITS, return_sequences=True),
            layers.Dense(WEATHER_TARGETS, activation="sigmoid"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.RMSprop(learning_rate=1e-3),
        loss="mean_squared_error",
        jit_compile=jit_compile,
    )
    return model


def gru_train_flops(batch: int, steps: int, features: int, units: int = UNITS) -> float:
    """Model FLOPs of one training step, counted analytically (the graph profiler counts a
    recurrent loop once): three gates, each a product of ``[x, h]`` (``features + units``)
    with ``units`` outputs, and the Dense(3) head, per time step and sample; 3x for training."""
    from pytest_tpu.flops import TRAIN_FACTOR

    per_step = 2.0 * 3 * units * (features + units) + 2.0 * units * WEATHER_TARGETS
    return TRAIN_FACTOR * per_step * steps * batch


def sequence_figures(round_s: float, steps: int, batch: int) -> dict[str, float]:
    """Step milliseconds, sequences per second and the seconds of a published 10-step epoch."""
    step_s = round_s / steps
    return {
        "step_ms": step_s * 1e3,
        "samples_per_s": batch / step_s,
        "epoch_s": step_s * PUBLISHED_EPOCH_STEPS,
    }


class TimeseriesSteps(TrainingRounds):
    """``steps_per_round`` training steps of the weather GRU per call; returns the last loss.

    The data repeat, so any number of rounds is possible. Sequence length and signal count come
    from ``data`` (1344 and 20 for the published shape).
    """

    def __init__(
        self,
        data: Arrays,
        per_replica_batch: int,
        steps_per_round: int = 1,
        strategy: Any = None,
        jit_compile: bool = False,
        progress: Progress | None = None,
        label: str = "timeseries",
    ) -> None:
        _, steps, signals = data.x.shape
        build = lambda jit: build_gru(jit, int(steps), int(signals))  # noqa: E731
        ready = Prepared(data, per_replica_batch, strategy, build, jit_compile)
        self.jit_compile = jit_compile
        self.per_replica_batch = per_replica_batch
        self.global_batch = ready.global_batch
        self.sequence_length, self.signals = int(steps), int(signals)
        super().__init__(
            ready.model, ready.dataset, steps_per_round, 1, ready.strategy, progress, label
        )

    def figures(self, round_s: float) -> dict[str, float]:
        return sequence_figures(round_s, self.steps_per_round, self.global_batch)

    def step_flops(self) -> float:
        return gru_train_flops(self.global_batch, self.sequence_length, self.signals)
