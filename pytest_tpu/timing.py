"""Clock, device sync and the split between the cold first call and the warm steady state.

Accelerators run asynchronously: a call returns once its work is *queued*, so reading the clock
right after it measures dispatch, not work. Every duration here is taken after a sync (waiting
on the device, or fetching a scalar result to the host, which waits on everything it depends on).

Nothing here imports TensorFlow at module level; ``thread_settings`` imports it when called.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Clock = Callable[[], float]
Sync = Callable[[], None]


def clock() -> float:
    """The benchmark clock: monotonic, highest resolution (the one pytest-benchmark uses)."""
    return time.perf_counter()


def no_sync() -> None:
    """For work whose result is already on the host (a fetched scalar waits by itself)."""


def timed(fn: Callable[[], T], sync: Sync = no_sync, now: Clock = clock) -> tuple[T, float]:
    """Run ``fn`` once; return its result and the seconds until the device was idle again."""
    start = now()
    result = fn()
    sync()
    return result, now() - start


def size_rounds_on_a_steady_call(fixture: Any) -> None:
    """Make one pytest-benchmark fixture instance size ``benchmark(fn)``'s rounds on a steady call.

    ``benchmark(fn)`` derives its number of rounds from its first runner call; a first call that
    traces or compiles (hundreds of milliseconds for a ``tf.function``) would leave a TensorFlow
    benchmark with pytest-benchmark's minimum of 5 rounds. So the first runner call is made twice
    and the second one counts. ``benchmark.pedantic`` is left alone: its rounds are given, and
    its setup may make each call's arguments. Install this before any other runner wrapper, so
    that the doubled call happens inside whatever those wrappers do around a round.
    """
    original = getattr(fixture, "_make_runner", None)
    if not callable(original):
        return

    def make_runner(function: Any, args: Any, kwargs: Any) -> Any:
        runner = original(function, args, kwargs)
        first = [True]

        def steady(*call_args: Any) -> Any:
            if first[0] and str(getattr(fixture, "_mode", "")).startswith("benchmark("):
                runner(*call_args)  # the trace or compile, not what sizes the rounds
            first[0] = False
            return runner(*call_args)

        return steady

    fixture._make_runner = make_runner


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (robust to the odd descheduled round)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass
class SyncedRounds(Generic[T]):
    """A round of work that ends with a device sync and remembers how long each call took.

    Hand an instance to ``benchmark.pedantic``: pytest-benchmark reads its clock after the call
    returns, which is after the sync, so its raw samples cover the work and not just dispatch.
    The durations kept here give the same figures when pytest-benchmark is disabled.
    """

    fn: Callable[[], T]
    sync: Sync = no_sync
    now: Clock = clock
    durations: list[float] = field(default_factory=list)

    def __call__(self) -> T:
        result, seconds = timed(self.fn, self.sync, self.now)
        self.durations.append(seconds)
        return result

    @property
    def cold_s(self) -> float:
        """Seconds of the first call: tracing, compilation and first-touch allocation."""
        if not self.durations:
            raise ValueError("no call has run yet")
        return self.durations[0]

    def steady(self, rounds: int) -> list[float]:
        """Seconds of the last ``rounds`` calls after the first (cold) one.

        After warm-up these are the steady rounds. With ``--benchmark-disable``
        pytest-benchmark runs its target once without warm-up: that call is then all there is.
        """
        return self.durations[1:][-rounds:] if rounds > 0 else []


@dataclass(frozen=True)
class Measurement:
    """A cold first call kept apart from the warm rounds that follow it."""

    cold_s: float
    samples: tuple[float, ...]  # seconds per steady-state round, warm-up rounds excluded

    @property
    def median_s(self) -> float:
        return median(self.samples)


def measure(
    fn: Callable[[], object],
    *,
    rounds: int,
    warmup: int = 1,
    sync: Sync = no_sync,
    now: Clock = clock,
) -> Measurement:
    """Time ``fn`` without pytest-benchmark: first call, ``warmup`` discarded rounds, then rounds.

    The first call pays for tracing and compilation; warm-up rounds absorb what is left of the
    start-up (allocator growth, caches, lazily built iterators) so the samples are steady.
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 and warmup >= 0, got {rounds} and {warmup}")
    runner = SyncedRounds(fn, sync, now)
    for _ in range(1 + warmup + rounds):
        runner()
    return Measurement(cold_s=runner.cold_s, samples=tuple(runner.steady(rounds)))


def thread_settings() -> dict[str, int]:
    """TensorFlow's intra- and inter-op thread pools (0: TensorFlow picks from the cores)."""
    import tensorflow as tf

    return {
        "intra_op_threads": int(tf.config.threading.get_intra_op_parallelism_threads()),
        "inter_op_threads": int(tf.config.threading.get_inter_op_parallelism_threads()),
    }
