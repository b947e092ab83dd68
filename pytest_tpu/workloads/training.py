"""What the Keras workloads share: the jit_compile choice, input pipelines, batch arithmetic and
progress lines. TensorFlow and Keras are imported inside the functions that need them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_tpu.timing import clock
from pytest_tpu.workloads.data import Arrays

Progress = Callable[[str], None]

# jit_compile is always set explicitly: Keras' "auto" resolves differently per device and
# strategy, so two runs could compare different compilers without saying so. XLA is the only
# compiler on a TPU and Keras' own pick on a single GPU. Elsewhere it is off: under
# MirroredStrategy, Keras' XLA train step fails as soon as it reads a variable of another
# replica's device (TensorFlow's "tf.Variable on a different device" XLA limitation), and on the
# 2-core development CPUs XLA was slower for all three workloads (10x for the CNN's convolution
# gradients, 2x for the LSTM step, up to 2x for the bfloat16 matmul chain).
WORKLOADS: tuple[str, ...] = ("matmul", "cnn", "lstm", "resnet", "timeseries", "inference")


def default_jit_compile(kind: str, workload: str, replicas: int = 1) -> bool:
    """The ``jit_compile`` the suite uses for ``workload`` (one of ``WORKLOADS``) on a device
    of ``kind`` with ``replicas`` replicas."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; valid: {', '.join(WORKLOADS)}")
    return kind == "tpu" or (kind == "gpu" and replicas == 1)


def replicas_of(strategy: Any) -> int:
    return int(strategy.num_replicas_in_sync)


def global_batch(per_replica_batch: int, strategy: Any) -> int:
    """The batch one step consumes over all replicas (what a TPU's "batch_size" means)."""
    if per_replica_batch < 1:
        raise ValueError(f"batch size must be at least 1, got {per_replica_batch}")
    return per_replica_batch * replicas_of(strategy)


def full_steps(data: Arrays, batch: int) -> int:
    """Whole batches in ``data``: partial batches would retrace and unbalance replicas."""
    steps = len(data) // batch
    if steps < 1:
        raise ValueError(
            f"{len(data)} samples make no full global batch of {batch}; use more samples "
            "or a smaller batch"
        )
    return steps


def is_multi_worker(strategy: Any) -> bool:
    """Whether ``strategy`` spans several processes (a MultiWorkerMirroredStrategy cluster)."""
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and bool(
        strategy.extended._in_multi_worker_mode()  # what Keras' own trainer checks
    )


def batched_dataset(data: Arrays, batch: int, *, repeat: bool = False) -> Any:
    """A tf.data pipeline of whole batches, batched once up front so an epoch costs no
    per-sample pipeline work (the step is what is measured, not tf.data)."""
    import tensorflow as tf

    steps = full_steps(data, batch)
    samples = steps * batch
    x = data.x[:samples].reshape((steps, batch, *data.x.shape[1:]))
    y = data.y[:samples].reshape((steps, batch, *data.y.shape[1:]))
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if repeat:
        dataset = dataset.repeat()
    # In-memory data has no files to shard: say so, instead of letting a multi-worker strategy
    # try FILE sharding and fall back to DATA with a warning in every worker.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


class Prepared:
    """What every Keras workload sets up the same way before its first step."""

    def __init__(
        self,
        data: Arrays,
        per_replica_batch: int,
        strategy: Any,
        build: Callable[[bool], Any],
        jit_compile: bool,
    ) -> None:
        import tensorflow as tf

        self.strategy = strategy or tf.distribute.get_strategy()
        self.global_batch = global_batch(per_replica_batch, self.strategy)
        self.epoch_steps = full_steps(data, self.global_batch)
        with self.strategy.scope():  # variables live on every replica of the strategy
            self.model = build(jit_compile)
        self.dataset = batched_dataset(data, self.global_batch, repeat=True)


def logs_as_vectors(train_step: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``train_step`` with every log as a vector of one value.

    Under a multi-worker strategy Keras 3 averages each replica's logs over the cluster with
    ``strategy.reduce("MEAN", value, axis=0)``, whatever ``distribute_reduction_method`` says,
    and that fails on the scalar logs of a compiled model ("Invalid reduction dimension 0 for
    input with 0 dimensions"). A vector of one reduces to the cluster's mean, as intended.
    """
    import tensorflow as tf

    def step(data: Any) -> Any:
        return tf.nest.map_structure(lambda log: tf.reshape(log, [1]), train_step(data))

    return step


class TrainingRounds:
    """A Keras model trained a fixed number of steps per call, on every replica of a strategy.

    The first call goes through ``model.fit``, so Keras builds the model, optimizer and metrics
    and traces its train function the public way; it is the cold start, timed apart by the
    caller. Later calls drive that same train function over one long-lived distributed
    iterator: a round then costs its steps and not what ``fit`` sets up on every call
    (iterators, callbacks), which would otherwise be counted as work. Each call returns the
    loss as a Python float, fetched after the last step ran.
    """

    def __init__(
        self,
        model: Any,
        dataset: Any,
        steps_per_round: int,
        first_steps: int,
        strategy: Any,
        progress: Progress | None = None,
        label: str = "train",
    ) -> None:
        self.model, self.dataset, self.strategy = model, dataset, strategy
        self.steps_per_round, self.first_steps = steps_per_round, first_steps
        self._progress, self._label, self._rounds = progress, label, 0
        self._iterator: Any = None

    def first_call(self) -> float:
        """Build, trace and compile over ``first_steps`` steps (through ``fit`` where it can)."""
        started = clock()
        if is_multi_worker(self.strategy):
            loss = self._first_call_multi_worker()
        else:
            history = self.model.fit(
                self.dataset, epochs=1, steps_per_epoch=self.first_steps, verbose=0, shuffle=False
            )
            self._iterator = self._distributed_iterator()
            loss = float(history.history["loss"][-1])
        self._report("first call (trace and compile)", self.first_steps, clock() - started)
        return loss

    def _first_call_multi_worker(self) -> float:
        """The first call without ``fit``, which fails under a multi-worker strategy in Keras 3.

        ``fit`` first peeks one distributed batch and averages it over the replicas with
        ``strategy.reduce`` only to learn its shapes; the collective strategy's reduce takes a
        single tensor, not an ``(x, y)`` pair ("Attempt to convert a value (PerReplica...)",
        keras-team/keras#20585). So this builds the model, its metrics and the optimizer the
        way ``fit`` does after that peek, from the dataset's element spec (shapes only), and
        runs the first steps through Keras' own train function, as every later round does.
        """
        with self.strategy.scope():
            self.model._symbolic_build(data_batch=self.dataset.element_spec)
        self.model.train_step = logs_as_vectors(self.model.train_step)
        self.model.make_train_function()
        self._iterator = self._distributed_iterator()
        return self._steps(self.first_steps)

    def _distributed_iterator(self) -> Any:
        return iter(self.strategy.experimental_distribute_dataset(self.dataset))

    def _steps(self, steps: int) -> float:
        """Run ``steps`` train steps on the long-lived iterator; the loss after the last one
        (the float fetch waits for every step it depends on)."""
        import numpy as np

        train = self.model.train_function
        for _ in range(steps):
            logs = train(self._iterator)
        return float(np.reshape(logs["loss"], -1)[0])  # a scalar, or a vector of one

    def __call__(self) -> float:
        if self._iterator is None:
            return self.first_call()
        started = clock()
        loss = self._steps(self.steps_per_round)
        self._rounds += 1
        self._report(f"round {self._rounds}", self.steps_per_round, clock() - started)
        return loss

    @property
    def replicas(self) -> int:
        return replicas_of(self.strategy)

    def _report(self, what: str, steps: int, seconds: float) -> None:
        if self._progress is not None:
            self._progress(f"{self._label}: {what}, {steps} steps in {seconds:.2f} s")


def epoch_figures(epoch_s: float, steps: int, batch: int) -> dict[str, float]:
    """Epoch seconds, step milliseconds and samples per second of one epoch."""
    return {
        "epoch_s": epoch_s,
        "step_ms": epoch_s / steps * 1e3,
        "samples_per_s": steps * batch / epoch_s,
    }


class EpochRounds(TrainingRounds):
    """One epoch of a Keras image model per call, on every replica of ``strategy``.

    ``per_replica_batch`` is the batch each replica sees; a step consumes ``global_batch``
    samples (per-replica batch x replicas), and an epoch is ``steps`` such steps. Subclasses say
    which model (``build``) and the shape of one input (``input_shape``).
    """

    build: Callable[..., Any]
    input_shape: tuple[int, ...]
    default_label = "epoch"

    def __init__(
        self,
        data: Arrays,
        per_replica_batch: int,
        strategy: Any = None,
        jit_compile: bool = False,
        progress: Any = None,
        label: str | None = None,
    ) -> None:
        ready = Prepared(data, per_replica_batch, strategy, type(self).build, jit_compile)
        label = label or self.default_label
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
        counted with TensorFlow's graph profiler (the networks have no loop)."""
        import tensorflow as tf

        from pytest_tpu.flops import train_step_flops

        return train_step_flops(self.model, tf.zeros((self.global_batch, *self.input_shape)))
