"""Machine conditions shared by the experiments: quiet, or neighbours that share the CPU.

- ``neighbour``: one process keeping one core busy in random bursts of 1-5 s, idle 1-5 s between
- ``steady``: one process keeping one core busy all the time
- ``both``: two bursty neighbours, each on its own random schedule, so at times both cores are busy
- ``memory``: one process copying a 256 MiB buffer, far larger than any cache, in random bursts of
  1-5 s, idle 1-5 s between: it takes one core and much of the host's memory bandwidth, the
  neighbour a data loader or another job's training step is, which slows Keras models' steps more
  than it slows a CPU-bound kernel
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_BURSTS = (
    "while not stop.exists():\n"
    "    end = time.monotonic() + random.uniform(1, 5)\n"
    "    while time.monotonic() < end: pass\n"
    "    time.sleep(random.uniform(1, 5))\n"
)
_STEADY = (
    "while not stop.exists():\n"
    "    end = time.monotonic() + 0.5\n"  # look for the stop file twice a second
    "    while time.monotonic() < end: pass\n"
)
_MEMORY = (
    # Filled by multiplication so that every page is written: a fresh bytearray's pages would
    # all read the kernel's one zero page from the cache.
    "size = 256 << 20\n"
    "source, target = bytearray(b'\\x01') * size, bytearray(size)\n"
    "while not stop.exists():\n"
    "    end = time.monotonic() + random.uniform(1, 5)\n"
    "    while time.monotonic() < end: target[:] = source\n"
    "    time.sleep(random.uniform(1, 5))\n"
)
# What each condition starts: one loop per process.
STATES = {
    "quiet": (),
    "neighbour": (_BURSTS,),
    "steady": (_STEADY,),
    "both": (_BURSTS, _BURSTS),
    "memory": (_MEMORY,),
}


def _start(loop: str, stop: Path) -> subprocess.Popen[bytes]:
    code = f"import random, time, pathlib\nstop = pathlib.Path({str(stop)!r})\n" + loop
    return subprocess.Popen([sys.executable, "-c", code])


def neighbour(stop: Path) -> subprocess.Popen[bytes]:
    """The bursty neighbour, until ``stop`` exists."""
    return _start(_BURSTS, stop)


@contextmanager
def machine(state: str, stop: Path) -> Iterator[None]:
    """The machine in ``state`` (a key of ``STATES``) until the block ends."""
    if state not in STATES:
        raise SystemExit(f"unknown machine condition {state!r}; valid: {', '.join(STATES)}")
    busy = [_start(loop, stop) for loop in STATES[state]]
    try:
        yield
    finally:
        stop.touch()
        for process in busy:
            process.wait(timeout=30)
