"""A lock per device kind shared by the pytest-xdist workers of one run.

Two benchmarks timed at the same time on one device measure each other. The workers of one
``pytest -n N`` run take turns through an exclusive ``flock`` on one file per device kind, named
after the run's id, so separate sessions never wait on each other. The kernel drops the lock when
its holder dies, so a killed worker never blocks the others.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; sessions there are not serialised
    fcntl = None  # type: ignore[assignment]


CANDIDATES = 16


def lock_dir() -> Path:
    """One directory per user, so users do not share each other's lock files.

    A file, a symlink or another user's directory in the way (left over, or planted) is passed
    over for the next name in a fixed sequence, so every worker of a run still picks the same.
    """
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = Path(tempfile.gettempdir()) / f"pytest-tpu-locks-{uid}"
    names = [base, *(base.with_name(f"{base.name}-{n}") for n in range(1, CANDIDATES))]
    for candidate in names:
        if _ours(candidate, uid):
            return candidate
    raise OSError(f"pytest-tpu: no usable lock directory: {base} and its -1..-15 are all taken")


def _ours(path: Path, uid: int) -> bool:
    """A real directory owned by this user, created if missing."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and (not hasattr(os, "getuid") or info.st_uid == uid)


@contextmanager
def device_lock(run_id: str, kind: str) -> Iterator[None]:
    """Hold the lock of device ``kind`` in run ``run_id`` for the duration of the block."""
    if fcntl is None:
        yield
        return
    directory = lock_dir()
    safe_id = "".join(c for c in run_id if c.isalnum())[:64]
    with open(directory / f"{safe_id}-{kind}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
