"""Do shorter rounds resolve more in a same-job comparison, for the same work?

A same-job pair cancels what the machine does to both sides alike, and only that: a base round and
the head round beside it are paired, and whatever changes the machine's speed faster than the time
between them is not cancelled. This measures how much that costs a training step: the experiment's
Keras CNN and transformer steps (``experiments/gate/workloads.py``) as ``benchmark.pedantic`` tests
that each side runs for the same number of steps, in rounds of 20 steps (the experiment's "epoch",
as in ``run.py``) or of fewer, in a throwaway repository compared with itself
(``--compare-ref=HEAD``, A/A, one pair of processes: ``--tpu-compare-ref-rounds=1``, no
confirmation needed as nothing can fail at a 50 % threshold). Prints, per workload and steps per
round, the median smallest detectable change of the sessions' rows and the seconds their tests
took (both sides, warm-up and turns included; the models are built and traced at collection).

    .venv/bin/python experiments/compare_ref/granularity.py --sessions 3 --steps 200
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE.parent / "gate" / "workloads.py"
TEST = """
import pytest
from workloads import cnn_step, transformer_step

MAKE = {{"cnn": cnn_step, "transformer": transformer_step}}
for kind in {kinds!r}:  # built and traced at collection: no test's seconds include it
    MAKE[kind]()(1)


@pytest.mark.parametrize("per_round", {per_round!r})
@pytest.mark.parametrize("kind", {kinds!r})
def test_steps(benchmark, kind, per_round):
    step = MAKE[kind]()
    benchmark.pedantic(step, args=(per_round,), rounds={steps} // per_round, warmup_rounds=2)
"""
DURATION = re.compile(r"^([\d.]+)s call +test_steps\.py::test_steps\[(\w+)-(\d+)\]$", re.M)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path, kinds: list[str], per_round: list[int], steps: int) -> None:
    repo.mkdir()
    (repo / "workloads.py").write_text(WORKLOADS.read_text())
    (repo / "test_steps.py").write_text(TEST.format(per_round=per_round, kinds=kinds, steps=steps))
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=e@e", "-c", "user.name=e", "add", "-A")
    git(repo, "-c", "user.email=e@e", "-c", "user.name=e", "commit", "-qm", "base")


def session(repo: Path, report: Path) -> dict[tuple[str, int], dict[str, float]]:
    """One A/A session: each row's detectable change and its test's seconds."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_steps.py",
         "--compare-ref=HEAD", "--fail-on-regression=50", "--tpu-compare-ref-rounds=1",
         f"--tpu-report={report}", "--durations=0"],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    seconds = {(kind, int(k)): float(s) for s, kind, k in DURATION.findall(done.stdout)}
    found = {}
    for row in json.loads(report.read_text())["comparison"]["rows"]:
        kind, per_round = row["name"].split("[", 1)[1].rstrip("]").split("-")
        key = (kind, int(per_round))
        found[key] = {"detectable": row["detectable_pct"], "seconds": seconds.get(key, 0.0)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="steps per side and test")
    parser.add_argument("--per-round", default="20,10,5,2,1", help="steps per round, a comma list")
    parser.add_argument("--kinds", default="cnn,transformer")
    parser.add_argument("--out", type=Path, help="write every row as JSON")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    per_round = [int(k) for k in args.per_round.split(",")]
    records = []
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "repo"
        make_repo(repo, kinds, per_round, args.steps)
        for index in range(args.sessions):
            rows = session(repo, Path(scratch) / f"report-{index}.json")
            for (kind, k), row in sorted(rows.items()):
                records.append({"session": index, "kind": kind, "per_round": k, **row})
                print(f"session {index}: {kind} {k} steps a round: detects "
                      f"{row['detectable']:.1f}%, {row['seconds']:.1f} s", flush=True)  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(records, indent=1))
    table(records, args.steps)


def table(records: list[dict[str, float]], steps: int) -> None:
    cells: dict[tuple[str, int], list[dict[str, float]]] = defaultdict(list)
    for record in records:
        cells[(str(record["kind"]), int(record["per_round"]))].append(record)
    print(
        "\n| workload | steps a round | rounds a side | median detects | range | median seconds |"
    )
    print("|---|---|---|---|---|---|")
    for (kind, k), rows in sorted(cells.items(), key=lambda item: (item[0][0], -item[0][1])):
        detects = [row["detectable"] for row in rows]
        seconds = statistics.median(row["seconds"] for row in rows)
        print(f"| {kind} | {k} | {steps // k} | {statistics.median(detects):.1f}% | "
              f"{min(detects):.1f}-{max(detects):.1f}% | {seconds:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
