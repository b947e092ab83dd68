"""Both sides' rounds on one core: the cores of a shared machine do not run at one speed.

Left alone, the scheduler keeps each of the two processes on "its" core, and on a virtual
machine two cores can differ by tens of percent (seen here: the same 100 µs function +50 %
slower in one process than in the other, 0-9 % once both ran on one core). Pairing neighbouring
rounds cannot divide that out, because it never changes sides. So during a benchmark's rounds
both sides pin their calling thread -- the one that runs the rounds -- to the same core. Only
that thread: TensorFlow's and BLAS's worker threads keep every core, so a multi-threaded
benchmark keeps its parallelism. A benchmark's first runner call is left unpinned, because
threads a library creates lazily there would inherit the single core. The turns already keep the
two sides from running at once, so sharing one core costs no time.
"""

from __future__ import annotations

import contextlib
import os

CORE_ENV = "PYTEST_TPU_REF_CORE"  # the shared core, in the base session's environment


def shared_core() -> int | None:
    """The core both sides use (the last one this process may run on), or None where threads
    cannot be pinned or there is only one core."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(getter(0))
    return allowed[-1] if len(allowed) > 1 else None


def core_from_env() -> int | None:
    """The core the head chose, as the base session reads it."""
    value = os.environ.get(CORE_ENV, "")
    return int(value) if value.isdigit() else None


class Pin:
    """Pins the calling thread to ``core`` from a benchmark's second round on; ``release``
    gives it back every core it had."""

    def __init__(self, core: int | None) -> None:
        self.core = core
        self.calls = 0
        self.saved: set[int] | None = None

    def before_round(self) -> None:
        self.calls += 1
        if self.core is None or self.calls < 2 or self.saved is not None:
            return
        try:
            saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {self.core})  # 0: the calling thread, on Linux
        except OSError:  # the core was taken away (a cgroup changed): run unpinned
            self.core = None
            return
        self.saved = saved

    def release(self) -> None:
        if self.saved is None:
            return
        with contextlib.suppress(OSError):  # a core taken away meanwhile: nothing to give back
            os.sched_setaffinity(0, self.saved)
        self.saved = None
