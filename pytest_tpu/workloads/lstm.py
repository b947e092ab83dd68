"""LSTM step: the published IMDB sentiment model, a fixed number of training steps per call.

The first call is a single step (tracing, compilation), reported apart; every later call runs
``steps_per_round`` steps, so every round does the same work.
"""

from __future__ import annotations

from typing import Any

from pytest_tpu.workloads.data import IMDB_LENGTH, IMDB_VOCAB, Arrays
from pytest_tpu.workloads.training import Prepared, Progress, TrainingRounds

EMBEDDING = 32
UNITS = 100


def build_lstm(jit_compile: bool) -> Any:
    """Embedding(15000, 32) → LSTM(100) → Dense(1, sigmoid); Adam, binary cross-entropy.

    Build it inside ``strategy.scope()`` to spread it over the strategy's replicas.
    """
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input((IMDB_LENGTH,), dtype="int32"),
            layers.Embedding(IMDB_VOCAB, EMBEDDING),
            layers.LSTM(UNITS),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", jit_compile=jit_compile)
    return model


def step_figures(round_s: float, steps: int, batch: int) -> dict[str, float]:
    """Step milliseconds and microseconds per sample of a round of ``steps`` steps."""
    step_s = round_s / steps
    return {"step_ms": step_s * 1e3, "us_per_sample": step_s / batch * 1e6}


class LstmSteps(TrainingRounds):
    """``steps_per_round`` training steps of the IMDB LSTM per call; returns the last loss.

    ``steps_per_round=None`` makes a round one epoch over ``data``. The data repeat, so any
    number of rounds is possible.
    """

    def __init__(
        self,
        data: Arrays,
        per_replica_batch: int,
        steps_per_round: int | None = None,
        strategy: Any = None,
        jit_compile: bool = False,
        progress: Progress | None = None,
        label: str = "lstm",
    ) -> None:
        ready = Prepared(data, per_replica_batch, strategy, build_lstm, jit_compile)
        self.jit_compile = jit_compile
        self.per_replica_batch = per_replica_batch
        self.global_batch = ready.global_batch
        self.epoch_steps = ready.epoch_steps
        steps = steps_per_round or self.epoch_steps
        super().__init__(ready.model, ready.dataset, steps, 1, ready.strategy, progress, label)

    def figures(self, round_s: float) -> dict[str, float]:
        return step_figures(round_s, self.steps_per_round, self.global_batch)

    def step_flops(self) -> float:
        """Model FLOPs of one training step, counted analytically: the graph profiler counts
        the LSTM's loop once (see ``pytest_tpu.flops``); embedding and the Dense(1) head are
        negligible beside the recurrent products."""
        from pytest_tpu.flops import lstm_train_flops

        return lstm_train_flops(self.global_batch, IMDB_LENGTH, EMBEDDING, UNITS)
