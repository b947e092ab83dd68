"""Inference: ``model.predict`` throughput and per-batch latency, batches padded for the replicas.

A TPU wants "a shape that is a multiple of 8" (its cores): every request of ``batch`` samples is
padded with zero rows to the next multiple of the replicas, and the figures say so. Throughput
counts the requested samples only (padding is work that serves nobody); latency is the time from
handing a batch to Keras' predict function to having its predictions on the host, per batch.

The model is the IMDB LSTM the published post predicts with, unless another ``build`` is given.
The first call (``model.predict`` on one request: build, trace, compile) is reported apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_tpu.timing import clock
from pytest_tpu.workloads.data import Arrays
from pytest_tpu.workloads.lstm import build_lstm
from pytest_tpu.workloads.training import Progress, replicas_of


def padded_batch(batch: int, replicas: int) -> int:
    """``batch`` rounded up to a multiple of ``replicas`` (each replica gets equal rows)."""
    if batch < 1 or replicas < 1:
        raise ValueError(f"need batch >= 1 and replicas >= 1, got {batch} and {replicas}")
    return -(-batch // replicas) * replicas


def padding_note(batch: int, padded: int, replicas: int) -> str:
    """What the figures' ``padding`` field says about the batch actually sent."""
    if padded == batch:
        return f"none: {batch} is a multiple of {replicas} replica(s)"
    return (
        f"padded {batch} → {padded} rows (a multiple of {replicas} replicas); "
        f"samples/s counts the {batch} requested"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linearly interpolated, as numpy's default."""
    import numpy as np

    if not values:
        raise ValueError("percentile of no values")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def inference_figures(
    round_s: float, batch: int, batches: int, latencies_s: Sequence[float]
) -> dict[str, float]:
    """Samples per second of a round, and per-batch latency p50 and p90 in milliseconds."""
    return {
        "samples_per_s": batch * batches / round_s,
        "latency_p50_ms": percentile(latencies_s, 50) * 1e3,
        "latency_p90_ms": percentile(latencies_s, 90) * 1e3,
    }


def _requests(data: Arrays, batch: int, padded: int) -> Any:
    """``data.x`` cut into requests of ``batch`` rows, each padded with zero rows to ``padded``."""
    import numpy as np

    count = max(1, len(data) // batch)
    x = np.resize(data.x, (count * batch, *data.x.shape[1:]))  # cycles when data is short
    requests = x.reshape((count, batch, *data.x.shape[1:]))
    pad = [(0, 0), (0, padded - batch)] + [(0, 0)] * (data.x.ndim - 1)
    return np.pad(requests, pad)


class PredictBatches:
    """``batches_per_round`` predict calls of one request each, on every replica of ``strategy``.

    Each call returns the round's seconds; ``latencies`` keeps every batch's seconds, one list
    per round. ``build(jit_compile)`` makes the compiled model (default: the IMDB LSTM).
    """

    def __init__(
        self,
        data: Arrays,
        batch: int,
        batches_per_round: int,
        strategy: Any = None,
        jit_compile: bool = False,
        build: Callable[[bool], Any] = build_lstm,
        progress: Progress | None = None,
        label: str = "inference",
    ) -> None:
        import tensorflow as tf

        self.strategy = strategy or tf.distribute.get_strategy()
        self.batch, self.batches_per_round, self.jit_compile = batch, batches_per_round, jit_compile
        self.padded_batch = padded_batch(batch, self.replicas)
        with self.strategy.scope():
            self.model = build(jit_compile)
        self.requests = _requests(data, batch, self.padded_batch)
        self.latencies: list[list[float]] = []
        self._progress, self._label = progress, label
        self._iterator: Any = None

    @property
    def replicas(self) -> int:
        return replicas_of(self.strategy)

    @property
    def padding(self) -> str:
        return padding_note(self.batch, self.padded_batch, self.replicas)

    def _dataset(self) -> Any:
        import tensorflow as tf

        dataset = tf.data.Dataset.from_tensor_slices(self.requests).repeat()
        options = tf.data.Options()  # in-memory requests: shard by element, not by file
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)

    def first_call(self) -> float:
        """``model.predict`` on one request (build, trace), then one batch on the iterator."""
        started = clock()
        self.model.predict(self.requests[0], batch_size=self.padded_batch, verbose=0)
        self._iterator = iter(self.strategy.experimental_distribute_dataset(self._dataset()))
        self._one_batch()  # the iterator's own trace, if its shapes differ from predict's
        seconds = clock() - started
        self._report("first call (build, trace and compile)", seconds)
        return seconds

    def _one_batch(self) -> float:
        """One request through Keras' predict function, until its predictions are on the host."""
        import numpy as np
        import tensorflow as tf

        started = clock()
        outputs = self.model.predict_function([next(self._iterator)])
        for output in tf.nest.flatten(outputs):
            np.asarray(output)  # the fetch waits for the device
        return clock() - started

    def __call__(self) -> float:
        if self._iterator is None:
            return self.first_call()
        times = [self._one_batch() for _ in range(self.batches_per_round)]
        self.latencies.append(times)
        self._report(f"round {len(self.latencies)}, {len(times)} batches", sum(times))
        return sum(times)

    def batch_flops(self) -> float:
        """Model FLOPs of one padded batch through the default IMDB LSTM (its forward pass,
        analytically: the graph profiler counts the recurrent loop once)."""
        from pytest_tpu.flops import TRAIN_FACTOR, lstm_train_flops
        from pytest_tpu.workloads.data import IMDB_LENGTH
        from pytest_tpu.workloads.lstm import EMBEDDING, UNITS

        train = lstm_train_flops(self.padded_batch, IMDB_LENGTH, EMBEDDING, UNITS)
        return train / TRAIN_FACTOR

    def steady_latencies(self, rounds: int) -> list[float]:
        """Per-batch seconds of the last ``rounds`` rounds (the warm-up rounds left out)."""
        return [t for times in self.latencies[-rounds:] for t in times] if rounds > 0 else []

    def figures(self, round_s: float, rounds: int) -> dict[str, float]:
        latencies = self.steady_latencies(rounds) or [round_s / self.batches_per_round]
        return inference_figures(round_s, self.batch, self.batches_per_round, latencies)

    def _report(self, what: str, seconds: float) -> None:
        if self._progress is not None:
            self._progress(f"{self._label}: {what} in {seconds:.2f} s")
