"""Does the regression gate hold on a noisy machine? Save once, compare many times.

Saves one baseline of ``benchmarks/gate_workload.py``, then runs comparison sessions with the work
unchanged, 5 % larger and 10 % larger (``GATE_EXPERIMENT_EXTRA``), the three arms interleaved so
drift in the machine's speed hits them alike. Every session gates twice on the same rounds:
pytest-tpu (``--compare --fail-on-regression``) and pytest-benchmark
(``--benchmark-compare-fail=median:PCT%``). Prints how often each failed per arm. pytest-tpu
decides on per-round ratios to a calibration kernel timed before every round; pytest-benchmark
on the raw rounds' medians.

    python benchmarks/gate_experiment.py --repeats 20 --threshold 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "gate_workload.py"
ARMS = (0.0, 0.05, 0.10)
OURS_FAILED = "regression gate ("
# With a private TMPDIR the sessions use their own device lock: other sessions' benchmarks may
# then run at the same time (realistic noise), but their queue never stalls the experiment.
LOCK_DIR: Path | None = None
MACHINE_RE = re.compile(r"machine ([+-][\d.]+)% vs baseline")
CHANGE_RE = re.compile(r"test_chained_matmul\[cpu\]: \w+ time ([+-][\d.]+)%")


def pytest_args(workdir: Path, timer: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(WORKLOAD),
        "-q",
        "-p",
        "no:cacheprovider",
        "--accelerator=cpu",
        f"--tpu-baseline-dir={workdir / 'baselines'}",
        f"--benchmark-storage=file://{workdir / 'pytest-benchmark'}",
        f"--benchmark-timer={timer}",
    ]


def run(args: list[str], extra: float) -> tuple[int, str]:
    env = {**os.environ, "GATE_EXPERIMENT_EXTRA": str(extra), "TF_CPP_MIN_LOG_LEVEL": "3"}
    if LOCK_DIR is not None:
        env["TMPDIR"] = str(LOCK_DIR)
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=HERE.parent)
    return done.returncode, done.stdout + done.stderr


def compare_once(base: list[str], extra: float, threshold: float, raw: Path) -> dict[str, object]:
    code, out = run(
        [
            *base,
            f"--benchmark-json={raw}",
            "--compare=experiment",
            f"--fail-on-regression={threshold:g}",
            "--benchmark-compare=0001",
            f"--benchmark-compare-fail=median:{threshold:g}%",
        ],
        extra,
    )
    ours = re.search(r"regression gate \([\d.]+%\): (\w+)", out)
    if ours is None:
        raise SystemExit(f"comparison session did not report a verdict (exit {code}):\n{out}")
    change = CHANGE_RE.search(out)
    machine = MACHINE_RE.search(out)
    return {
        "extra": extra,
        "ours_failed": ours.group(1) == "FAILED",
        "theirs_failed": "Performance has regressed" in out,
        "change": float(change.group(1)) if change else None,
        "machine": float(machine.group(1)) if machine else None,
        "calibrated": "no per-round calibration" not in out,
        "raw": str(raw),
        "exit": code,
    }


def summarize(records: list[dict[str, object]], repeats: int) -> str:
    lines = [f"{'work':>8}  {'pytest-tpu failed':>18}  {'pytest-benchmark failed':>24}"]
    for extra in ARMS:
        arm = [r for r in records if r["extra"] == extra]
        ours = sum(bool(r["ours_failed"]) for r in arm)
        theirs = sum(bool(r["theirs_failed"]) for r in arm)
        lines.append(f"{extra:>+8.0%}  {ours:>12}/{len(arm):<5}  {theirs:>18}/{len(arm):<5}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--timer", default="time.process_time")
    parser.add_argument("--output", type=Path, help="write every session's record as JSON")
    parser.add_argument("--keep", type=Path, help="keep baselines and raw rounds in this folder")
    parser.add_argument(
        "--shared-lock",
        action="store_true",
        help="wait in the machine-wide device lock queue with other sessions",
    )
    options = parser.parse_args()
    global LOCK_DIR
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gate-experiment-") as scratch:
        tmp = options.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "raw").mkdir(exist_ok=True)
        if not options.shared_lock:
            LOCK_DIR = Path(tmp) / "tmp"
            LOCK_DIR.mkdir(exist_ok=True)
        base = pytest_args(Path(tmp), options.timer)
        code, out = run(
            [
                *base,
                "--save-baseline=experiment",
                "--benchmark-save=base",
                f"--benchmark-json={tmp / 'raw' / 'base.json'}",
            ],
            0.0,
        )
        if code != 0:
            raise SystemExit(f"baseline session failed (exit {code}):\n{out}")
        records = []
        for index in range(options.repeats):
            for extra in ARMS:
                raw = Path(tmp) / "raw" / f"{index:02d}-{extra:.2f}.json"
                record = compare_once(base, extra, options.threshold, raw)
                records.append(record)
                print(f"[{index + 1}/{options.repeats}] {record}", flush=True)
    print(summarize(records, options.repeats))
    print(f"wall time: {time.monotonic() - started:.0f} s")
    if options.output:
        options.output.write_text(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()
