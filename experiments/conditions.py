"""Machine conditions shared by the experiments: a neighbour that keeps one core busy in bursts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def neighbour(stop: Path) -> subprocess.Popen[bytes]:
    """A process keeping one core busy in random bursts of 1-5 s, idle 1-5 s between them,
    until ``stop`` exists."""
    code = (
        "import random, time, pathlib\n"
        f"stop = pathlib.Path({str(stop)!r})\n"
        "while not stop.exists():\n"
        "    end = time.monotonic() + random.uniform(1, 5)\n"
        "    while time.monotonic() < end: pass\n"
        "    time.sleep(random.uniform(1, 5))\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])
