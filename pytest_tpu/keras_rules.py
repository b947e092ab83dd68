"""Keras 3 under ``--tpu-workers`` (MultiWorkerMirroredStrategy): the common idioms made to
work, and one short line for a failure that still names per-replica values.

Keras 3's TensorFlow trainer has two faults under a multi-worker strategy
(keras-team/keras#20585), and each breaks ``model.fit`` and ``model.evaluate``, on numpy arrays
and on ``tf.data`` alike (``predict`` works):

* before the first step it averages one whole distributed ``(x, y)`` batch over the cluster with
  ``strategy.reduce`` only to learn its shapes; the collective strategy reduces one tensor at a
  time, so this fails with ``ValueError: Attempt to convert a value (PerReplica:{...})`` followed
  by every value of the batch;
* it averages each scalar log over the replicas with ``strategy.reduce("MEAN", log, axis=0)``,
  which fails on a scalar ("Invalid reduction dimension 0 for input with 0 dimensions").

In the processes of a multi-worker cluster, pytest-tpu replaces those two steps with what they
mean to do: shapes from this worker's own first replica, and each scalar log averaged as a
vector of one. Nothing changes elsewhere (one process, ``--tpu-virtual-cpus``, TPUs), and nothing
changes when the Keras in use lacks the two functions (another version): then a failure that
still carries per-replica values is cut to one line that names the rule.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

PLUGIN_NAME = "pytest-tpu-keras-rules"
KERAS_ISSUE = "keras-team/keras#20585"
_TRAINER = "keras.src.backend.tensorflow.trainer"
RULE = (
    "under MultiWorkerMirroredStrategy (--tpu-workers) a per-replica value must be reduced or "
    "unwrapped one tensor at a time (strategy.reduce(op, tensor, axis) or "
    "strategy.experimental_local_results(value)) before it is used as a tensor"
)
# The markers of the errors this module shortens: what Keras 3 raises under a multi-worker
# strategy, and TensorFlow's repr of per-replica values that makes those errors huge.
_PER_REPLICA = "(PerReplica:{"
_SCALAR_REDUCE = "Invalid reduction dimension 0 for input with 0 dimensions"
MAX_MESSAGE = 300


def register(config: pytest.Config) -> None:
    """Register the plugin once per session (``--tpu-workers``, ``--tpu-virtual-cpus``,
    TF_CONFIG)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(KerasRules(), PLUGIN_NAME)


def in_cluster() -> bool:
    """Whether this process is one task of a multi-process TF_CONFIG cluster."""
    return bool(os.environ.get("TF_CONFIG"))


class KerasRules:
    """Patches Keras in cluster processes before each test; shortens per-replica failures."""

    def __init__(self) -> None:
        self.patched: bool | None = None  # None: not tried yet

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Before the fixtures, which may train too, when the test module imported Keras."""
        self._patch()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        """Before the test body, once ``tpu_strategy`` has imported TensorFlow."""
        self._patch()

    def _patch(self) -> None:
        # Never at configure, and never by importing TensorFlow here: the cluster's strategy
        # must be made before TensorFlow initialises.
        if self.patched is None and in_cluster() and "tensorflow" in sys.modules:
            self.patched = patch_multi_worker_keras()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report: pytest.TestReport = yield
        if report.failed and call.excinfo is not None:
            line = short_failure(str(call.excinfo.value), type(call.excinfo.value).__name__)
            if line is not None:
                report.longrepr = f"{_where(item, call.excinfo)}: {line}"
        return report


def _where(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """``path:line`` of the deepest frame in the test's own file (else the test's definition)."""
    path, lineno, _ = item.location
    own = [entry for entry in excinfo.traceback if entry.path == item.path]
    line = own[-1].lineno if own else (lineno or 0)
    return f"{path}:{line + 1}"


def short_failure(message: str, kind: str = "ValueError") -> str | None:
    """One line for an error that carries per-replica values, or None for any other error."""
    if _PER_REPLICA not in message and _SCALAR_REDUCE not in message:
        return None
    head = message.split(_PER_REPLICA, 1)[0].split("\n", 1)[0].strip()
    if _SCALAR_REDUCE in message:
        head = _SCALAR_REDUCE
    head = head if len(head) <= MAX_MESSAGE else head[: MAX_MESSAGE - 1] + "…"
    return f"{kind}: {head} … [per-replica values cut by pytest-tpu] — rule: {RULE} ({KERAS_ISSUE})"


def patch_multi_worker_keras() -> bool:
    """Fix Keras 3's fit/evaluate for a multi-worker strategy in this process (see module doc).

    Returns whether the patch is in place; False when this Keras has no such trainer functions.
    Only multi-worker strategies take the new paths; every other strategy runs Keras' own code.
    """
    try:
        import importlib

        trainer: Any = importlib.import_module(_TRAINER)
    except ImportError:
        return False
    cls = getattr(trainer, "TensorFlowTrainer", None)
    reduce = getattr(trainer, "reduce_per_replica", None)
    build = getattr(cls, "_maybe_symbolic_build", None)
    if cls is None or reduce is None or build is None:
        return False
    if not getattr(reduce, "_pytest_tpu", False):
        trainer.reduce_per_replica = _vector_logs(reduce)
    if not getattr(build, "_pytest_tpu", False):
        cls._maybe_symbolic_build = _build_from_local_batch(build)
    return True


def is_multi_worker(strategy: Any) -> bool:
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and bool(
        strategy.extended._in_multi_worker_mode()  # what Keras' own trainer checks
    )


def _marked(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn._pytest_tpu = True  # type: ignore[attr-defined]  # patched once per process
    return fn


def _vector_logs(reduce: Callable[..., Any]) -> Callable[..., Any]:
    """``reduce_per_replica`` that averages a scalar log as a vector of one (a scalar again)."""

    def reduce_per_replica(values: Any, strategy: Any, reduction: Any) -> Any:
        if reduction in ("auto", "mean") and is_multi_worker(strategy):
            values = _scalars_as_vectors(values, strategy)
        return reduce(values, strategy, reduction)

    return _marked(reduce_per_replica)


def _scalars_as_vectors(values: Any, strategy: Any) -> Any:
    import tensorflow as tf

    def as_vector(tensor: Any) -> Any:
        return tf.reshape(tensor, [1]) if tensor.shape.rank == 0 else tensor

    # strategy.run reshapes every replica's value, whether ``value`` is per-replica or not.
    return tf.nest.map_structure(lambda value: strategy.run(as_vector, args=(value,)), values)


def _build_from_local_batch(build: Callable[..., Any]) -> Callable[..., Any]:
    """``_maybe_symbolic_build`` that learns the shapes from this worker's first replica."""

    def maybe_symbolic_build(self: Any, iterator: Any = None, data_batch: Any = None) -> Any:
        strategy = self._distribute_strategy
        if strategy is None or iterator is None or not is_multi_worker(strategy):
            return build(self, iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:
            data_batch = _first_replica(next(batches), strategy)
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    return _marked(maybe_symbolic_build)


def _first_replica(batch: Any, strategy: Any) -> Any:
    """Each per-replica part of ``batch`` as its first local value (same shapes, no collective)."""
    import tensorflow as tf

    def local(value: Any) -> Any:
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    return tf.nest.map_structure(local, batch)
