"""Device benchmarks under pytest-xdist: measured on the workers, one at a time per device.

Two benchmarks timed at the same time on one device measure each other. The workers of one
``pytest -n N`` run take turns through an exclusive ``flock`` on one file per device kind, named
after the run's id, so separate sessions never wait on each other. The kernel drops the lock when
its holder dies, so a killed worker never blocks the others.

pytest-benchmark switches itself off under xdist. ``measure_on_worker`` switches measuring back on
for the plugin's own device benchmarks only, and keeps their figures out of pytest-benchmark's
files on the worker (each worker would write its own partial ``--benchmark-json``): they reach
the controller on the test report instead (``results.REPORT_ATTR``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.options import measuring_off

try:
    import fcntl
except ImportError:  # Windows: no flock; sessions there are not serialised
    fcntl = None  # type: ignore[assignment]


CANDIDATES = 16


def lock_dir(create: bool = True) -> Path | None:
    """One directory per user, so users do not share each other's lock files.

    A file, a symlink or another user's directory in the way (left over, or planted) is passed
    over for the next name in a fixed sequence, so every worker of a run still picks the same.
    Without ``create``: the directory in use, or None where there is none yet.
    """
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base = Path(tempfile.gettempdir()) / f"pytest-tpu-locks-{uid}"
    names = [base, *(base.with_name(f"{base.name}-{n}") for n in range(1, CANDIDATES))]
    for candidate in names:
        if _ours(candidate, uid, create):
            return candidate
        if not create and not candidate.exists():
            return None  # the sequence stops at the first free name
    if not create:
        return None
    raise OSError(f"pytest-tpu: no usable lock directory: {base} and its -1..-15 are all taken")


def _ours(path: Path, uid: int, create: bool) -> bool:
    """A real directory owned by this user, created if missing (with ``create``)."""
    try:
        if create:
            path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and (not hasattr(os, "getuid") or info.st_uid == uid)


def _safe(run_id: str) -> str:
    return "".join(c for c in run_id if c.isalnum())[:64]


@contextmanager
def device_lock(run_id: str, kind: str) -> Iterator[None]:
    """Hold the lock of device ``kind`` in run ``run_id`` for the duration of the block."""
    if fcntl is None:
        yield
        return
    directory = lock_dir()
    assert directory is not None  # created, or OSError
    with open(directory / f"{_safe(run_id)}-{kind}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_locks(run_ids: set[str]) -> None:
    """Remove the lock files of runs that have ended (on the controller, after its workers):
    one file per run and device kind would otherwise pile up in the temporary directory."""
    directory = lock_dir(create=False) if fcntl is not None and run_ids else None
    if directory is None:
        return
    for safe_id in filter(None, map(_safe, run_ids)):
        for path in directory.glob(f"{safe_id}-*.lock"):
            with contextlib.suppress(OSError):
                path.unlink()


def measure_on_worker(item: pytest.Item) -> None:
    """Measure this device benchmark on an xdist worker, unless the user turned measuring off.

    Only this test's own fixture instance changes: pytest-benchmark's session, its other
    tests and its files stay as they are.
    """
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if fixture is None or not _off_only_because_of_xdist(item.config):
        return
    fixture.disabled = False
    # The fixture hands its figures to the session's list, which the worker would save as a
    # partial file; the test report carries them to the controller instead.
    fixture._add_stats = _not_to_worker_files


def _off_only_because_of_xdist(config: pytest.Config) -> bool:
    """pytest-benchmark's own rule: off with --benchmark-disable (unless --benchmark-enable),
    skipped with --benchmark-skip; otherwise xdist alone turned it off."""
    return not measuring_off(config)


def _not_to_worker_files(stats: Any) -> None:
    """The fixture keeps its ``stats``; pytest-benchmark's worker session does not get them."""
