"""Files the session writes (baselines, reports, plots): whole or not at all."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Make ``path`` with ``write(temporary)``: readers see the old file or the new, never a mix.

    The temporary file lives in the same directory, so ``os.replace`` is a rename on one file
    system (atomic on POSIX and Windows); it keeps ``path``'s suffix, for writers that choose a
    format by it (matplotlib). It gets the mode a plain ``open`` would give (0644 under the usual
    umask), or the existing file's mode when it replaces one. A failed write leaves no trace.
    """
    handle, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.stem}-", suffix=f".tmp{path.suffix}"
    )
    os.close(handle)
    temporary = Path(name)
    try:
        write(temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, _mode_for(path))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """``write_atomic`` of a UTF-8 text."""
    write_atomic(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
