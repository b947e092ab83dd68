"""Baseline files: pytest-benchmark's saved-run JSON with pytest-tpu's keys, saved atomically.

A baseline is ``<baseline-dir>/<name>.json``. Its top level is what ``pytest --benchmark-save``
writes (``machine_info`` and ``commit_info`` from pytest-benchmark's own hooks, ``benchmarks``
with ``stats`` and ``options``, ``datetime``, ``version``), so ``pytest-benchmark compare`` reads it
and ``--benchmark-compare`` against it sees the same machine. pytest-tpu adds a ``pytest_tpu``
section (schema, session environment, benchmarks left out, how many runs are kept) and, per
benchmark, its environment key and ``history``: the summaries of its last runs
(``history.RunSummary``), from which the gate measures how much sessions differ. Saving merges:
a benchmark not run this time keeps its entry, one run again gets its summary appended (or a fresh
history when its environment changed). Files are data: parsed as JSON only, validated with limits
before anything trusts them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_tpu.files import write_text_atomic
from pytest_tpu.gate.compare import Side, incompatibility
from pytest_tpu.gate.history import DEFAULT_KEEP, RunSummary, sessions

# Reading is ``loading``'s; callers know ``load`` as part of the baseline.
from pytest_tpu.gate.loading import SCHEMA, SECTION, Baseline, BaselineError
from pytest_tpu.gate.loading import load as load
from pytest_tpu.parsers import parse_baseline_name
from pytest_tpu.results import BenchResult

GIT_TIMEOUT = 5.0
# extra_info fields that make up a benchmark's environment key.
BENCH_FIELDS = (
    "accelerator",
    "device",
    "replicas",
    "jit_compile",
    "dtype",
    "batch_size",
    "workload_size",
    "threads",
)


def baseline_path(directory: Path, name: str) -> Path:
    """The file of baseline ``name``; refuses names that could leave ``directory``."""
    try:
        parse_baseline_name(name)
    except argparse.ArgumentTypeError as exc:
        raise BaselineError(str(exc)) from None
    path = directory / f"{name}.json"
    if path.resolve().parent != directory.resolve():
        raise BaselineError(f"baseline name {name!r} leaves the baseline directory {directory}")
    return path


def list_names(directory: Path) -> list[str]:
    """Names of the baselines saved in ``directory``."""
    if not directory.is_dir():
        return []
    return sorted(path.stem for path in directory.glob("*.json") if path.is_file())


def check_writable(directory: Path) -> str | None:
    """Why baselines cannot be written to ``directory``, or None when they can."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-", delete=True):
            pass
    except OSError as exc:
        return f"baseline directory {directory} is not writable: {exc.strerror or exc}"
    return None


# --------------------------------------------------------------------------- environment


def session_environment(rootdir: Path) -> dict[str, Any]:
    """The environment every benchmark of this session shares (never imports TensorFlow)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
    }
    tf = sys.modules.get("tensorflow")
    version = getattr(tf, "__version__", None)
    if isinstance(version, str):
        env["tensorflow"] = version
        env["tf_minor"] = ".".join(version.split(".")[:2])
        env.update(_tf_threads(tf))
    env.update(git_info(rootdir))
    return env


def _tf_threads(tf: Any) -> dict[str, Any]:
    try:
        intra = tf.config.threading.get_intra_op_parallelism_threads()
        inter = tf.config.threading.get_inter_op_parallelism_threads()
    except Exception:  # a stripped or mocked TensorFlow: the key simply lacks threads
        return {}
    return {"threads": f"intra={intra},inter={inter}"}


def cpu_model() -> str:
    """The CPU's model name (``platform.processor()`` is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_info(rootdir: Path) -> dict[str, Any]:
    """Commit and dirty flag of the checkout at ``rootdir``; empty when git cannot tell."""
    commit = _git(rootdir, "rev-parse", "HEAD")
    if not commit:
        return {}
    status = _git(rootdir, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=rootdir, capture_output=True, text=True, timeout=GIT_TIMEOUT
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def benchmark_environment(
    extra_info: Mapping[str, Any], options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The per-benchmark part of the environment key: extra_info fields and the timer."""
    plain = (str, int, float, bool)
    env = {k: extra_info[k] for k in BENCH_FIELDS if isinstance(extra_info.get(k), plain)}
    timer = (options or {}).get("timer")
    if isinstance(timer, str) and timer:
        env["timer"] = timer  # process_time and perf_counter measure different things
    return env


def side_of(
    result: BenchResult,
    environment: Mapping[str, Any],
    runs: Sequence[RunSummary],
    confirm: RunSummary | None = None,
) -> Side:
    """A current result (its run and any repetitions) as one side of a comparison."""
    return Side(
        nodeid=result.nodeid,
        runs=tuple(runs),
        metric=result.metric,
        unit=result.unit,
        higher_is_better=result.higher_is_better,
        value=result.headline,
        environment={**environment, **benchmark_environment(result.extra_info, result.options)},
        confirm=confirm,
    )


# --------------------------------------------------------------------------- save


def _stats(samples: Sequence[float], iterations: int) -> dict[str, Any]:
    """pytest-benchmark's own statistics of the rounds, so its tools read the file.

    Like pytest-benchmark's own saves (without --benchmark-save-data), the rounds themselves are
    not kept: the gate keeps its summaries in ``history``, which keeps the file small.
    """
    module: Any = importlib.import_module("pytest_benchmark.stats")
    stats = module.Stats()
    for sample in samples:
        stats.update(sample)
    data: dict[str, Any] = stats.as_dict()
    data["iterations"] = iterations  # as pytest-benchmark's own files say it
    # A round of 5e-324 s makes pytest-benchmark's ops infinite: JSON has no infinity.
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in data.items()
    }


def _benchmark_entry(
    result: BenchResult,
    environment: Mapping[str, Any],
    history: Sequence[RunSummary],
) -> dict[str, Any]:
    return {
        "group": result.group,
        "name": result.name,
        "fullname": result.nodeid,
        "params": result.params or None,
        "param": result.nodeid.partition("[")[2].rstrip("]") or None,
        "extra_info": dict(result.extra_info),
        "options": dict(result.options),
        "stats": _stats(result.samples, result.iterations),
        SECTION: {
            "environment": benchmark_environment(result.extra_info, result.options),
            "history": [run.to_json() for run in history],
        },
    }


@dataclass(frozen=True)
class NewRun:
    """What this session adds to a baseline for one benchmark."""

    result: BenchResult
    runs: tuple[RunSummary, ...]  # this session's run, then any --measure-noise repetitions


def _history(
    previous: Baseline | None, new: NewRun, environment: Mapping[str, Any], keep: int
) -> list[RunSummary]:
    """The benchmark's kept runs: the previous ones while comparable, then this session's."""
    old = previous.sides.get(new.result.nodeid) if previous else None
    kept: list[RunSummary] = []
    if old is not None:
        current_env = {**environment, **benchmark_environment(new.result.extra_info)}
        current_env.update(benchmark_environment({}, new.result.options))
        if incompatibility(old.environment, current_env) is None:
            kept = list(old.runs)
    return _trim([*kept, *new.runs], keep)


def kept_runs(
    previous: Baseline | None, new: Iterable[NewRun], environment: Mapping[str, Any], keep: int
) -> list[list[RunSummary]]:
    """The sessions' runs each benchmark of ``new`` keeps once saved (as ``save`` keeps)."""
    return [sessions(_history(previous, run, environment, keep)) for run in new]


def _trim(runs: list[RunSummary], keep: int) -> list[RunSummary]:
    """The runs of the last ``keep`` sessions (a session's noise repetitions go with it)."""
    starts = [i for i, run in enumerate(runs) if run.source == "run"]
    if len(starts) <= keep:
        return runs
    return runs[starts[-keep] :]


def build_document(
    name: str,
    new: Iterable[NewRun],
    environment: Mapping[str, Any],
    *,
    left_out: Iterable[str] = (),
    previous: Baseline | None = None,
    keep: int = DEFAULT_KEEP,
    machine_info: Mapping[str, Any] | None = None,
    commit_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON document of a baseline, merged with ``previous`` (same name) when given."""
    from pytest_benchmark import __version__ as benchmark_version

    entries = dict(previous.entries) if previous else {}
    for run in new:
        history = _history(previous, run, environment, keep)
        entries[run.result.nodeid] = _benchmark_entry(run.result, environment, history)
    return {
        "machine_info": dict(machine_info or _machine_info(environment)),
        "commit_info": dict(
            commit_info or {"id": environment.get("commit"), "dirty": environment.get("dirty")}
        ),
        "benchmarks": list(entries.values()),
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": benchmark_version,
        SECTION: {
            "schema": SCHEMA,
            "name": name,
            "environment": dict(environment),
            "left_out": sorted(set(left_out)),
            "keep": keep,
        },
    }


def _machine_info(environment: Mapping[str, Any]) -> dict[str, Any]:
    """A stand-in for pytest-benchmark's machine_info when its hooks are not at hand."""
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(),
        "system": platform.system(),
        "release": platform.release(),
        "cpu": {"brand_raw": environment.get("cpu_model", "")},
    }


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` as JSON to ``path``: readers see the old file or the new, never a mix."""
    write_text_atomic(path, json.dumps(document, indent=2, allow_nan=False))


def check_target(directory: Path, name: str) -> str | None:
    """Why baseline ``name`` cannot be written, checked before any benchmark runs."""
    path = directory / f"{name}.json"
    if path.is_symlink():
        return f"{path} is a symbolic link; baselines are written only to regular files"
    try:
        path = baseline_path(directory, name)
    except BaselineError as exc:
        return str(exc)
    if path.is_symlink():
        return f"{path} is a symbolic link; baselines are written only to regular files"
    if path.exists() and not path.is_file():
        return f"{path} exists and is not a regular file"
    return check_writable(directory)


def save(
    directory: Path,
    name: str,
    new: Iterable[NewRun],
    environment: Mapping[str, Any],
    **options: Any,
) -> Path:
    """Save this session's runs into baseline ``name``, merged with what it held."""
    path = baseline_path(directory, name)
    problem = check_target(directory, name)
    if problem:
        raise BaselineError(problem)
    document = build_document(name, new, environment, **options)
    write_atomic(path, document)
    return path
