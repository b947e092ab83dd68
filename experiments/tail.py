"""Slow calls in the tail: does the gate fail them, and does the tail check fail unchanged code?

Builds a throwaway git repository with two workloads that make every 5th call do several times
the work of the others (a cache that misses now and then): a pure-Python function of about 2 ms
(both pytest-benchmark styles) and a Keras MLP's ``predict_on_batch`` (``benchmark(fn)``). Three
commits: the base, an A/A head (a comment changed) and a tail head. Then, ``--repeats`` times
each:

- stored baseline: five runs of the base saved, each head compared with ``--compare``;
- same job: each head compared with ``--compare-ref`` to the base.

Prints per mode, workload, style and arm how often the gate failed, how often on the mean of all
rounds, and the median change. Run it alone: it measures the machine it runs on.

    python experiments/tail.py --repeats 10 --threshold 5 --out tail.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

WORK = """
import itertools

import numpy as np
import pytest

EVERY = {every}  # every EVERY-th call is slow (0: none)
MISS = 3.5  # how many times the work a slow call does
calls = itertools.count()
# {comment}


def slow_now():
    return bool(EVERY) and next(calls) % EVERY == 0


def python_work():
    total = 0
    for i in range(int(40000 * (MISS if slow_now() else 1))):
        total += i % 7
    return total


@pytest.fixture(scope="module")
def mlp():
    import keras

    model = keras.Sequential(
        [keras.Input((256,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)]
    )
    x = np.random.default_rng(0).standard_normal((256, 256)).astype("float32")
    return model, x


def test_python_fn(benchmark):
    benchmark(python_work)


def test_python_pedantic(benchmark):
    benchmark.pedantic(python_work, rounds=100, warmup_rounds=2)


def test_keras_fn(benchmark, mlp):
    model, x = mlp

    def predict():
        for _ in range(round(MISS) if slow_now() else 1):
            model.predict_on_batch(x)

    benchmark(predict)
"""
ARMS = {"aa": (0, "a comment changed"), "tail": (5, "")}
EXPECTED = {"python": 0.5, "keras": 0.6}  # the mean's change a 5th call 3.5x (4x) makes


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "test_tail.py").write_text(WORK.format(every=0, comment=""))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "tag", "base")
    for arm, (every, comment) in ARMS.items():
        git(repo, "checkout", "-q", "base")
        (repo / "test_tail.py").write_text(WORK.format(every=every, comment=comment))
        git(repo, "commit", "-qam", arm)
        git(repo, "tag", arm)
    git(repo, "checkout", "-q", "base")
    return repo


def pytest_run(repo: Path, *args: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "pytest", "test_tail.py", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run([*command, *args], cwd=repo, capture_output=True, text=True)
    return done.returncode, done.stdout


def rows(report: Path) -> list[dict[str, object]]:
    if not report.exists():
        return []
    return list(json.loads(report.read_text())["comparison"]["rows"])


def compare(repo: Path, mode: str, arm: str, threshold: float, index: int) -> list[dict]:
    git(repo, "checkout", "-q", arm)
    report = repo / "report.json"
    report.unlink(missing_ok=True)
    against = ["--compare=exp"] if mode == "stored" else ["--compare-ref=base"]
    started = time.monotonic()
    code, _ = pytest_run(repo, *against, f"--fail-on-regression={threshold:g}%",
                           f"--tpu-report={report}")  # fmt: skip
    took = time.monotonic() - started
    found = []
    for row in rows(report):
        name = str(row["name"]).split("::")[-1].removeprefix("test_")
        workload, style = name.split("_")
        found.append(
            {
                "mode": mode, "arm": arm, "index": index, "workload": workload, "style": style,
                "exit": code, "verdict": row["verdict"], "regression": row["regression"],
                "statistic": row.get("statistic", ""), "change_pct": row["change_pct"],
                "seconds": took,
            }
        )  # fmt: skip
    print(f"[{mode} {arm} {index}] exit {code}, {took:.0f} s: "
          + ", ".join(f"{r['workload']}-{r['style']} {r['verdict']}"
                      f"{' (mean)' if r['statistic'] == 'mean of all rounds' else ''}"
                      for r in found), flush=True)  # fmt: skip
    return found


def table(found: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in found:
        groups[(row["mode"], row["workload"], row["style"], row["arm"])].append(row)
    out = [
        "| mode | workload | style | change | failed | failed on the mean | median change |",
        "|---|---|---|---|---|---|---|",
    ]
    for (mode, workload, style, arm), group in sorted(groups.items()):
        failed = sum(bool(r["regression"]) for r in group)
        on_mean = sum(bool(r["regression"]) and r["statistic"] == "mean of all rounds"
                      for r in group)  # fmt: skip
        changes = [r["change_pct"] for r in group if r["change_pct"] is not None]
        median = f"{statistics.median(changes):+.1f}%" if changes else "-"
        what = "same code" if arm == "aa" else f"tail (mean +{EXPECTED[workload]:.0%})"
        out.append(f"| {mode} | {workload} | {style} | {what} | {failed}/{len(group)} | "
                   f"{on_mean}/{len(group)} | {median} |")  # fmt: skip
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--modes", default="stored,same-job")
    parser.add_argument("--out", type=Path, default=Path("tail.json"))
    parser.add_argument("--keep", type=Path, help="copy the saved baseline file here at the end")
    options = parser.parse_args()
    modes = options.modes.split(",")
    found: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tail-experiment-") as folder:
        repo = make_repo(Path(folder))
        if "stored" in modes:
            for _ in range(options.history):
                code, out = pytest_run(repo, "--save-baseline=exp")
                if code != 0:
                    sys.exit(f"saving the baseline failed (exit {code}):\n{out[-2000:]}")
        for index in range(options.repeats):
            for mode in modes:
                for arm in ARMS:  # alternated: the machine's drift hits both arms alike
                    found += compare(repo, mode, arm, options.threshold, index)
                    options.out.write_text(json.dumps(found, indent=1))
        saved = repo / ".pytest-tpu" / "baselines" / "exp.json"
        if options.keep and saved.exists():
            shutil.copyfile(saved, options.keep)
    print(table(found))


if __name__ == "__main__":
    main()
