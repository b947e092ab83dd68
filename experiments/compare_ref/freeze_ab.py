"""Does each side's ``gc.freeze`` (``pytest_tpu.sameref.collector``) change a first pair's noise?

The Keras CNN's +5 % commit was caught 39/40 in r64 (before the freeze) and 25/40 in r68 and 8/16
in r72 (after it), its first pairs coarser. This runs unchanged code against itself
(``--compare-ref=base`` on the base commit of ``run.py``'s throwaway repository, no gate), the
sessions alternating with and without the freeze (``nofreeze.py``), and compares the rows one pair
of processes measured: the root mean square of their change (all of it noise here), their
interval's median width and their median detectable change. Rows that went on to new pairs (an
improvement one pair read is checked by more) are left out and counted.

    python experiments/compare_ref/freeze_ab.py --repeats 8 --workloads cnn --out ab.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run  # noqa: E402

ONE_PAIR = "one pair of processes"  # in the noise source of a row one pair measured
ARMS = ("freeze", "nofreeze")


def session(repo: Path, arm: str, report: Path) -> float:
    """One same-job session of unchanged code (``run.pytest_run``); its wall time."""
    added = {}
    if arm == "nofreeze":
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
        added = {"PYTEST_PLUGINS": "nofreeze", "PYTHONPATH": path}
    saved = {name: os.environ.get(name) for name in added}
    os.environ.update(added)  # pytest_run passes this process's environment on
    try:
        out, seconds = run.pytest_run(repo, ["--compare-ref=base", f"--tpu-report={report}"])
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    report.with_suffix(".log").write_text(out)
    return seconds


def rows_of(report: Path, arm: str, index: int) -> list[dict[str, Any]]:
    if not report.exists():
        return []
    rows = json.loads(report.read_text())["comparison"]["rows"]
    return [
        {"arm": arm, "session": index, "name": r["name"], "change": r["change_pct"],
         "low": r["ci_low"], "high": r["ci_high"], "detect": r["detectable_pct"],
         "one_pair": ONE_PAIR in str(r.get("noise_source") or "")}
        for r in rows if r.get("metric") == "time" and r.get("change_pct") is not None
    ]  # fmt: skip


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def summary(records: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| arm | rows one pair measured | left out | RMS change | median width | median detects |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        mine = [r for r in records if r["arm"] == arm]
        kept = [r for r in mine if r["one_pair"]]
        changes = [float(r["change"]) for r in kept]
        rms = math.sqrt(math.fsum(c * c for c in changes) / len(changes)) if changes else math.nan
        width = median_of([float(r["high"]) - float(r["low"]) for r in kept])
        detect = median_of([float(r["detect"]) for r in kept if r["detect"] is not None])
        lines.append(
            f"| {arm} | {len(kept)} | {len(mine) - len(kept)} | {rms:.2f}% | {width:.1f} points "
            f"| {detect:.1f}% |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8, help="sessions per arm")
    parser.add_argument("--workloads", default="cnn", help="of run.py's: matmul, cnn, numpy")
    parser.add_argument("--out", type=Path, required=True, help="the rows, as JSON")
    options = parser.parse_args()
    run.WORKLOADS_KEPT[:] = options.workloads.split(",")
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="freeze-ab-") as scratch:
        repo = Path(scratch) / "repo"
        run.make_repo(repo)
        run.git(repo, "checkout", "-q", "base")
        for index in range(options.repeats):
            # Alternating which arm goes first cancels a drift that is linear in time.
            for arm in ARMS if index % 2 == 0 else ARMS[::-1]:
                report = Path(scratch) / f"{arm}-{index}.json"
                seconds = session(repo, arm, report)
                records += rows_of(report, arm, index)
                print(f"{arm} {index}: {seconds:.0f} s", flush=True)
                options.out.write_text(json.dumps(records, indent=1))
    print("\n".join(summary(records)))


if __name__ == "__main__":
    main()
