"""Whether a call did TensorFlow work: measured around a benchmark's first runner call, so that
only TensorFlow work gets TensorFlow's calibration kernel (``calibration``).

A process that imported TensorFlow runs numpy and pure-Python benchmarks too (any suite with
TensorFlow tests), and TensorFlow's kernel does not track them: in new-user trial 27 it swung
10 % between saved runs while a 5 ms ``np.sort`` moved 2 %. Two signs tell TensorFlow work, and
either one is enough:

- TensorFlow made a tensor. Every eager tensor takes an id from one process-wide counter, read
  through ``tensorflow.python.framework.ops.uid`` (private, so guarded: where it is gone this
  sign is unknown); an eager op, a ``tf.function`` or XLA function that returns something,
  Keras' ``predict`` and a model's eager call all take ids, numpy and Python never do.
- TensorFlow's own threads worked. Its thread pools name their threads ``tf_...``
  (``tf_Compute`` runs a ``tf.function``'s graph, ``tf_XLAEigen`` ...): this catches a
  ``tf.function`` that returns nothing, such as a training step. Thread names are all it can go
  by: the intra-op pool's threads keep the process's name, ``python``, as numpy's OpenBLAS
  helper does. Their work counts from ``THREAD_SHARE`` of the call's time on, a margin for a
  pool that wakes during other work (none seen so far, below).

Measured in one process with TensorFlow 2.21 on a quiet 2-core VM
(``python experiments/gate/tf_work.py --calls 3``), per steady call:

- a ``tf.function`` matmul chain, 3 ms: ``tf_Compute`` 1.8 ms of CPU (60 % of the call) and one
  tensor id; its first call traced on the calling thread (41 ms) beside ``tf_Compute``'s 2 ms.
- a training step (a ``tf.function`` returning nothing), 8.5 ms: ``tf_Compute`` 7.1-7.5 ms
  (84-89 %), no tensor id. On an AMD EPYC day the same step (6.3 ms) left most of its work to
  the intra-op pool (threads named ``python``): ``tf_Compute`` 0.35-0.48 ms, 5.5-7.1 % of the
  call, and one session of ``tests/test_calibration.py`` read it under 5 %.
- an eager ``tf.matmul`` chain (3.6 ms), a Keras model's eager call (2.2 ms) and an XLA
  (``jit_compile``) function (2.6 ms): nothing on ``tf_*`` threads (the calling thread and the
  unnamed intra-op threads did it all), but 18, 10 and 1 tensor ids.
- Keras ``predict``, 49 ms: ``tf_Compute`` 1.8 ms (3.7 %), 170 tensor ids.
- ``np.sort``, a 384x384 numpy matmul, pure Python and a 5 ms sleep, each right after the
  TensorFlow work: 0.00 ms on ``tf_*`` threads and no tensor id in all 16 calls, though numpy's
  OpenBLAS helper (named ``python``) spun beside several of them for their whole length.

The threads are read from ``/proc`` (``pytest_tpu.threads``). Where a sign cannot be read (no
``/proc``: not Linux; no counter), a call that shows neither is not known to be free of
TensorFlow (without the threads it may be a training step, without the counter an eager call):
``saw_tensorflow`` says None, and the kernel is chosen as before, by the round's size. Both
reads take about 0.1 ms (25 threads), before and after the call, never inside its timing.
Never imports TensorFlow.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from pytest_tpu import threads

THREAD_PREFIX = "tf_"  # TensorFlow's named pools; seen: tf_Compute, tf_XLAEigen, tf_graph_runner
# Of the call's wall time, on "tf_" threads: TensorFlow work. Measured: 5.5-89 % for a training
# step (84-89 % on an Intel Xeon day, 5.5-7.1 % on an AMD EPYC day, where the unnamed intra-op
# pool did the rest), 0.00 for numpy and Python work on both days (module docstring).
THREAD_SHARE = 0.01


def _tensor_id() -> int | None:
    """A fresh id from TensorFlow's tensor id counter (taking it moves the counter by one), or
    None where TensorFlow is not loaded or has no such counter."""
    if "tensorflow" not in sys.modules:  # never import TensorFlow to find out
        return None
    try:
        from tensorflow.python.framework import ops  # private: guarded

        return int(ops.uid())
    except Exception:  # gone or changed in some release: this sign is unknown
        return None


def _cpu() -> dict[int, int] | None:
    """Each thread's CPU time so far (ns), or None where not every thread can be seen."""
    return {tid: threads.cpu_ns(tid) for tid in threads.ids()} if threads.listed() else None


def _tf_thread_ns(before: dict[int, int]) -> int:
    """CPU time TensorFlow's named threads used since ``before`` (a thread born since, all of
    it); names are read only for threads that worked."""
    spent = 0
    for tid in threads.ids():
        used = threads.cpu_ns(tid) - before.get(tid, 0)
        if used > 0 and threads.name(tid).startswith(THREAD_PREFIX):
            spent += used
    return spent


@dataclass(frozen=True)
class Watch:
    """What TensorFlow had done when a call started; ``saw_tensorflow`` tells what it did since."""

    tensor_id: int | None
    cpu: dict[int, int] | None
    wall: float

    @classmethod
    def start(cls) -> Watch:
        return cls(_tensor_id(), _cpu(), time.perf_counter())

    def saw_tensorflow(self) -> bool | None:
        """Whether TensorFlow worked since ``start``: True, False, or None where a sign that
        could have said so was not available."""
        seconds = time.perf_counter() - self.wall
        made: bool | None = None
        if self.tensor_id is not None:
            now = _tensor_id()
            made = None if now is None else now - self.tensor_id > 1  # 1: this read's own id
        worked: bool | None = None
        if self.cpu is not None:
            worked = _tf_thread_ns(self.cpu) >= THREAD_SHARE * seconds * 1e9
        if made or worked:
            return True
        return None if made is None or worked is None else False
