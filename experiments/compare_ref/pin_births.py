"""Does pinning hurt a benchmark whose calls start threads of their own?

``pytest_tpu.sameref.pinning`` pins every thread of both sides from a benchmark's second round
on; a thread born during a round is pinned only at the next round. A thread inherits the cores
of the thread that starts it, so a thread that lives and dies within one round (a ``tf.data``
iterator's, or the compiler's for a function traced anew each call) runs all its life on the one
core of the thread that started it, beside it.

Two parts:

1. ``births``: in this process, a ``tf.data`` pipeline built and iterated in each call, 12 calls
   with every thread pinned as a same-job session pins them and 12 without; a watcher thread
   lists the threads born during the calls, with the cores each had at birth.
2. ``sessions``: in a throwaway git repository holding that pipeline as a ``benchmark.pedantic``
   test (20 rounds), ``--compare-ref=HEAD`` sessions of its first pair only
   (``--tpu-compare-ref-rounds=1``), pinned and unpinned alternating. Unpinned is a
   ``conftest.py`` of the repository that makes the head choose no shared core (then neither
   side pins). Prints each session's smallest detectable change and the spread of the head's
   round times (pytest-benchmark's IQR), then their medians.

    python experiments/compare_ref/pin_births.py births
    python experiments/compare_ref/pin_births.py sessions --sessions 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import cast

PIPELINE = """
import numpy as np
import tensorflow as tf

FEATURES = np.random.default_rng(1).standard_normal((4000, 16)).astype("float32")
LABELS = np.random.default_rng(2).integers(0, 10, size=4000).astype("int64")


def pipeline():
    ds = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS))
    ds = ds.map(lambda f, l: (f * 2.0 + 1.0, l)).batch(64)
    return sum(1 for _ in ds)
"""

TEST = (
    PIPELINE
    + """

def test_tfdata_pipeline(benchmark):
    benchmark.pedantic(pipeline, rounds=20, warmup_rounds=2)
"""
)

UNPINNED = """
import os

if os.environ.get("PIN_BIRTHS_UNPINNED"):
    import pytest_tpu.sameref.plugin as plugin

    plugin.shared_core = lambda: None  # no shared core: neither side pins
"""


def births() -> None:
    from pytest_tpu.sameref.pinning import Pin, shared_core

    space: dict[str, object] = {}
    exec(PIPELINE, space)
    pipeline = cast(Callable[[], int], space["pipeline"])
    seen: dict[str, tuple[str, tuple[int, ...]]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for tid in os.listdir("/proc/self/task"):
                if tid in seen:
                    continue
                try:
                    name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
                    seen[tid] = (name, tuple(sorted(os.sched_getaffinity(int(tid)))))
                except OSError:
                    continue  # it ended before it was read
            time.sleep(0.0005)

    threading.Thread(target=watch, daemon=True).start()
    pipeline(), pipeline()
    for label, core in (("pinned", shared_core()), ("unpinned", None)):
        pin, before, times = Pin(core), set(seen), []
        for _ in range(12):
            pin.before_round()
            start = time.perf_counter()
            pipeline()
            times.append(time.perf_counter() - start)
        pin.release()
        time.sleep(0.05)
        born = Counter(seen[tid] for tid in set(seen) - before)
        print(f"{label}: calls {[round(t * 1000) for t in times]} ms")
        for (name, cores), count in sorted(born.items()):
            print(f"  {count:3d} thread(s) {name!r} born with cores {list(cores)}")
    stop.set()


def session(repo: Path, unpinned: bool, out: Path) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "PIN_BIRTHS_UNPINNED"}
    if unpinned:
        env["PIN_BIRTHS_UNPINNED"] = "1"
    args = ["--compare-ref=HEAD", "--fail-on-regression=5%", "--tpu-compare-ref-rounds=1"]
    command = [sys.executable, "-m", "pytest", "tests", "-p", "no:randomly", *args]
    done = subprocess.run(
        [*command, f"--tpu-report={out}"], cwd=repo, env=env, capture_output=True, text=True
    )
    (row,) = json.loads(out.read_text())["comparison"]["rows"]
    # pytest-benchmark's table: min max mean stddev median IQR, in ms.
    found = re.search(r"^test_tfdata_pipeline\s+(?:[\d.,]+\s+){5}([\d.,]+)", done.stdout, re.M)
    iqr = float(found[1].replace(",", "")) if found else float("nan")
    return float(row["detectable_pct"]), iqr


def sessions(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "tests").mkdir(parents=True)
        (repo / "tests" / "test_tfdata.py").write_text(TEST)
        (repo / "conftest.py").write_text(UNPINNED)
        for args in (["init", "-q"], ["add", "-A"]):
            subprocess.run(["git", *args], cwd=repo, check=True)
        subprocess.run(
            ["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "tf.data"],
            cwd=repo, check=True,
        )  # fmt: skip
        found: dict[str, list[tuple[float, float]]] = {"pinned": [], "unpinned": []}
        for index in range(count):
            for label in found:
                reading = session(repo, label == "unpinned", Path(tmp) / f"{label}-{index}.json")
                found[label].append(reading)
                print(f"{index + 1} {label}: detects {reading[0]:.1f}%, IQR {reading[1]:.1f} ms")
        for label, readings in found.items():
            detects, iqrs = zip(*readings, strict=True)
            print(
                f"{label}: detectable median {statistics.median(detects):.1f}% "
                f"({min(detects):.1f}-{max(detects):.1f}), head rounds' IQR median "
                f"{statistics.median(iqrs):.1f} ms ({min(iqrs):.1f}-{max(iqrs):.1f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("births", "sessions"))
    parser.add_argument("--sessions", type=int, default=10, help="of each kind (sessions)")
    options = parser.parse_args()
    births() if options.part == "births" else sessions(options.sessions)


if __name__ == "__main__":
    main()
