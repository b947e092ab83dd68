"""The gate's calibration kernel, timed right before every round of a benchmark.

A shared machine's speed drifts within seconds, so the kernel is timed next to each round: round
``i``'s ratio ``bench_i / ref_i`` then carries the work of the code under test with the machine's
momentary speed divided out, wherever the kernel tracks the benchmark. Whether it does is decided
later per benchmark (``measure.measure`` uses the ratios only where they are more certain than the
raw rounds), so a kernel never makes a verdict worse.

Both benchmark styles get the same treatment: pytest-benchmark runs every round, in ``pedantic``
and in ``benchmark(fn)`` alike, through a runner made by the fixture instance's ``_make_runner``;
wrapping that method on the one instance times the kernel before each runner call, the finest
granularity pytest-benchmark has (one round of its ``iterations`` loops).

The kernel suits the benchmark: a TensorFlow chain on the benchmark's device for tests that use a
device, and for rounds of milliseconds that do TensorFlow work; a small numpy chain for the rest,
numpy and pure Python in a process that loaded TensorFlow included. Whether a round is TensorFlow
work is measured in the benchmark's first runner call (``tfwork``: TensorFlow made a tensor, or
its own threads worked): by size alone, a 5 ms ``np.sort`` in a TensorFlow process got the
TensorFlow kernel, which swung 10 % between saved runs while the sort moved 2 % (new-user trial
27). Where that cannot be measured, size alone decides, as before. The kind the saved runs used
wins over both, so that their ratios stay comparable. The kernel is repeated so that it takes
about half a round, within bounds. Never imports TensorFlow; imports numpy only when a kernel is
built.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_tpu.gate import tfwork

Kernel = Callable[[], object]
Timer = Callable[[], float]

NUMPY_SIZE = 32  # one numpy unit: about ten microseconds on one core
NUMPY_STEPS = 2
TF_SIZE = 128  # one TensorFlow unit: well under a millisecond, dispatch included
TF_STEPS = 4
WARM_CALLS = 3  # trace, compile and warm caches outside any measured round
KERNEL_SHARE = 0.5  # kernel time per round relative to the round
MIN_KERNEL_S = 20e-6
MAX_KERNEL_S = 0.02
TF_MIN_ROUND_S = 0.002  # shorter rounds are numpy-sized: no TensorFlow kernel


def _tf_kernel(device: str) -> Kernel:
    import tensorflow as tf

    with tf.device(device):
        x0 = tf.random.stateless_normal((TF_SIZE, TF_SIZE), seed=(1, 2))
        w = tf.random.stateless_normal((TF_SIZE, TF_SIZE), seed=(3, 4)) / TF_SIZE**0.5

    def steps() -> Any:
        with tf.device(device):
            x = x0
            for _ in range(TF_STEPS):  # each step consumes the last: nothing to hoist
                x = tf.tanh(tf.matmul(x, w))
            return tf.reduce_sum(x)

    chain = tf.function(steps)
    return lambda: chain().numpy()  # .numpy() waits for the device


def _numpy_kernel() -> Kernel:
    import numpy as np

    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((NUMPY_SIZE, NUMPY_SIZE))
    w = rng.standard_normal((NUMPY_SIZE, NUMPY_SIZE)) / NUMPY_SIZE**0.5

    def chain() -> object:
        x = x0
        for _ in range(NUMPY_STEPS):
            x = np.tanh(x @ w)
        return float(x.sum())

    return chain


@dataclass
class Built:
    """A warmed kernel and how long one call of it takes."""

    kind: str
    call: Kernel
    unit_s: float


class Kernels:
    """One warmed kernel per kind for the whole session (a TF kernel costs a graph trace)."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self._built: dict[str, Built] = {}

    def choose(
        self, device: str | None, round_s: float, prefer: str = "", tf_work: bool | None = None
    ) -> Built:
        """The kernel for a benchmark on ``device`` whose rounds take about ``round_s``;
        ``tf_work`` tells whether its first call did TensorFlow work (None: not known).

        ``prefer`` is the kind its saved runs used: kept when it can be, so that ratios stay
        comparable (a first round that happened to be slow must not switch the kernel).
        """
        tf_loaded = "tensorflow" in sys.modules  # never import TensorFlow just to calibrate
        # Unknown (no /proc, or no tensor counter) is the rule of before: by size alone.
        tf_sized = round_s >= TF_MIN_ROUND_S and tf_work is not False
        use_tf = tf_loaded and (device is not None or tf_sized)
        numpy_kind = f"numpy:{NUMPY_SIZE}x{NUMPY_STEPS}"
        if prefer == numpy_kind:
            use_tf = False
        elif prefer.startswith("tf:") and prefer.endswith(f":{TF_SIZE}x{TF_STEPS}") and tf_loaded:
            use_tf, device = True, prefer[3:].rsplit(":", 1)[0]
        device = device or "/device:CPU:0"
        # The size is part of the kind: ratios to different kernels are different units.
        kind = (
            f"tf:{device}:{TF_SIZE}x{TF_STEPS}" if use_tf else f"numpy:{NUMPY_SIZE}x{NUMPY_STEPS}"
        )
        if kind not in self._built:
            call = _tf_kernel(device) if use_tf else _numpy_kernel()
            for _ in range(WARM_CALLS):
                call()
            start = self.timer()
            call()
            self._built[kind] = Built(kind, call, max(self.timer() - start, 1e-7))
        return self._built[kind]


@dataclass
class Recording:
    """Kernel timings (seconds per kernel call) before each runner call of one benchmark.

    The first runner call has none: it tells how long a round takes, so the kernel can be chosen
    and sized. The measured rounds are the last runner calls, so ``aligned`` takes the tail.
    """

    timings: list[float | None] = field(default_factory=list)
    kind: str = ""

    def aligned(self, rounds: int) -> list[float | None]:
        tail = self.timings[-rounds:] if rounds else []
        return [None] * (rounds - len(tail)) + tail


@dataclass
class _Sized:
    built: Built | None = None
    reps: int = 1


def _size(built: Built, round_s: float) -> int:
    target = min(MAX_KERNEL_S, max(MIN_KERNEL_S, KERNEL_SHARE * round_s))
    return max(1, round(target / built.unit_s))


def instrument(
    fixture: Any, kernels: Kernels, device: str | None, timer: Timer, prefer: str = ""
) -> Recording:
    """Make ``fixture`` (one BenchmarkFixture instance) time the kernel before every round;
    ``prefer`` is the kernel kind the benchmark's saved runs used."""
    record = Recording()
    original = getattr(fixture, "_make_runner", None)
    if not callable(original):
        return record
    sized = _Sized()

    def make_runner(function: Any, args: Any, kwargs: Any) -> Any:
        runner = original(function, args, kwargs)

        def run(loops_range: Any, timer_: Any) -> Any:
            return runner(loops_range) if timer_ is None else runner(loops_range, timer_)

        def calibrated(loops_range: Any, timer_: Any = None) -> Any:
            if sized.built is None:
                record.timings.append(None)
                watch = tfwork.Watch.start()  # read before and after: the call's timing is its own
                result = run(loops_range, timer_)
                tf_work = watch.saw_tensorflow()
                duration = result[0] if isinstance(result, tuple) else result
                count = len(loops_range) if loops_range else 1
                sized.built = kernels.choose(device, float(duration) / count, prefer, tf_work)
                sized.reps = _size(sized.built, float(duration))
                record.kind = sized.built.kind
                return result
            start = timer()
            for _ in range(sized.reps):
                sized.built.call()
            record.timings.append((timer() - start) / sized.reps)
            return run(loops_range, timer_)

        return calibrated

    fixture._make_runner = make_runner
    return record
