"""Reading a baseline file: parsed as JSON only, validated with limits before anything trusts it;
every problem raises ``BaselineError`` naming the file and what is wrong with it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Side
from pytest_tpu.gate.history import RunSummary, summarize

SCHEMA = 3


SECTION = "pytest_tpu"


MAX_FILE_BYTES = 64 * 1024 * 1024


MAX_BENCHMARKS = 10_000


MAX_SAMPLES = 1_000_000


MAX_HISTORY = 100


MAX_DEPTH = 16


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
