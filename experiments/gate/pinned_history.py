"""Would stored baselines vary less between sessions with every thread pinned, as in a same-job run?

A same-job comparison pins both sides' threads alike (``pytest_tpu.sameref.pinning``): between two
processes of the same code the TensorFlow matmul chain's ratio then varied by 0.3-0.4 % instead of
1.7-1.9 %. Stored baselines measure unpinned, and between sessions the TensorFlow work of the gate
experiment varies by several percent even on a quiet machine, which leaves every TensorFlow row
``inconclusive`` at a 5 % threshold. This saves two histories of the gate experiment's workloads
(``workloads.py``) in alternating sessions, one unpinned and one with the threads pinned during
each benchmark's rounds the way a same-job side pins them, and prints, per workload, style and mode
(raw, calibrated), the spread between the sessions of each copy (log-scale standard deviation) and
the runs' own standard error.

    python experiments/gate/pinned_history.py --sessions 6 --out DIR

Loaded into each session as a plugin (``-p pinned_history``), it pins where ``PINNED=1``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PINNED_ENV = "PINNED"
NAME_RE = re.compile(r"::test_(\w+)\[(\w+)-([abc])\]$")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Pin every thread from a benchmark's second round on, as a same-job side does."""
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if fixture is None or os.environ.get(PINNED_ENV) != "1":
        return (yield)
    from pytest_tpu.sameref.pinning import Pin, shared_core

    pin = Pin(shared_core())
    original = fixture._make_runner

    def make_runner(function: Any, args: Any, kwargs: Any) -> Any:
        runner = original(function, args, kwargs)

        def pinned(*call_args: Any) -> Any:
            pin.before_round()
            return runner(*call_args)

        return pinned

    fixture._make_runner = make_runner
    try:
        return (yield)
    finally:
        pin.release()


def session(out: Path, pinned: bool) -> str:
    env = {
        **os.environ,
        PINNED_ENV: "1" if pinned else "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    args = [
        sys.executable, "-m", "pytest", str(HERE / "workloads.py"), "-q", "-p", "no:cacheprovider",
        "-p", "pinned_history", f"--baseline-dir={out / ('pinned' if pinned else 'free')}",
        "--save-baseline=exp", "--tpu-baseline-history=50",
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def spreads(folder: Path) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
    """Per workload, style and mode: each copy's spread between sessions and mean standard error
    (log scale), from the saved history."""
    sys.path.insert(0, str(ROOT))
    from pytest_tpu.gate import baseline
    from pytest_tpu.gate.history import sessions

    found: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for nodeid, side in baseline.load(folder / "exp.json").sides.items():
        name = NAME_RE.search(nodeid)
        if not name or side.metric != "time":
            continue
        style, kind, _ = name.groups()
        runs = sessions(side.runs)
        for mode in ("raw", "calibrated"):
            parts = [getattr(run, mode) for run in runs]
            if len(parts) < 3 or any(part is None for part in parts):
                continue
            logs = [part.log for part in parts]
            se = math.sqrt(statistics.fmean(part.se**2 for part in parts))
            found[(kind, style, mode)].append((statistics.stdev(logs), se))
    return found


def shown(rows: list[tuple[float, float]]) -> str:
    return ", ".join(f"{100 * sd:.1f} %" for sd, _ in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sessions", type=int, default=6, help="sessions of each kind (3 or more for a spread)"
    )
    parser.add_argument("--out", type=Path, required=True, help="a folder for the two histories")
    options = parser.parse_args()
    for index in range(options.sessions):
        for pin in (False, True):
            print(f"[{'pinned' if pin else 'free'} {index + 1}] {session(options.out, pin)}")
    free, pinned = spreads(options.out / "free"), spreads(options.out / "pinned")
    print("| workload | style | mode | spread between sessions, free | pinned | runs' own SE |")
    print("|---|---|---|---|---|---|")
    for key in sorted(free.keys() & pinned.keys()):
        own = statistics.fmean(se for _, se in free[key] + pinned[key])
        cells = [*key, shown(free[key]), shown(pinned[key]), f"{100 * own:.1f} %"]
        print(f"| {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
