"""A machine-wide lock per device kind, held while a benchmark runs.

Two benchmarks timed at the same time on one device measure each other. pytest-xdist workers,
and separate pytest sessions on one shared machine, take turns through an exclusive ``flock`` on
one file per device kind. The kernel drops the lock when its holder dies, so a killed session
never blocks the next one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; sessions there are not serialised
    fcntl = None  # type: ignore[assignment]


def lock_dir() -> Path:
    """One directory per user, so users do not share (or block on) each other's locks."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"pytest-tpu-locks-{uid}"


@contextmanager
def device_lock(kind: str) -> Iterator[None]:
    """Hold the lock of device ``kind`` for the duration of the block."""
    if fcntl is None:
        yield
        return
    directory = lock_dir()
    directory.mkdir(mode=0o700, exist_ok=True)
    with open(directory / f"{kind}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
