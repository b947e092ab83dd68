"""What every device benchmark records besides time: peak memory, the first call, progress.

Applies to tests that use both pytest-benchmark's ``benchmark`` and this plugin's
``accelerator`` fixture, the suite's and users' own alike, and to nothing else. Only those
tests' fixture *instances* are wrapped (their ``pedantic``, and ``_raw``, which
``benchmark(fn)`` runs), the way the gate's calibration kernel is added; pytest-benchmark's
classes and other tests are untouched.

For ``benchmark.pedantic`` the bookkeeping runs in ``setup`` (untimed), before every round:
the peak-memory measurement is reset before the first measured round and progress is written
between rounds, never inside a timed call. Only the first call is timed here, with two clock
reads around the target. ``benchmark(fn)`` has no per-round hook, so its bookkeeping sits beside
each call: a clock read and a comparison, negligible next to device work.

Keys written to ``benchmark.extra_info`` (see the README):

- ``first_call_s``: seconds of the first call of the target through the fixture (the first
  warm-up round, or the first round without warm-up): tracing and compiling when the test did
  not call the function before handing it over. Timed with the rounds' timer
  (``--benchmark-timer``), so it is CPU time where the rounds are.
- ``peak_memory_bytes``, ``peak_memory_increase_bytes``, ``peak_memory_source``: see
  ``pytest_tpu.memory``; measured over the measured rounds (after warm-up).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from pytest_tpu import memory
from pytest_tpu.progress import Progress, terminal_writer
from pytest_tpu.timing import clock

USER_SETUP_ATTR = "pytest_tpu_user_setup"  # on a setup this module chained: the test's own


class Tracker:
    """The bookkeeping of one benchmark: first call, memory, progress."""

    def __init__(
        self,
        kind: str,
        device: str | None,
        progress: Progress,
        timer: Callable[[], float] = clock,
    ) -> None:
        # The first call is timed with the rounds' timer: --benchmark-timer=time.process_time
        # rounds beside a wall-clock first call let a busy neighbour fail the compile gate
        # (trial 15: +63 % to +137 % first calls, unchanged code).
        self.timer = timer
        self.peak = memory.tracker(kind, device)
        self.progress = progress
        self.first_call_s: float | None = None
        self.measuring = self.marked = False
        self.result: memory.PeakMemory | None = None

    def mark(self) -> None:
        """Note the memory in use before the first call: the base of the increase."""
        if not self.marked:
            self.peak.mark()
            self.marked = True

    def timed_target(self, target: Callable[..., Any]) -> Callable[..., Any]:
        """``target`` with its first call timed."""

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.first_call_s is not None:
                return target(*args, **kwargs)
            self.mark()
            started = self.timer()
            try:
                return target(*args, **kwargs)
            finally:
                self.first_call_s = self.timer() - started

        return call

    def before_round(self, index: int, warmup: int) -> None:
        if index > 0:
            self.progress.step()
        else:
            self.mark()
            self.progress.start()
        if index == warmup:
            self.start_memory()

    def start_memory(self) -> None:
        self.peak.start()
        self.measuring = True

    def stop(self) -> None:
        if self.measuring:
            self.result = self.peak.stop()
            self.measuring = False

    def extra_info(self) -> dict[str, object]:
        info: dict[str, object] = {}
        if self.first_call_s is not None:
            info["first_call_s"] = self.first_call_s
        if self.result is not None:
            info.update(self.result.extra_info())
        return info


def _wrap_pedantic(fixture: Any, tracker: Tracker) -> None:
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
        progress = tracker.progress
        progress.rounds, progress.warmup = rounds, warmup_rounds
        if iterations == 1:  # pytest-benchmark refuses a setup with iterations > 1
            setup = _chained(setup, tracker, warmup_rounds)
        else:
            tracker.start_memory()  # no untimed hook per round: the warm-up rounds count too
        try:
            return original(
                tracker.timed_target(target),
                args=args,
                kwargs=kwargs,
                setup=setup,
                teardown=teardown,
                rounds=rounds,
                warmup_rounds=warmup_rounds,
                iterations=iterations,
            )
        finally:
            tracker.stop()
            progress.step()
            progress.finish()

    fixture.pedantic = pedantic


def _chained(setup: Callable[[], Any] | None, tracker: Tracker, warmup: int) -> Callable[[], Any]:
    """Bookkeeping first, then the test's own setup (whatever it returns is passed on)."""
    rounds_started = [0]

    def setup_with_bookkeeping() -> Any:
        tracker.before_round(rounds_started[0], warmup)
        rounds_started[0] += 1
        return setup() if setup is not None else None

    # The test's own setup, or None: --compare-ref may call a target twice a round only where
    # the test gave no setup of its own.
    setattr(setup_with_bookkeeping, USER_SETUP_ATTR, setup)
    return setup_with_bookkeeping


def _wrap_raw(fixture: Any, tracker: Tracker) -> None:
    original = getattr(fixture, "_raw", None)
    if not callable(original):
        return

    def raw(function_to_benchmark: Any, *args: Any, **kwargs: Any) -> Any:
        timed = tracker.timed_target(function_to_benchmark)

        def counted(*a: Any, **k: Any) -> Any:
            try:
                return timed(*a, **k)
            finally:
                tracker.progress.step()

        tracker.progress.rounds = None
        tracker.start_memory()  # pytest-benchmark calibrates, warms up and runs in one go
        try:
            return original(counted, *args, **kwargs)
        finally:
            tracker.stop()
            tracker.progress.finish()

    fixture._raw = raw


def instrument(fixture: Any, tracker: Tracker) -> None:
    """Make this one fixture instance report to ``tracker``."""
    _wrap_pedantic(fixture, tracker)
    _wrap_raw(fixture, tracker)


class MeasurePlugin:
    """Registered in every session: the hook wrapper that instruments device benchmarks."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        funcargs = getattr(item, "funcargs", {})
        fixture, accelerator = funcargs.get("benchmark"), funcargs.get("accelerator")
        if (
            fixture is None
            or accelerator is None
            or getattr(fixture, "disabled", False)
            or not callable(getattr(fixture, "pedantic", None))
        ):
            return (yield)
        write, tty = terminal_writer(self.config)
        label = item.nodeid.split("::", 1)[-1]
        devices = getattr(accelerator, "devices", ())
        timer = getattr(fixture, "_timer", None)
        tracker = Tracker(
            str(getattr(accelerator, "kind", "cpu")),
            devices[0] if devices else None,
            Progress(label, write, rounds=None, tty=tty),
            timer if callable(timer) else clock,
        )
        instrument(fixture, tracker)
        try:
            return (yield)
        finally:
            fixture.extra_info.update(tracker.extra_info())
