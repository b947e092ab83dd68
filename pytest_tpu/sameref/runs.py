"""Same-job comparison by whole runs, for devices that admit one process at a time (a TPU).

Rounds cannot alternate when the base and the head cannot both hold the device, so whole short
runs alternate instead: the base runs once before the head's session and once after it (base,
head, base). The head is compared with the two base runs by the stored-baseline statistics: the
base runs are a history of two, which measures how much runs differ in this job, and bracketing
the head cancels a drift that is linear in time.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Row, Side, compare_one
from pytest_tpu.gate.history import RunSummary, summarize
from pytest_tpu.results import BenchResult

RUN_TIMEOUT_S = 6 * 3600.0  # one whole base run of the suite: bounded, but generously


def run_base(
    args: Sequence[str], cwd: Path, env: Mapping[str, str], report: Path, log: Path
) -> str:
    """Run the base session once, to the end; returns "" or why it measured nothing."""
    with open(log, "ab") as out:
        try:
            subprocess.run(
                [*args, f"--benchmark-json={report}"],
                cwd=cwd,
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"the base run took longer than {RUN_TIMEOUT_S:g} s"
    return "" if report.is_file() else "the base run wrote no results"


def base_samples(report: Path) -> dict[str, list[float]]:
    """Each benchmark's rounds from a pytest-benchmark JSON file (by node id)."""
    try:
        document: Any = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, list[float]] = {}
    for entry in document.get("benchmarks", []) if isinstance(document, dict) else []:
        name, data = entry.get("fullname"), entry.get("stats", {}).get("data")
        if isinstance(name, str) and isinstance(data, list) and data:
            found[name] = [float(x) for x in data if isinstance(x, int | float)]
    return found


def _side(nodeid: str, runs: Sequence[RunSummary]) -> Side:
    return Side(nodeid=nodeid, runs=tuple(runs))


def build_rows(
    head: Sequence[BenchResult],
    head_failed: Sequence[str],
    base_runs: Sequence[Mapping[str, Sequence[float]]],
    threshold: float,
    own: Mapping[str, float] | None = None,
) -> list[Row]:
    """Rows of the head's results against the base's whole runs (``own``: a benchmark's own
    time threshold, by node id)."""
    rows: list[Row] = []
    for result in head:
        summaries = [s for run in base_runs if (s := summarize(run.get(result.nodeid, ())))]
        if not summaries:
            rows.append(
                Row(
                    nodeid=result.nodeid,
                    status="new",
                    reason="not measured on the base side (absent there, or it failed)",
                )
            )
            continue
        current = summarize(result.samples)
        assert current is not None  # passed results have rounds
        base, head_side = _side(result.nodeid, summaries), _side(result.nodeid, [current])
        row = compare_one(base, head_side, (own or {}).get(result.nodeid, threshold), False)
        source = row.noise_source.replace("saved runs", "whole base runs around this one")
        rows.append(replace(row, noise_source=source))
    rows += [Row(nodeid=nodeid, status="failed") for nodeid in head_failed]
    measured = {result.nodeid for result in head} | set(head_failed)
    seen = {nodeid for run in base_runs for nodeid in run}
    rows += [Row(nodeid=nodeid, status="missing") for nodeid in sorted(seen - measured)]
    return rows
