"""Rows of the other metrics: memory a benchmark's calls added, and its first call (trace,
compile), each against its saved runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_tpu.gate.history import sessions
from pytest_tpu.gate.model import (
    DEFAULT_THRESHOLDS,
    MEMORY_FLOOR_BYTES,
    METRIC_UNITS,
    Decision,
    Measured,
    Row,
    Side,
)
from pytest_tpu.gate.stats import Estimate, change, widened
from pytest_tpu.gate.verdict import decide, row_of


def _metric_common(
    nodeid: str, metric: str, base: float, now: float, change: float | None = None
) -> dict[str, Any]:
    """A metric row's fields; ``change`` where it is not ``now / base - 1`` (none from 0 to more:
    memory a benchmark's calls did not add before)."""
    if change is None and base:
        change = now / base - 1
    elif change is None and now == 0:
        change = 0.0
    return {
        "nodeid": nodeid,
        "status": "compared",
        "metric": metric,
        "unit": METRIC_UNITS[metric],
        "base_value": base,
        "current_value": now,
        "change": change,
    }


def compare_memory(nodeid: str, history: Sequence[float], now: float, threshold: float) -> Row:
    """The memory the calls added is the same for the same code and data: compared with the
    largest saved value, no interval, so a run only fails on memory it really added.

    An increase counts only past an allowance in bytes: ``MEMORY_FLOOR_BYTES``, because a
    process's peak resident set grows in steps of its allocator's arenas and trims (an unchanged
    benchmark added 0 B, 4 KiB or 252 KiB from run to run), or the saved runs' own spread where
    that is larger. (Trial 15: an unchanged GRU ``fit`` added 2.52 MB at most in three saved
    runs and 2.80 MB in the next, +11 %, which failed a 2 % memory gate.) Judged, both sides
    count as at least the floor; shown, the change is the shown values' (trial 17: 1.17 MiB ->
    0 B read -14.4 %, the floor's), and none against a history of 0 B.
    """
    largest = max(history)
    base, current = max(largest, MEMORY_FLOOR_BYTES), max(now, MEMORY_FLOOR_BYTES)
    common = _metric_common(nodeid, "memory", largest, now)
    allowance = max(MEMORY_FLOOR_BYTES, largest - min(history))
    grown = current > base * (1 + threshold) and now - largest > allowance
    shrunk = current < base * (1 - threshold) and largest - now > allowance
    verdict = "slower" if grown else "faster" if shrunk else "unchanged"
    source = f"the memory its calls added, against the largest of {len(history)} saved runs"
    reason = (
        f"a change within {_mib(allowance)} counts as none: the larger of "
        f"{_mib(MEMORY_FLOOR_BYTES)}, below which the process's allocator, not the code, decides "
        "its peak, and the saved runs' own spread"
    )
    return Row(
        verdict=verdict,
        regression=grown,
        noise_source=source,
        reason=reason if abs(now - largest) <= allowance and verdict == "unchanged" else "",
        allowance=allowance,
        threshold=threshold,
        **common,
    )


def _mib(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


def compare_compile(
    nodeid: str,
    history: Sequence[float],
    now: float,
    threshold: float,
    pooled_sd: float = 0.0,
    machine: float | None = None,
) -> Row:
    """The first call (trace, compile) once per run: its spread is measured across saved runs.

    One sample a session, heavy-tailed, and sensitive to whatever else the machine does then, so
    two more allowances widen its interval: ``pooled_sd``, the spread of every benchmark's first
    calls across the same saved runs (log scale; a benchmark whose few runs agreed closely by
    chance is not taken at its word), and ``machine``, the drift of the machine since the
    baseline that this benchmark's time row measured. (Trial 15: an unchanged first call read
    +17.6 % [+16.6, +18.5] "slower" from three saved runs; beside a memory-bandwidth neighbour
    +63 % to +137 %, "99.7 % sure", and failed a 25 % gate 4 times in 4.)
    """
    common = _metric_common(nodeid, "compile", math.exp(_mean_log(history)), now)
    if len(history) < 2:
        return Row(
            verdict="inconclusive",
            noise_source="1 saved run",
            reason="one saved run: how much the first call varies between sessions is not known",
            **common,
        )
    one = [Estimate(math.log(x), 0.0, 0.0, 1) for x in history]
    found = change(one, Estimate(math.log(now), 0.0, 0.0, 1))
    assert found is not None
    if pooled_sd > 0:
        spread = pooled_sd * math.sqrt(1 + 1 / len(history))
        found = widened(found, spread, f"every benchmark's first calls spread {pooled_sd:.1%}")
    if machine is not None:
        drift = abs(math.log1p(machine))
        found = widened(found, drift, f"the machine's drift since the baseline, {machine:+.1%}")
    measured = Measured(found, "raw", None, len(history))
    names = {k: v for k, v in common.items() if k not in ("status", "change")}
    decision = decide(measured, threshold)
    if decision.regression and found.estimate < threshold:
        # One first call per session, heavy-tailed (imports, caches, a slow disk): a few saved
        # runs that agree closely say little about the next one, so a compile regression needs
        # its estimate beyond the threshold, not only its interval.
        why = f"{found.estimate:+.1%} is below the {threshold:.0%} threshold for a first call"
        decision = Decision("slower", False, why)
    return row_of(measured, decision, names, False)


def pooled_first_calls(base: Mapping[str, Side]) -> float:
    """The spread of first calls between saved sessions, pooled over every benchmark with two
    or more (log scale, each about its own mean); 0 where none has two."""
    squares, df = 0.0, 0
    for side in base.values():
        logs = [math.log(x) for x in saved_metric(side, "compile")]
        if len(logs) >= 2:
            mean = math.fsum(logs) / len(logs)
            squares += math.fsum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return math.sqrt(squares / df) if df else 0.0


def saved_metric(side: Side, metric: str) -> list[float]:
    """One value of ``metric`` per saved session of ``side`` that recorded it."""
    return [run.metrics[metric] for run in sessions(side.runs) if metric in run.metrics]


def _mean_log(values: Sequence[float]) -> float:
    return math.fsum(math.log(x) for x in values) / len(values)


def metric_rows(
    base: Side,
    current: Side,
    thresholds: Mapping[str, float],
    pooled_sd: float = 0.0,
    machine: float | None = None,
) -> list[Row]:
    """The memory and first-call rows of a benchmark both sides measured them for; the
    first call's with the allowances of ``compare_compile``."""
    rows = []
    now = current.latest.metrics
    for metric in ("memory", "compile"):
        history = saved_metric(base, metric)
        if not history or metric not in now:
            continue
        threshold = thresholds.get(metric, DEFAULT_THRESHOLDS[metric])
        if metric == "memory":
            rows.append(compare_memory(current.nodeid, history, now[metric], threshold))
        else:
            rows.append(
                compare_compile(current.nodeid, history, now[metric], threshold, pooled_sd, machine)
            )
    return rows
