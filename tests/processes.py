"""Helpers for tests that start worker processes: which pids a run announced, which still run."""

from __future__ import annotations

import re
import signal


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
