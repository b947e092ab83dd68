"""Helpers for tests that start processes: which pids a run announced, which still run; and
what an in-process pytester session needs to count only its own warnings."""

from __future__ import annotations

import os
import re
import signal

# An in-process session (``pytester.runpytest``) asks to rewrite the asserts of this plugin,
# which the outer session imported already. Under ``python -m pytest`` the outer session found
# it on the path and rewrote it, and nothing is said; under the ``pytest`` script of an editable
# install it was imported by the install's own finder, and the inner session warns "Module
# already imported so cannot be rewritten: pytest_tpu", a warning the tests that count outcomes
# would count. It says nothing of the session under test.
NOT_REWRITTEN = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


def announced_pids(lines: list[str]) -> list[int]:
    """The worker pids the controller announced ("... worker(s) on ... (pids 12, 13)")."""
    pids = []
    for line in lines:
        match = re.search(r"worker\(s\) on .* \(pids ([\d, ]+)\)", line)
        if match:
            pids += [int(pid) for pid in match.group(1).split(",")]
    return pids


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone: it holds no resources but its exit status)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def interruptible() -> None:
    """A child's ``preexec_fn``: SIGINT back to its default. A shell's background job inherits
    SIGINT ignored; a terminal's Ctrl-C is not, and that is what the tests stand for."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Set in the environment of the sessions a test starts: their processes, the base side's among
# them (it inherits the head's environment), carry it, and no other test's do. ``make unit`` runs
# timed tests two at a time, so a pattern on command lines ("test_slow.py") would find, and a
# ``pkill`` would kill, the sessions of the test running beside this one.
OWNER_ENV = "PYTEST_TPU_TEST_OWNER"


def owned_by(owner: str) -> list[int]:
    """Live processes whose environment has ``OWNER_ENV`` set to ``owner``."""
    mark = f"{OWNER_ENV}={owner}".encode()
    return [
        pid
        for pid in pids()
        if mark in (read_proc(pid, "environ") or b"").split(b"\0") and alive(pid)
    ]


def pids() -> list[int]:
    """The processes in ``/proc`` now."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def read_proc(pid: int, name: str) -> bytes | None:
    """``/proc/PID/NAME``; None where the process is gone or not ours to read."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as handle:
            return handle.read()
    except OSError:
        return None
