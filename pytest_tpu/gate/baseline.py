"""Baseline files: pytest-benchmark's saved-run JSON with pytest-tpu's keys, saved atomically.

A baseline is ``<baseline-dir>/<name>.json``. Its top level is what ``pytest --benchmark-save``
writes (``machine_info``, ``commit_info``, ``benchmarks`` with ``stats.data``, ``datetime``,
``version``), so ``pytest-benchmark compare`` reads it; pytest-tpu adds a ``pytest_tpu`` section
(schema version, session environment, benchmarks left out) and, per benchmark, its environment key
and calibration samples. Schema 2 times the calibration kernel before every round
(``interleaved``, aligned 1:1 with ``stats.data``); schema-1 files still load, their before/after
calibration marked as not interleaved, so they are compared on raw samples. Files are data:
parsed as JSON only, never unpickled or evaluated, and validated with limits before anything
trusts them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Side
from pytest_tpu.options import parse_baseline_name
from pytest_tpu.results import BenchResult

SCHEMA = 2
SECTION = "pytest_tpu"
CALIBRATION_KEY = "pytest_tpu_calibration"  # extra_info key the gate fills per benchmark
INTERLEAVED_KEY = "pytest_tpu_calibration_interleaved"  # True: one kernel timing per round
_OUR_EXTRA = (CALIBRATION_KEY, INTERLEAVED_KEY)
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_BENCHMARKS = 10_000
MAX_SAMPLES = 1_000_000
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
    """A loaded, validated baseline."""

    path: Path
    environment: dict[str, Any]
    sides: dict[str, Side]
    left_out: list[str] = field(default_factory=list)


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


def benchmark_environment(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """The per-benchmark part of the environment key, from the result's extra_info."""
    plain = (str, int, float, bool)
    return {k: extra_info[k] for k in BENCH_FIELDS if isinstance(extra_info.get(k), plain)}


def side_of(result: BenchResult, environment: Mapping[str, Any]) -> Side:
    """A current result as one side of a comparison."""
    calibration = tuple(float(x) for x in result.extra_info.get(CALIBRATION_KEY) or ())
    return Side(
        nodeid=result.nodeid,
        samples=result.samples,
        calibration=calibration,
        interleaved=_interleaved(result, calibration),
        metric=result.metric,
        unit=result.unit,
        higher_is_better=result.higher_is_better,
        value=result.headline,
        environment={**environment, **benchmark_environment(result.extra_info)},
    )


def _interleaved(result: BenchResult, calibration: Sequence[float]) -> bool:
    """Per-round calibration that lines up with the rounds (anything else is not paired)."""
    flagged = result.extra_info.get(INTERLEAVED_KEY) is True
    return flagged and len(calibration) == len(result.samples)


# --------------------------------------------------------------------------- save


def _stats(samples: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's own statistics of the rounds, so its tools read the file."""
    module: Any = importlib.import_module("pytest_benchmark.stats")
    stats = module.Stats()
    for sample in samples:
        stats.update(sample)
    data: dict[str, Any] = stats.as_dict()
    data["data"] = list(samples)
    data["iterations"] = 1
    return data


def _benchmark_entry(result: BenchResult, environment: Mapping[str, Any]) -> dict[str, Any]:
    extra = {k: v for k, v in result.extra_info.items() if k not in _OUR_EXTRA}
    calibration = [float(x) for x in result.extra_info.get(CALIBRATION_KEY) or ()]
    return {
        "group": result.group,
        "name": result.name,
        "fullname": result.nodeid,
        "params": result.params or None,
        "param": result.nodeid.partition("[")[2].rstrip("]") or None,
        "extra_info": extra,
        "options": result.options,
        "stats": _stats(result.samples),
        SECTION: {
            "environment": benchmark_environment(result.extra_info),
            "calibration": calibration,
            "interleaved": _interleaved(result, calibration),
        },
    }


def build_document(
    name: str,
    results: Iterable[BenchResult],
    environment: Mapping[str, Any],
    left_out: Iterable[str] = (),
) -> dict[str, Any]:
    """The JSON document of a baseline."""
    from pytest_benchmark import __version__ as benchmark_version

    return {
        "machine_info": {
            "node": platform.node(),
            "processor": platform.processor(),
            "machine": platform.machine(),
            "python_implementation": platform.python_implementation(),
            "python_version": platform.python_version(),
            "system": platform.system(),
            "release": platform.release(),
            "cpu": {"brand_raw": environment.get("cpu_model", "")},
        },
        "commit_info": {"id": environment.get("commit"), "dirty": environment.get("dirty")},
        "benchmarks": [_benchmark_entry(result, environment) for result in results],
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": benchmark_version,
        SECTION: {
            "schema": SCHEMA,
            "name": name,
            "environment": dict(environment),
            "left_out": list(left_out),
        },
    }


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` as JSON to ``path``: readers see the old file or the new, never a mix.

    The temporary file lives in the same directory, so ``os.replace`` is a rename on one
    file system (atomic on POSIX and Windows).
    """
    text = json.dumps(document, indent=2, allow_nan=False)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, then renamed
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def save(
    directory: Path,
    name: str,
    results: Iterable[BenchResult],
    environment: Mapping[str, Any],
    left_out: Iterable[str] = (),
) -> Path:
    """Save ``results`` as baseline ``name``; returns the file written."""
    path = baseline_path(directory, name)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(path, build_document(name, results, environment, left_out))
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
        return json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise BaselineError("the JSON is nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise BaselineError(f"not valid JSON (corrupt or truncated?): {exc}") from None


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number a baseline may hold")


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
    for index, entry in enumerate(entries):
        side = _side_from(entry, index, environment, schema)
        if side.nodeid in sides:
            raise BaselineError(f"benchmark {side.nodeid!r} appears twice")
        sides[side.nodeid] = side
    left_out = [str(item) for item in section.get("left_out", []) if isinstance(item, str)]
    return Baseline(path=path, environment=environment, sides=sides, left_out=left_out)


def _numbers(value: Any, where: str) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise BaselineError(f"{where} is not a list of numbers")
    if len(value) > MAX_SAMPLES:
        raise BaselineError(f"{where} holds {len(value)} samples, more than {MAX_SAMPLES}")
    numbers = tuple(x for x in value if isinstance(x, int | float) and not isinstance(x, bool))
    if len(numbers) != len(value) or not all(0 < x < math.inf for x in numbers):
        raise BaselineError(f"{where} holds something other than positive durations")
    return tuple(float(x) for x in numbers)


def _side_from(entry: Any, index: int, environment: Mapping[str, Any], schema: int) -> Side:
    where = f"benchmark #{index + 1}"
    if not isinstance(entry, dict):
        raise BaselineError(f"{where} is not an object")
    nodeid = entry.get("fullname")
    if not isinstance(nodeid, str) or not nodeid or len(nodeid) > 2000:
        raise BaselineError(f"{where} has no valid 'fullname'")
    where = f"benchmark {nodeid!r}"
    stats, ours, extra = entry.get("stats"), entry.get(SECTION, {}), entry.get("extra_info", {})
    if not isinstance(stats, dict) or not isinstance(ours, dict) or not isinstance(extra, dict):
        raise BaselineError(f"{where}: 'stats', 'extra_info' or {SECTION!r} is not an object")
    samples = _numbers(stats.get("data"), f"{where}: stats.data")
    if not samples:
        raise BaselineError(f"{where} has no samples")
    calibration = _numbers(ours.get("calibration", []), f"{where}: calibration")
    interleaved = _interleaved_entry(ours, schema, len(samples), len(calibration), where)
    bench_env = ours.get("environment", {})
    if not isinstance(bench_env, dict):
        raise BaselineError(f"{where}: environment is not an object")
    side = _side(nodeid, samples, calibration, extra, {**environment, **bench_env})
    return replace(side, interleaved=interleaved)


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
    samples: tuple[float, ...],
    calibration: tuple[float, ...],
    extra: Mapping[str, Any],
    environment: Mapping[str, Any],
) -> Side:
    metric = str(extra.get("metric", "time"))
    value = extra.get(metric)
    if not isinstance(value, int | float) or isinstance(value, bool):
        value = sorted(samples)[len(samples) // 2]
    return Side(
        nodeid=nodeid,
        samples=samples,
        calibration=calibration,
        metric=metric,
        unit=str(extra.get("unit", "s")),
        higher_is_better=bool(extra.get("higher_is_better", False)),
        value=float(value),
        environment=environment,
    )
