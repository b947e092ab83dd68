"""The gate's calibration kernel, timed round by round beside a benchmark.

A shared machine's speed drifts on a timescale of seconds, within one process too, so a kernel
timed only before and after a benchmark tells little about the rounds in between. Instead the
kernel runs untimed-by-pytest-benchmark in ``pedantic``'s ``setup``, immediately before every
round, timed with the benchmark's own timer: round ``i``'s ratio ``bench_i / ref_i`` then carries
the work of the code under test with most of the machine's momentary speed divided out.
``benchmark(fn)`` (automatic loops, no per-round hook) keeps the kernel before and after instead,
marked as not interleaved.

Never imports TensorFlow (only uses it when the test already did) and imports numpy only when a
kernel is built.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Kernel = Callable[[], object]
Timer = Callable[[], float]

# Same kind of op as a typical TF benchmark (matmul then tanh, each step consuming the last), sized
# to about 40 ms with one TF thread here: long enough that the timer's granularity and the call's
# fixed cost are small, short enough to keep the session's length reasonable.
TF_SIZE = 384
TF_STEPS = 36
# Pure-Python/numpy benchmarks are short; a kernel of a few milliseconds keeps their tests fast.
NUMPY_SIZE = 96
NUMPY_STEPS = 12
WARM_CALLS = 3  # trace, compile and warm caches outside any measured round
FALLBACK_ROUNDS = 8  # kernel timings before, and again after, a benchmark(fn) call


def _tf_kernel(device: str) -> Kernel:
    import tensorflow as tf

    with tf.device(device):
        x0 = tf.random.stateless_normal((TF_SIZE, TF_SIZE), seed=(1, 2))
        w = tf.random.stateless_normal((TF_SIZE, TF_SIZE), seed=(3, 4)) / TF_SIZE**0.5
        count = tf.constant(TF_STEPS)

    def steps_of(steps: Any) -> Any:
        with tf.device(device):
            x = x0
            for _ in tf.range(steps):  # a loop in the graph: one step cannot be hoisted
                x = tf.tanh(tf.matmul(x, w))
            return tf.reduce_sum(x)

    chain = tf.function(steps_of)
    return lambda: chain(count).numpy()


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


class Kernels:
    """One warmed kernel per device for the whole session (building one costs a graph trace)."""

    def __init__(self) -> None:
        self._built: dict[str, Kernel] = {}

    def get(self, device: str | None) -> Kernel:
        tf_loaded = "tensorflow" in sys.modules  # never import TensorFlow just to calibrate
        key = f"tf:{device or 'cpu'}" if tf_loaded else "numpy"
        if key not in self._built:
            kernel = _tf_kernel(device or "/device:CPU:0") if tf_loaded else _numpy_kernel()
            for _ in range(WARM_CALLS):
                kernel()
            self._built[key] = kernel
        return self._built[key]


def time_kernel(kernel: Kernel, timer: Timer, rounds: int) -> list[float]:
    """``rounds`` timings of ``kernel`` with ``timer``."""
    samples = []
    for _ in range(rounds):
        start = timer()
        kernel()
        samples.append(timer() - start)
    return samples


@dataclass
class Recording:
    """The kernel timings taken while one benchmark ran."""

    samples: list[float] = field(default_factory=list)
    interleaved: bool = False
    warmup: int = 0

    def aligned(self, rounds: int) -> list[float]:
        """Per-round timings, one per measured round (warm-up rounds' timings dropped)."""
        return self.samples[self.warmup : self.warmup + rounds]


def _chained(
    setup: Callable[[], Any] | None, kernel: Kernel, timer: Timer, out: list[float]
) -> Any:
    """``setup`` followed by one timed kernel call; returns what ``setup`` returned.

    The kernel runs last, so it sits right next to the round it calibrates.
    """

    def calibrated_setup() -> Any:
        value = setup() if setup is not None else None
        out.extend(time_kernel(kernel, timer, 1))
        return value  # pytest-benchmark reads (args, kwargs) from it when truthy

    return calibrated_setup


def instrument(fixture: Any, kernel: Callable[[], Kernel], timer: Timer) -> Recording:
    """Make ``fixture`` (a BenchmarkFixture) time the kernel beside its rounds.

    Wraps the instance's ``pedantic`` (a kernel call in ``setup`` before every round) and
    ``_raw``, the method ``benchmark(fn)`` runs (``__call__`` cannot be replaced per instance):
    there the kernel runs before and after, the best that automatic loops allow.
    """
    record = Recording()
    _wrap_pedantic(fixture, kernel, timer, record)
    _wrap_raw(fixture, kernel, timer, record)
    return record


def _wrap_pedantic(
    fixture: Any, kernel: Callable[[], Kernel], timer: Timer, rec: Recording
) -> None:
    original = fixture.pedantic

    def pedantic(  # pytest-benchmark's signature, so positional calls keep working
        target: Any,
        args: Any = (),
        kwargs: Any = None,
        setup: Any = None,
        teardown: Any = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        # pytest-benchmark refuses a setup with iterations > 1; a disabled fixture has no rounds.
        if iterations == 1 and not getattr(fixture, "disabled", False):
            rec.interleaved, rec.warmup = True, warmup_rounds
            setup = _chained(setup, kernel(), timer, rec.samples)
        return original(
            target,
            args=args,
            kwargs=kwargs,
            setup=setup,
            teardown=teardown,
            rounds=rounds,
            warmup_rounds=warmup_rounds,
            iterations=iterations,
        )

    fixture.pedantic = pedantic


def _wrap_raw(fixture: Any, kernel: Callable[[], Kernel], timer: Timer, rec: Recording) -> None:
    original = getattr(fixture, "_raw", None)
    if not callable(original):
        return

    def raw(*args: Any, **kwargs: Any) -> Any:
        if getattr(fixture, "disabled", False):
            return original(*args, **kwargs)
        before = time_kernel(kernel(), timer, FALLBACK_ROUNDS)
        try:
            return original(*args, **kwargs)
        finally:
            rec.samples = before + time_kernel(kernel(), timer, FALLBACK_ROUNDS)

    fixture._raw = raw
