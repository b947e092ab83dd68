"""What loading pytest-tpu costs: ``pytest --help`` and a plain session, with and without it.

Each round runs the same command twice, once with ``-p no:tpu`` and once with the plugin, in an
order that alternates from round to round, and keeps the ratio of the pair: a shared machine's
load drifts slowly, so a pair sees nearly the same machine. Prints the median ratio and its
spread over the rounds. Not a test: timings belong in a script, not in a pass/fail suite.

    python experiments/load_cost.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN_TESTS = "\n".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(200))
CASES = {
    "pytest --help": ["--help"],
    "plain session (200 tests)": ["-q", "-p", "no:cacheprovider", "test_plain.py"],
}


def seconds(args: list[str], cwd: Path) -> float:
    """Wall time of one ``python -m pytest`` run."""
    # Bytecode caching as on a user's machine: with PYTHONDONTWRITEBYTECODE set (as on this
    # project's CI machines), an editable install's modules are compiled from source at every
    # start, while pytest's own were compiled when pip installed them. The first, dropped round
    # writes the caches.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def ratios(args: list[str], cwd: Path, rounds: int) -> list[float]:
    """Per round: time with the plugin / time without it; alternating which runs first."""
    out = []
    for index in range(rounds + 1):
        pair = [(True, args), (False, ["-p", "no:tpu", *args])]
        if index % 2:
            pair.reverse()
        timed = {loaded: seconds(command, cwd) for loaded, command in pair}
        if index:  # the first round warms the file cache and is dropped
            out.append(timed[True] / timed[False])
    return out


def describe(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4)
    return (
        f"median {statistics.median(values):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, "
        f"min {min(values):.3f}, max {max(values):.3f} (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "test_plain.py").write_text(PLAIN_TESTS)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {rounds} pairs per case")
        for name, args in CASES.items():
            print(f"{name}: with/without pytest-tpu: {describe(ratios(args, cwd, rounds))}")


if __name__ == "__main__":
    main()
