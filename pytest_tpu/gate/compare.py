"""Verdicts of the regression gate: baseline history vs this run, per benchmark (plain data).

A benchmark is compared only with the same benchmark (node id: test, device, parameters) in an
environment that measures the same thing; other rows say why they were not compared. Everything is
decided on round time (longer is worse): baseline, current and change in a row are all the
location of the round times (the mean of the fastest half), and a row whose change is calibrated
for machine drift says so and shows the drift.

A row says ``slower`` only when the interval, which includes the measured between-session noise,
makes a slowdown at least ``FAIL_CONFIDENCE`` likely and the estimate is at least half the
threshold; it fails the gate when the interval also reaches the threshold. When the run cannot
resolve the threshold the row is ``inconclusive`` and says the smallest change it could detect.
Each row is also judged on the mean of all rounds (``tail``): a change that slows only some
calls leaves the fastest half as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from pytest_tpu.gate.history import RunSummary, sessions
from pytest_tpu.gate.measure import measure
from pytest_tpu.gate.metrics import (
    compare_compile,
    compare_memory,
    metric_rows,
    pooled_first_calls,
)
from pytest_tpu.gate.model import (
    DEFAULT_THRESHOLD,
    KEY_FIELDS,
    Decision,
    Measured,
    Row,
    Side,
    comparison_key,
    gate_lines_key,
    verdict_key,
)
from pytest_tpu.gate.stats import TAIL
from pytest_tpu.gate.tail import tail, tail_measured, tail_values
from pytest_tpu.gate.verdict import (
    agrees,
    change_text,
    common_of,
    decide,
    explained_by_machine,
    improvement_agrees,
    interval_agrees,
    interval_text,
    processes_apart,
    row_of,
    with_change,
)

# Whether a re-measurement agrees with the change it re-measures (``agrees``,
# ``improvement_agrees``).
Agree = Callable[[Measured, Decision, float], bool]

# What callers of the gate use, wherever it is defined (``model``, ``verdict``, ``metrics``).
__all__ = [
    "DEFAULT_THRESHOLD",
    "Measured",
    "Row",
    "Scope",
    "Side",
    "agrees",
    "compare_compile",
    "compare_memory",
    "compare_one",
    "compare_runs",
    "compared",
    "comparison_key",
    "decide",
    "gate_lines_key",
    "incompatibility",
    "interval_agrees",
    "pooled_first_calls",
    "regressions",
    "remember_gate",
    "row_of",
    "tail",
    "verdict_key",
    "with_change",
]


def remember_gate(config: pytest.Config, said: list[str], verdict: str) -> None:
    """Keep what the gate said and its verdict together, for the reports."""
    config.stash[gate_lines_key] = said
    config.stash[verdict_key] = verdict


def incompatibility(base: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """Why two environments measure different things, or None when they are comparable."""
    fields = list(KEY_FIELDS)
    if base.get("accelerator", "cpu") == "cpu" and current.get("accelerator", "cpu") == "cpu":
        fields.append("cpu_model")
    for name in fields:
        old, new = base.get(name), current.get(name)
        if old is not None and new is not None and old != new:
            return f"{name} differs: baseline {old!r}, now {new!r}" + _HINTS.get(name, "")
    return None


_HINTS = {
    "rounds": (
        " (rounds that took turns with a base process under --compare-ref time differently from"
        " rounds alone; compare runs saved the same way)"
    ),
}


def compare_one(base: Side, current: Side, threshold: float, force: bool) -> Row:
    """The row of a benchmark present on both sides."""
    reason = incompatibility(base.environment, current.environment)
    common = _common(current, base)
    if reason and not force:
        return Row(status="incompatible", reason=reason, **common)
    measured = measure(base, current.latest, threshold)
    if measured is None:
        return Row(status="compared", verdict="inconclusive", reason="no samples", **common)
    decision = decide(measured, threshold)
    row = row_of(measured, decision, common, forced=bool(reason))
    found = tail_measured(base, current.latest, threshold)
    row = tail(row, found, threshold, tail_values(base, current.latest))
    if reason:
        why = f"compared anyway (--compare-force): {reason}"
        row = replace(row, reason=f"{why}; {row.reason}" if row.reason else why)
    if row.regression and current.confirm is not None:
        row = _confirmed(row, base, current.confirm, threshold)
    if row.regression and current.fresh is not None:
        row = _fresh_checked(row, base, current.fresh, threshold, slower=True)
    elif row.regression and current.fresh_problem:
        row = replace(
            row, reason=f"{row.reason}; no fresh process checked it: {current.fresh_problem}"
        )
    if row.verdict == "faster" and current.fresh is not None:
        row = _fresh_checked(row, base, current.fresh, threshold, slower=False)
    elif row.verdict == "faster" and current.fresh_problem:
        unchecked = f"no fresh process checked it: {current.fresh_problem}"
        row = replace(row, reason=f"{row.reason}; {unchecked}" if row.reason else unchecked)
    return row


def _again(
    first: Row, base: Side, again: RunSummary, threshold: float, agree: Agree = agrees
) -> tuple[Measured | None, Decision | None]:
    """A re-measurement on the statistic that found the change, and its decision where it
    agrees (``agree``: ``agrees`` for a regression, ``improvement_agrees`` for an improvement;
    None where it does not)."""
    if first.statistic == TAIL:
        measured = tail_measured(base, again, threshold)
    else:
        measured = measure(base, again, threshold)
    if measured is None:
        return None, None
    second = decide(measured, threshold)
    return measured, second if agree(measured, second, threshold) else None


# Why a fresh process that agrees a benchmark is slower (or faster) still does not confirm it
# (``processes_apart``).
APART = (
    ", further apart than both intervals allow: processes differ by more than the saved runs "
    "showed, so neither reading can be put down to the code"
)


def _withdrawn(
    first: Row,
    measured: Measured | None,
    who: str,
    told: str,
    why_not: str = "",
    slower: bool = True,
) -> Row:
    """A regression (an improvement, ``slower=False``) its re-measurement by ``who`` did not
    agree with: ``inconclusive``, saying both readings (``told`` names the first and leads to
    the second's) and ``why_not`` where the readings alone do not say why."""
    again_text = "no samples" if measured is None else change_text(measured.change)
    # A re-measurement as slow as the first, beside a busier machine, is not an agreement, and
    # the reason must not read as one (g47: "first +9.9 % [+8.9, +10.9], again +9.7 % [+8.7,
    # +10.7]", a neighbour taking 0.75 cores meanwhile), nor as a disagreement (new-user trial 29:
    # "not confirmed by a fresh process" where the fresh process read +12.5 % [+9.2, +16.0]).
    # Only a re-measurement that read the same way: one that read no slowdown at all disagrees,
    # whatever the machine did meanwhile (CI: a fresh process at -0.4 % was "held back by the
    # machine" because the kernel read the machine 2.3 % slower).
    same_way = measured is not None and (measured.change.estimate > 0) == slower
    machine = explained_by_machine(measured, slower=slower) if measured and same_way else ""
    readings = f"{told} {again_text}{why_not}"
    reason = (
        f"held back by the machine, not by {who}: {readings}, but {machine}"
        if machine
        else f"not confirmed by {who}: {readings}"
    )
    return replace(first, verdict="inconclusive", regression=False, confirmed=False, reason=reason)


def _confirmed(first: Row, base: Side, again: RunSummary, threshold: float) -> Row:
    """A regression stands only if a re-measurement in fresh rounds agrees (``agrees``), on the
    statistic that found it."""
    measured, second = _again(first, base, again, threshold)
    shown = interval_text(first.change, first.low, first.high)
    if measured is None or second is None:
        return _withdrawn(first, measured, "a re-measurement", f"first {shown}, again")
    # Its current time is the re-measurement's, as its change is.
    now = again.mean if first.statistic == TAIL and again.mean else again.raw
    row = row_of(measured, second, {**common_of(first), "current_value": now.value}, first.forced)
    return replace(
        row,
        statistic=first.statistic,
        verdict="slower",
        regression=True,
        confirmed=True,
        # The row's figures are the re-measurement's: a new user read "first" as the headline.
        reason=f"confirmed by a re-measurement in fresh rounds, whose figures these are (the first "
        f"read {shown})",
    )


def _fresh_checked(
    first: Row, base: Side, fresh: RunSummary, threshold: float, slower: bool
) -> Row:
    """A confirmed regression (an improvement, ``slower=False``) stands only if a fresh
    process's measurement agrees too, and lies within both intervals of this session's
    (``processes_apart``).

    A regression's confirmation ran in the same process, and cannot tell the code from that
    process's state. An improvement's interval covers the noise between sessions as far as the
    saved runs showed it, and five runs saved minutes apart showed less than the sessions after
    them (g34: unchanged numpy read 3.0 to 6.4 % `faster` in 5 of 160 rows, beside saved runs
    whose spread was a third of the sessions'). An improvement, which fails nothing, is checked
    where the session starts a fresh process (``gate.plugin`` starts one for either).
    """
    agree = agrees if slower else improvement_agrees
    measured, second = _again(first, base, fresh, threshold, agree)
    said = interval_text(first.change, first.low, first.high)
    told = f"this process {said}, the fresh process"
    if measured is None or second is None:
        return _withdrawn(first, measured, "a fresh process", told, slower=slower)
    if processes_apart(first, measured.change, threshold, slower):
        return _withdrawn(first, measured, "a fresh process", told, APART, slower=slower)
    text = change_text(measured.change)
    if slower:  # its reason already says the re-measurement in fresh rounds confirmed it
        return replace(first, reason=f"{first.reason} and in a fresh process ({text})")
    said = f"confirmed in a fresh process ({text})"
    reason = f"{first.reason}; {said}" if first.reason else said
    return replace(first, confirmed=True, reason=reason)


def _location(side: Side | None, history: bool) -> float | None:
    if side is None or not side.runs:
        return None
    runs = (sessions(side.runs) or list(side.runs)) if history else [side.latest]
    return math.exp(math.fsum(run.raw.log for run in runs) / len(runs))


def _common(current: Side, base: Side | None) -> dict[str, Any]:
    return {
        "nodeid": current.nodeid,
        "metric": "time",
        "unit": "s",
        "higher_is_better": False,
        "base_value": _location(base, history=True),
        "current_value": _location(current, history=False),
    }


@dataclass(frozen=True)
class Scope:
    """What a session collected: its test files, and the tests ``-k`` or ``-m`` deselected."""

    files: frozenset[str]
    deselected: frozenset[str]

    def reaches(self, nodeid: str) -> bool:
        """Whether a saved benchmark was within this session's reach."""
        return nodeid.partition("::")[0] in self.files and nodeid not in self.deselected


def compare_runs(
    base: Mapping[str, Side],
    current: Mapping[str, Side],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    force: bool = False,
    failed: Iterable[str] = (),
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
    scope: Scope | None = None,
    ran: Iterable[str] = (),
    unmeasured_why: str = "",
) -> list[Row]:
    """Every row: compared, new, failed in this run, not measured, or missing from this run.

    ``thresholds`` holds a benchmark's own thresholds per metric (fractions), from its marker
    and the session's --fail-on-regression; ``threshold`` is the time threshold otherwise.
    ``scope`` is what this session collected, where known: a saved benchmark is ``missing`` only
    from a file it collected, and not when it was deselected -- one left out on purpose is no
    news. ``ran`` is the tests that passed in this run: a saved benchmark among them without a
    measurement is ``unmeasured``, not ``missing``, for the reason ``unmeasured_why``
    (``--benchmark-disable``, pytest-xdist).
    """
    failed = set(failed) - set(current)
    ran = set(ran)
    pooled = pooled_first_calls(base)
    rows = []
    for key, side in current.items():
        if key not in base:
            rows.append(Row(status="new", **_common(side, None)))
            continue
        own = (thresholds or {}).get(key, {})
        row = compare_one(base[key], side, own.get("time", threshold), force)
        rows.append(row)
        if row.status == "compared":
            rows += metric_rows(base[key], side, own, pooled, row.machine)
    for key in sorted(failed):
        rows.append(Row(nodeid=key, status="failed", base_value=_location(base.get(key), True)))
    for key, side in base.items():
        if key in current or key in failed:
            continue
        if key in ran:
            base_value = _location(side, True)
            rows.append(Row(key, "unmeasured", base_value=base_value, reason=unmeasured_why))
        elif scope is None or scope.reaches(key):
            rows.append(Row(nodeid=key, status="missing", base_value=_location(side, True)))
    return rows


def regressions(rows: Iterable[Row]) -> list[Row]:
    """The rows that fail the gate."""
    return [row for row in rows if row.regression]


def compared(rows: Sequence[Row]) -> list[Row]:
    """The rows that were actually measured against a baseline."""
    return [row for row in rows if row.status == "compared"]
