"""How far apart fresh processes time the same numpy function that allocates megabytes per call.

New-user trial 75's ``zscore_features`` (a moving average and a z-score over 200,000 float64
values, stacked into a 4.8 MB array: several arrays of 1.6 MB or more made and freed in every
call) failed an A/A ``--compare-ref`` gate: three pairs of processes agreed on +8.3 to +10.4 %,
where other sessions' pairs of the same code read about -10, 0 and +10 %. This starts fresh
processes one after another, each timing the function's median call after a warm-up, under
three conditions:

- ``default``: glibc's allocator as every user gets it; blocks of 128 KB or more come from
  ``mmap`` and go back to the kernel when freed, so each call pays page faults on fresh pages;
- ``heap``: ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` raised past the arrays, so
  the blocks are reused from the heap (the same code, without the page faults);
- ``tensorflow``: ``default`` with TensorFlow imported first, as in a suite beside TensorFlow
  benchmarks.

The spread of the per-process medians under ``default`` is an offset between two processes with
the same code, the kind one pair of processes cannot show and a few pairs can agree on by chance.

    python experiments/alloc_offsets.py --processes 6 --size 200000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import statistics, sys, time
import numpy as np
if sys.argv[1] == "tensorflow":
    import tensorflow  # noqa: F401


def zscore_features(x, window=44):
    kernel = np.ones(window, dtype=np.float64) / window
    ma = np.convolve(x, kernel, mode="same")
    resid = x - ma
    z = (resid - resid.mean()) / resid.std()
    return np.stack([ma, z, np.abs(np.diff(x, prepend=x[0]))])


x = np.random.default_rng(2).standard_normal(int(sys.argv[2]))
for _ in range(20):
    zscore_features(x)
times = []
for _ in range(200):
    start = time.perf_counter()
    zscore_features(x)
    times.append(time.perf_counter() - start)
print(statistics.median(times))
"""

HEAP = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**32)}


def one_process(condition: str, size: int) -> float:
    """The median call of one fresh process, in seconds."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(HEAP if condition == "heap" else {})}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, condition, str(size)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--size", type=int, default=200_000)
    args = parser.parse_args()
    for condition in ("default", "heap", "tensorflow"):
        medians = [one_process(condition, args.size) for _ in range(args.processes)]
        low, high = min(medians), max(medians)
        shown = ", ".join(f"{m * 1e3:.2f}" for m in medians)
        print(
            f"{condition:10} ms per call by process: {shown}; "
            f"highest/lowest {high / low - 1:+.1%}, median {statistics.median(medians) * 1e3:.2f}"
        )


if __name__ == "__main__":
    main()
