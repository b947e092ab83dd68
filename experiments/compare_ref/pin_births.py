"""Does pinning hurt a benchmark whose calls start threads of their own?

``pytest_tpu.sameref.pinning`` pins every thread of both sides from a benchmark's second round
on; a thread born during a round is pinned only at the next round. A thread inherits the cores
of the thread that starts it, so a thread that lives and dies within one round (a ``tf.data``
iterator's, or the compiler's for a function traced anew each call) runs all its life on the one
core of the thread that started it, beside it.

Three parts:

1. ``births``: in this process, a ``tf.data`` pipeline built and iterated in each call, 12 calls
   with every thread pinned as a same-job session pins them and 12 without; a watcher thread
   lists the threads born during the calls, with the cores each had at birth.
2. ``sessions``: in a throwaway git repository holding that pipeline (``--workload predict`` or
   ``fit``: a small Keras model's ``model.predict`` of 4,000 rows, or one epoch of
   ``model.fit`` on them) as a ``benchmark.pedantic`` test (20 rounds), ``--compare-ref=HEAD``
   sessions of its first pair only (``--tpu-compare-ref-rounds=1``), the arms in turn (``--arms``,
   all four by default): the plugin ``as is``; ``let go`` from the third round where threads
   started within the first pinned round used over 1 % of its CPU time; every thread ``pinned``
   throughout; ``unpinned``. The arms are a ``conftest.py`` of the repository, which both sides
   load, that sets ``pinning``'s thresholds or makes the head choose no shared core (then neither
   side pins). Prints each session's smallest detectable change, the spread of the head's round
   times (pytest-benchmark's IQR) and whether both sides let go, then their medians.
3. ``shares``: in this process, for that pipeline, the same dataset built once and iterated in
   each call, Keras ``model.fit`` and ``model.predict`` and the gate experiment's four workloads,
   the share of the first pinned round's CPU time that threads started or ended within it used
   (what ``Pin.churned`` compares with ``CHURN_SHARE``), and the median time of calls 4-10 kept
   pinned and released, twice each.

    python experiments/compare_ref/pin_births.py births
    python experiments/compare_ref/pin_births.py sessions --sessions 8 --workload predict \
        --arms "as is,pinned"
    python experiments/compare_ref/pin_births.py shares
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

SHARES = (
    PIPELINE
    + """
import keras

DATASET = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS)).map(lambda f, l: (f * 2.0, l))
DATASET = DATASET.batch(64)
MODEL = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
)
MODEL.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

CASES = {
    "pipeline": pipeline,
    "iterated": lambda: sum(1 for _ in DATASET),
    "fit": lambda: MODEL.fit(FEATURES, LABELS, batch_size=256, epochs=1, verbose=0),
    "predict": lambda: MODEL.predict(FEATURES, verbose=0),
    "predict500": lambda: MODEL.predict(FEATURES, batch_size=500, verbose=0),
}
"""
)

KERAS = """
import keras
import numpy as np

FEATURES = np.random.default_rng(1).standard_normal((4000, 16)).astype("float32")
LABELS = np.random.default_rng(2).integers(0, 10, size=4000).astype("int64")


def model():
    layers = [keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
    return keras.Sequential([keras.Input((16,)), *layers])


PREDICTOR, TRAINED = model(), model()
TRAINED.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def fit():
    TRAINED.fit(FEATURES, LABELS, batch_size=256, epochs=1, verbose=0)


def predict():
    PREDICTOR.predict(FEATURES, verbose=0)


def test_tfdata_pipeline(benchmark):  # the name the table parser reads
    benchmark.pedantic({call}, rounds=20, warmup_rounds=2)
"""

# The arms, switched in a conftest.py both sides load (the base inherits the environment and has
# the committed file): the plugin "as is", "let go" wherever a round's churn is over 1 %, every
# thread "pinned" throughout, or nothing pinned.
ARMS = ("as is", "let go", "pinned", "unpinned")
ARM_ENV = "PIN_BIRTHS_ARM"
SWITCH = """
import os

import pytest_tpu.sameref.pinning as pinning
import pytest_tpu.sameref.plugin as plugin

if os.environ.get("PIN_BIRTHS_ARM") == "unpinned":
    plugin.shared_core = lambda: None  # no shared core: neither side pins
elif os.environ.get("PIN_BIRTHS_ARM") == "pinned":
    pinning.CHURN_SHARE = pinning.SOME_CHURN = float("inf")  # never let go
elif os.environ.get("PIN_BIRTHS_ARM") == "let go":
    pinning.CHURN_SHARE = 0.01
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


def shares() -> None:
    import numpy as np

    from pytest_tpu.sameref.pinning import Pin, shared_core

    space: dict[str, object] = {}
    exec(SHARES, space)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))
    import workloads  # the gate experiment's

    cases = cast(dict[str, Callable[[], object]], space["CASES"])
    for kind, (make, _) in workloads.WORK.items():
        step = make()
        cases[kind] = lambda step=step: step(workloads.STEPS)
    for label, call in cases.items():
        call()  # traced, built
        for released in (False, True, False, True):
            pin, times, share = Pin(shared_core()), [], float("nan")
            for index in range(10):
                pin.after_round()
                pin.before_round(released)
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
                if index == 1:
                    share = pin._churn()  # as Pin.after_round reads it
            pin.release()
            how = "released" if released else "pinned"
            print(
                f"{label:11s} share {share:+.3f}, calls 4-10 {how:8s} median "
                f"{statistics.median(times[3:]) * 1000:.2f} ms, IQR "
                f"{float(np.subtract(*np.percentile(times[3:], [75, 25]))) * 1000:.2f} ms",
                flush=True,
            )


def session(repo: Path, arm: str, out: Path) -> tuple[float, float, bool]:
    """One A/A session's smallest detectable change, the head's rounds' IQR (ms), and whether
    both sides let the threads go (the line under the table says so)."""
    env = {**os.environ, ARM_ENV: arm}
    args = ["--compare-ref=HEAD", "--fail-on-regression=5%", "--tpu-compare-ref-rounds=1"]
    command = [sys.executable, "-m", "pytest", "tests", "-p", "no:randomly", *args]
    done = subprocess.run(
        [*command, f"--tpu-report={out}"], cwd=repo, env=env, capture_output=True, text=True
    )
    (row,) = json.loads(out.read_text())["comparison"]["rows"]
    # pytest-benchmark's table: min max mean stddev median IQR, in ms.
    found = re.search(r"^test_tfdata_pipeline\s+(?:[\d.,]+\s+){5}([\d.,]+)", done.stdout, re.M)
    iqr = float(found[1].replace(",", "")) if found else float("nan")
    return float(row["detectable_pct"]), iqr, "not pinned from their third round" in done.stdout


def sessions(count: int, workload: str, arms: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / "tests").mkdir(parents=True)
        test = TEST if workload == "pipeline" else KERAS.replace("{call}", workload)
        (repo / "tests" / "test_tfdata.py").write_text(test)
        (repo / "conftest.py").write_text(SWITCH)
        for args in (["init", "-q"], ["add", "-A"]):
            subprocess.run(["git", *args], cwd=repo, check=True)
        subprocess.run(
            ["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "tf.data"],
            cwd=repo, check=True,
        )  # fmt: skip
        found: dict[str, list[tuple[float, float, bool]]] = {arm: [] for arm in arms}
        for index in range(count):
            for label in found:
                out = Path(tmp) / f"{label.replace(' ', '-')}-{index}.json"
                reading = session(repo, label, out)
                found[label].append(reading)
                went = ", let go" if reading[2] else ""
                said = f"detects {reading[0]:.1f}%, IQR {reading[1]:.1f} ms{went}"
                print(f"{index + 1} {label}: {said}")
        for label, readings in found.items():
            detects, iqrs, gone = zip(*readings, strict=True)
            print(
                f"{label}: detectable median {statistics.median(detects):.1f}% "
                f"({min(detects):.1f}-{max(detects):.1f}), head rounds' IQR median "
                f"{statistics.median(iqrs):.1f} ms ({min(iqrs):.1f}-{max(iqrs):.1f}), "
                f"let go in {sum(gone)} of {len(gone)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("births", "sessions", "shares"))
    parser.add_argument("--sessions", type=int, default=10, help="of each arm (sessions)")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma list (sessions)")
    parser.add_argument(
        "--workload", choices=("pipeline", "predict", "fit"), default="pipeline", help="(sessions)"
    )
    options = parser.parse_args()
    if options.part == "births":
        births()
    elif options.part == "shares":
        shares()
    else:
        sessions(options.sessions, options.workload, options.arms.split(","))


if __name__ == "__main__":
    main()
