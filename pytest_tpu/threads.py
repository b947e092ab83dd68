"""This process's threads: their ids, names and CPU time, as Linux's ``/proc`` tells them.

Shared by the same-job comparison, which pins every thread by name and by the CPU time each
used (``sameref.pinning``), and by the gate's calibration, which asks whether TensorFlow's own
threads worked during a benchmark's first call (``gate.tfwork``). Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

TASKS = "/proc/self/task"  # one entry per thread of this process (Linux)


def listed() -> bool:
    """Whether every thread of this process can be seen (``/proc``), not only the calling one."""
    return os.path.isdir(TASKS)


def ids() -> list[int]:
    """This process's thread ids, oldest first (ids grow as threads are made)."""
    try:
        return sorted(int(tid) for tid in os.listdir(TASKS) if tid.isdigit())
    except OSError:  # no /proc: only the calling thread can be named
        return [threading.get_native_id()]


def name(tid: int) -> str:
    """Thread ``tid``'s name ("" where it cannot be read, e.g. a thread that ended)."""
    try:
        # A name is cut at 15 bytes, possibly inside a character: never let that raise.
        with open(f"{TASKS}/{tid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def _thread_clock(tid: int) -> int:
    """Linux's id of thread ``tid``'s CPU clock (``CPUCLOCK_SCHED`` of that one thread), the id
    ``pthread_getcpuclockid`` gives for a thread of this process."""
    return ((~tid) << 3) | 6


def cpu_ns(tid: int) -> int:
    """The CPU time thread ``tid`` has used so far, in nanoseconds (0 where it cannot be read).

    Read from the thread's CPU clock, which counts the time slice it is running in now. /proc's
    ``schedstat`` brings a running thread's count up to date only at the next scheduler tick (4
    ms here), so a helper still running when the next round was placed read as idle for the
    round it had just worked in (trial 25: the head takes two turns in a row, and there numpy's
    OpenBLAS helper tied with an idle thread made before it, landed on the calling thread's core,
    and a 384x384 matmul ran 16 times slower in the leading process of 12 of 15 sessions)."""
    with contextlib.suppress(OSError, AttributeError):  # no such clock: a thread that ended
        return time.clock_gettime_ns(_thread_clock(tid))
    try:
        with open(f"{TASKS}/{tid}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
