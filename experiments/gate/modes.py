"""Do comparison sessions read the gate experiment's benchmarks differently from saving ones?

A stored gate compares a ``--compare --fail-on-regression`` session with runs saved by
``--save-baseline`` sessions. If the two kinds of session measured the same code differently
(the gate's per-benchmark checks, its confirmations), every comparison would carry that offset.
This alternates the two kinds, every copy doing the same work, against a copy of a saved
baseline, and prints each benchmark's round time in each session against the saving sessions'
mean (``S``: saving, ``C``: comparing).

    python experiments/gate/modes.py --pairs 3 --baseline DIR/quiet/baselines/exp.json --work W
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def session(work: Path, name: str, compare: bool) -> str:
    env = {**os.environ, "GATE_ARMS": "a=0,b=0,c=0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    args = [
        sys.executable, "-m", "pytest", str(HERE / "workloads.py"), "-q", "-p", "no:cacheprovider",
        f"--baseline-dir={work / 'baselines'}",
        f"--benchmark-storage=file://{work / 'pytest-benchmark'}",
        f"--save-baseline={name}", "--tpu-baseline-history=1",
    ]  # fmt: skip
    if compare:
        args += [f"--tpu-report={work / (name + '.json')}", "--compare=exp"]
        args += ["--fail-on-regression=5"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    (work / f"{name}.log").write_text(done.stdout + done.stderr)
    return (done.stdout.strip().splitlines() or ["no output"])[-1]


def locations(work: Path, names: list[str]) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for name in names:
        saved = json.loads((work / "baselines" / f"{name}.json").read_text())
        for bench in saved["benchmarks"]:
            run = bench["pytest_tpu"]["history"][0]
            found.setdefault(bench["name"], {})[name] = run["raw"][0]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, required=True, help="a saved exp.json")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder")
    options = parser.parse_args()
    work = options.work
    (work / "baselines").mkdir(parents=True, exist_ok=True)
    shutil.copy(options.baseline, work / "baselines" / "exp.json")
    names = []
    for index in range(options.pairs):
        for kind in ("S", "C"):
            name = f"{kind}-{index:02d}"
            print(name, session(work, name, compare=kind == "C"), flush=True)
            names.append(name)
    for bench, logs in sorted(locations(work, names).items()):
        saving = [value for name, value in logs.items() if name.startswith("S")]
        mean = math.fsum(saving) / len(saving)
        cells = " ".join(
            f"{name[0]} {(math.exp(value - mean) - 1) * 100:+4.0f}%" for name, value in logs.items()
        )
        print(f"{bench:30s} {cells}")


if __name__ == "__main__":
    main()
