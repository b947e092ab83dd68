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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_tpu.files import write_text_atomic
from pytest_tpu.gate.compare import Side, incompatibility
from pytest_tpu.gate.history import DEFAULT_KEEP, RunSummary, sessions, summarize
from pytest_tpu.options import parse_baseline_name
from pytest_tpu.results import BenchResult

SCHEMA = 3
SECTION = "pytest_tpu"
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_BENCHMARKS = 10_000
MAX_SAMPLES = 1_000_000
MAX_HISTORY = 100
MAX_DEPTH = 16
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


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Baseline:
    """A loaded, validated baseline: per benchmark its runs (oldest first) and its fields."""

    path: Path
    environment: dict[str, Any]
    sides: dict[str, Side]
    left_out: list[str] = field(default_factory=list)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # raw JSON, for merging


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


def kept_sessions(
    previous: Baseline | None, new: Iterable[NewRun], environment: Mapping[str, Any], keep: int
) -> list[int]:
    """How many sessions' runs each benchmark of ``new`` keeps once saved (as ``save`` keeps)."""
    return [len(sessions(_history(previous, run, environment, keep))) for run in new]


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


# --------------------------------------------------------------------------- load


def load(path: Path) -> Baseline:
    """Read and validate a baseline file; ``BaselineError`` names the file and the problem."""
    try:
        document = _parse(path)
        return _baseline_from(path, document)
    except BaselineError as exc:
        raise BaselineError(f"baseline file {path}: {exc}") from None


def _parse(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BaselineError(f"{size} bytes is more than the {MAX_FILE_BYTES}-byte limit")
        raw = path.read_bytes()
    except OSError as exc:
        raise BaselineError(f"cannot be read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise BaselineError("the file is empty")
    try:
        return json.loads(raw, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise BaselineError("the JSON is nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise BaselineError(f"not valid JSON (corrupt or truncated?): {exc}") from None


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number a baseline may hold")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: with a duplicate, which value counts is a guess."""
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"the key {key!r} appears twice in one object")
        document[key] = value
    return document


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a hostile file must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, level + 1) for child in children)
    return deepest


def _section(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise BaselineError("not a baseline: the top level is not a JSON object")
    section = document.get(SECTION)
    if section is None:
        if "benchmarks" in document and "machine_info" in document:
            raise BaselineError(
                "a pytest-benchmark file without pytest-tpu's keys; "
                "save baselines with --save-baseline"
            )
        raise BaselineError(f"not a pytest-tpu baseline (no {SECTION!r} section)")
    if not isinstance(section, dict):
        raise BaselineError(f"the {SECTION!r} section is not an object")
    return section


def _check_schema(section: Mapping[str, Any]) -> int:
    schema = section.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise BaselineError(f"unknown schema version {schema!r}")
    if schema > SCHEMA:
        raise BaselineError(
            f"written by a newer pytest-tpu (schema {schema}); this version reads schema {SCHEMA}"
        )
    return schema


def _baseline_from(path: Path, document: Any) -> Baseline:
    section = _section(document)
    schema = _check_schema(section)
    if _depth(document) > MAX_DEPTH:
        raise BaselineError(f"structure nested deeper than {MAX_DEPTH} levels")
    environment = section.get("environment", {})
    if not isinstance(environment, dict):
        raise BaselineError("'environment' is not an object")
    entries = document.get("benchmarks")
    if not isinstance(entries, list):
        raise BaselineError("'benchmarks' is not a list")
    if len(entries) > MAX_BENCHMARKS:
        raise BaselineError(f"{len(entries)} benchmarks, more than the limit of {MAX_BENCHMARKS}")
    sides: dict[str, Side] = {}
    raw: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(entries):
        side = _side_from(entry, index, environment, schema)
        if side.nodeid in sides:
            raise BaselineError(f"benchmark {side.nodeid!r} appears twice")
        sides[side.nodeid] = side
        raw[side.nodeid] = entry if schema >= 3 else _upgraded(entry, side)
    left_out = _left_out(section)
    return Baseline(path=path, environment=environment, sides=sides, left_out=left_out, entries=raw)


def _upgraded(entry: dict[str, Any], side: Side) -> dict[str, Any]:
    """An older schema's entry in today's form, so a merged save keeps it loadable."""
    stats = {k: v for k, v in entry.get("stats", {}).items() if k != "data"}
    ours = entry.get(SECTION, {})
    return {
        **entry,
        "stats": stats,
        SECTION: {
            "environment": ours.get("environment", {}),
            "history": [run.to_json() for run in side.runs],
        },
    }


def _left_out(section: Mapping[str, Any]) -> list[str]:
    """The node ids a baseline left out: a list of strings (a string is not a list of names)."""
    left_out = section.get("left_out", [])
    if not isinstance(left_out, list) or not all(isinstance(item, str) for item in left_out):
        raise BaselineError("'left_out' is not a list of test names")
    return [_printable(item, "'left_out'") for item in left_out]


def _printable(text: str, where: str) -> str:
    """``text`` unchanged if it holds no control characters (ANSI escapes, CR, LF), which
    would redraw or break every table the name is printed in."""
    if any(ord(char) < 32 or 127 <= ord(char) < 160 for char in text):
        raise BaselineError(f"{where} holds control characters: {text[:200]!r}")
    return text


def _numbers(value: Any, where: str) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise BaselineError(f"{where} is not a list of numbers")
    if len(value) > MAX_SAMPLES:
        raise BaselineError(f"{where} holds {len(value)} samples, more than {MAX_SAMPLES}")
    numbers = tuple(x for x in value if isinstance(x, int | float) and not isinstance(x, bool))
    if len(numbers) != len(value) or not all(0 < x < math.inf for x in numbers):
        raise BaselineError(f"{where} holds something other than positive durations")
    try:
        floats = tuple(float(x) for x in numbers)
    except OverflowError:  # an integer such as 10**400: JSON allows it, a float cannot hold it
        raise BaselineError(f"{where} holds a number too large for a duration") from None
    if not all(x < math.inf for x in floats):
        raise BaselineError(f"{where} holds a number too large for a duration")
    return floats


def _side_from(entry: Any, index: int, environment: Mapping[str, Any], schema: int) -> Side:
    where = f"benchmark #{index + 1}"
    if not isinstance(entry, dict):
        raise BaselineError(f"{where} is not an object")
    nodeid = entry.get("fullname")
    if not isinstance(nodeid, str) or not nodeid or len(nodeid) > 2000:
        raise BaselineError(f"{where} has no valid 'fullname'")
    _printable(nodeid, f"{where}: 'fullname'")
    where = f"benchmark {nodeid!r}"
    stats, ours, extra = entry.get("stats"), entry.get(SECTION, {}), entry.get("extra_info", {})
    if not isinstance(stats, dict) or not isinstance(ours, dict) or not isinstance(extra, dict):
        raise BaselineError(f"{where}: 'stats', 'extra_info' or {SECTION!r} is not an object")
    runs = _runs(stats, ours, schema, where)
    bench_env = ours.get("environment", {})
    if not isinstance(bench_env, dict):
        raise BaselineError(f"{where}: environment is not an object")
    if not isinstance(extra.get("higher_is_better", False), bool):  # "no" is not false
        raise BaselineError(f"{where}: 'higher_is_better' is not true or false")
    return _side(nodeid, runs, extra, {**environment, **bench_env})


def _runs(
    stats: Mapping[str, Any], ours: Mapping[str, Any], schema: int, where: str
) -> tuple[RunSummary, ...]:
    """The benchmark's kept runs; older schemas kept the rounds themselves instead."""
    if schema >= 3:
        history = ours.get("history")
        if not isinstance(history, list) or not history:
            raise BaselineError(f"{where}: 'history' is not a non-empty list of runs")
        if len(history) > MAX_HISTORY:
            raise BaselineError(f"{where}: {len(history)} runs, more than {MAX_HISTORY}")
        try:
            return tuple(RunSummary.from_json(run) for run in history)
        except ValueError as exc:
            raise BaselineError(f"{where}: history: {exc}") from None
        except OverflowError:  # an integer such as 10**400: JSON allows it, a float cannot
            raise BaselineError(f"{where}: history holds a number too large for a float") from None
    samples = _numbers(stats.get("data"), f"{where}: stats.data")
    if not samples:
        raise BaselineError(f"{where} has no samples")
    calibration = _numbers(ours.get("calibration", []), f"{where}: calibration")
    interleaved = _interleaved_entry(ours, schema, len(samples), len(calibration), where)
    run = summarize(samples, calibration if interleaved else (), "legacy" if interleaved else "")
    if run is None:
        raise BaselineError(f"{where} has no samples")
    return (run,)


def _finite(value: float) -> bool:
    """A number a float can hold (JSON integers such as 10**400 cannot be)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _interleaved_entry(
    ours: Mapping[str, Any], schema: int, rounds: int, calibrations: int, where: str
) -> bool:
    """Whether a stored benchmark's calibration is per round (schema 1 never was)."""
    if schema < 2:
        return False
    flag = ours.get("interleaved", False)
    if not isinstance(flag, bool):
        raise BaselineError(f"{where}: 'interleaved' is not true or false")
    if flag and calibrations != rounds:
        raise BaselineError(
            f"{where}: {calibrations} per-round calibration samples for {rounds} rounds"
        )
    return flag


def _side(
    nodeid: str,
    runs: tuple[RunSummary, ...],
    extra: Mapping[str, Any],
    environment: Mapping[str, Any],
) -> Side:
    metric = str(extra.get("metric", "time"))
    value = extra.get(metric)
    if not isinstance(value, int | float) or isinstance(value, bool) or not _finite(value):
        value = math.exp(runs[-1].raw.log)
    return Side(
        nodeid=nodeid,
        runs=runs,
        metric=metric,
        unit=str(extra.get("unit", "s")),
        higher_is_better=extra.get("higher_is_better", False) is True,
        value=float(value),
        environment=environment,
    )
