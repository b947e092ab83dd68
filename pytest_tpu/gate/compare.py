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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from pytest_tpu.gate import contention
from pytest_tpu.gate.history import DEFAULT_KEEP, RunSummary, noise_logs, sessions
from pytest_tpu.gate.stats import (
    FAIL_CONFIDENCE,
    TAIL,
    Change,
    Estimate,
    change,
    sample_sd,
    widened,
)
from pytest_tpu.units import format_detectable

DEFAULT_THRESHOLD = 0.05  # the verdicts' threshold when no --fail-on-regression is given
# Verdict thresholds of the other metrics when none is given: a first call (trace, compile)
# varies far more between sessions than steady rounds do.
DEFAULT_THRESHOLDS = {"time": DEFAULT_THRESHOLD, "memory": 0.05, "compile": 0.25}
METRIC_UNITS = {"memory": "B", "compile": "s"}
# Memory added by a benchmark's calls is compared from this size up: below it, the process's
# allocator decides what its peak resident set shows (see ``compare_memory``).
MEMORY_FLOOR_BYTES = 2**20
MACHINE_CONFIDENCE = 0.95  # how sure the kernel's slowdown must be to be called drift
# How much of the machine's drift since the baseline the ratios to the kernel may have failed to
# divide out. The kernel is a different program: a drift it sees may hit this benchmark more or
# less (seen here: a kernel 50 % slower beside a benchmark 60 % slower). Half is assumed for the
# ratios, all of it for raw rounds, and added to the uncertainty -- but only the drift variance
# beyond the kernel's across the saved runs: drift of that spread was there when the history's
# between-session noise was measured, so it is already in the interval.
UNTRACKED_DRIFT = {"raw": 1.0, "calibrated": 0.5}
KEY_FIELDS = (
    "accelerator",
    "device",
    "replicas",
    "tf_minor",
    "jit_compile",
    "dtype",
    "batch_size",
    "workload_size",
    "threads",
    "timer",
    "rounds",
)
VERDICTS = ("slower", "faster", "unchanged", "inconclusive")
MODES = ("raw", "calibrated")


@dataclass(frozen=True)
class Side:
    """One benchmark's measurements on one side: its runs, oldest first, and its fields.

    For the current session ``runs`` holds this run (and --measure-noise repetitions);
    ``confirm`` holds the re-measurement of a benchmark the gate was about to fail.
    """

    nodeid: str
    runs: tuple[RunSummary, ...]
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    value: float | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    confirm: RunSummary | None = None

    @property
    def latest(self) -> RunSummary:
        return sessions(self.runs)[-1] if sessions(self.runs) else self.runs[-1]


@dataclass(frozen=True)
class Row:
    """One line of the comparison table.

    ``status`` is ``compared``, ``new`` (current run only), ``missing`` (baseline only),
    ``unmeasured`` (ran without a measurement), ``failed`` (failed in this run) or
    ``incompatible`` (``reason`` says why). ``base_value`` and
    ``current_value`` are round-time locations in seconds; ``change``/``low``/``high`` the round
    time's relative change and interval, calibrated when ``calibrated``.
    """

    nodeid: str
    status: str
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    base_value: float | None = None
    current_value: float | None = None
    verdict: str | None = None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    detectable: float | None = None
    regression: bool = False
    forced: bool = False
    calibrated: bool = False
    machine: float | None = None
    noise_source: str = ""
    confirmed: bool | None = None  # None: no re-measurement was needed
    reason: str = ""
    threshold: float | None = None  # the time threshold its verdict was judged against
    statistic: str = ""  # "": the gate's location (module docstring); TAIL: the mean of all rounds


comparison_key = pytest.StashKey[list[Row]]()
verdict_key = pytest.StashKey[str]()  # the gate's verdict: passed, failed, nothing checked
# What the gate said in the terminal (each regression, each row it could not resolve, the verdict,
# the hint), for the reports: a pull request's summary must not say only "passed".
gate_lines_key = pytest.StashKey[list[str]]()


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


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Measured:
    """The change of one comparison in the mode chosen, with the machine's own drift."""

    change: Change
    mode: str
    machine: Change | None
    saved_runs: int = 0  # sessions in the baseline's history (0: not a stored baseline)
    # CPU cores other processes took in each saved run and in this one (``contention``).
    others_saved: tuple[float | None, ...] = ()
    others_now: float | None = None


def _mode_change(base: Side, current: RunSummary, mode: str, threshold: float) -> Change | None:
    runs = sessions(base.runs) or list(base.runs)
    history = [getattr(run, mode) for run in runs]
    now = getattr(current, mode)
    if now is None or any(part is None for part in history):
        return None
    if mode == "calibrated" and {run.kernel_kind for run in runs} != {current.kernel_kind}:
        return None  # ratios to different kernels are different units
    extra = noise_logs(base.runs, mode)
    if extra and len(runs) == 1:
        extra.append(history[0].log)
    return change(history, now, extra, assumed=threshold)


def measure(base: Side, current: RunSummary, threshold: float) -> Measured | None:
    """Raw and calibrated changes; the calibrated one is used only where it is more certain.

    Calibration divides out the machine's drift only as far as the kernel tracks this
    benchmark; where it does not, its ratios are noisier than the raw rounds and lose.
    ``threshold`` is the least spread between sessions assumed against one saved run.
    """
    machine = _machine(base, current)
    typical = _typical_drift(base, current)
    candidates = [
        (_with_drift(found, mode, machine, typical), mode)
        for mode in MODES
        if (found := _mode_change(base, current, mode, threshold)) is not None
    ]
    if not candidates:
        return None
    best, mode = min(candidates, key=lambda pair: (pair[0].se, MODES.index(pair[1])))
    runs = sessions(base.runs)
    saved = tuple(run.others for run in runs)
    return Measured(best, mode, machine, len(runs), saved, current.others)


def _typical_drift(base: Side, current: RunSummary) -> float:
    """How much the machine's speed (the kernel) varied across the saved runs (log SD).

    That much drift is already in the between-session noise the history measured; only drift
    beyond it is new to this comparison.
    """
    runs = sessions(base.runs) or list(base.runs)
    logs = [r.kernel.log for r in runs if r.kernel and r.kernel_kind == current.kernel_kind]
    return sample_sd(logs) if len(logs) >= 2 else 0.0


def _with_drift(found: Change, mode: str, machine: Change | None, typical: float) -> Change:
    """The change made as uncertain as the part of the machine's drift it may still carry,
    beyond what the saved runs already saw.

    The history's between-session noise was measured while the machine drifted with a spread
    of ``typical``, so it holds a drift variance of ``typical``² already; a session that drifted
    by ``d`` carries ``d``² of it. Only the difference is new. (It used to be the drift beyond
    twice ``typical``, which let a 23-42 % drift through almost whole under a bursty neighbour:
    unchanged numpy rounds then failed at +10-13 %, calibrated.)
    """
    if machine is None or not math.isfinite(machine.estimate):
        return found
    drift = math.log1p(machine.estimate)
    excess = math.sqrt(max(0.0, drift * drift - typical * typical))
    return widened(
        found, excess * UNTRACKED_DRIFT[mode], f"machine drift {machine.estimate:+.1%} allowed for"
    )


def _machine(base: Side, current: RunSummary) -> Change | None:
    runs = sessions(base.runs) or list(base.runs)
    kernels = [run.kernel for run in runs if run.kernel_kind == current.kernel_kind]
    if current.kernel is None or len(kernels) != len(runs) or not kernels:
        return None
    return change([k for k in kernels if k is not None], current.kernel)


# --------------------------------------------------------------------------- deciding


@dataclass(frozen=True)
class Decision:
    verdict: str
    regression: bool
    reason: str = ""
    threshold: float | None = None  # the time threshold it was judged against


def decide(measured: Measured, threshold: float) -> Decision:
    """The verdict of one measured change against ``threshold`` (a round-time slowdown)."""
    return replace(_decided(measured, threshold), threshold=threshold)


def _decided(measured: Measured, threshold: float) -> Decision:
    found = measured.change
    floor = threshold / 2
    if found.p_slower >= FAIL_CONFIDENCE and found.estimate >= floor:
        drift = _explained(measured, slower=True)
        if drift:
            return Decision("inconclusive", False, drift)
        return Decision("slower", found.high >= threshold)
    if found.p_slower <= 1 - FAIL_CONFIDENCE and found.estimate <= -floor:
        drift = _explained(measured, slower=False)
        if drift:
            return Decision("inconclusive", False, drift)
        return Decision("faster", False)
    if found.high < threshold and found.low > -threshold:
        return Decision("unchanged", False)
    why = _unresolved(found, threshold, measured.saved_runs)
    return Decision("inconclusive", False, _also_explained(measured, why))


def _also_explained(measured: Measured, why: str) -> str:
    """``why`` a row is unresolved, and what about the machine could explain its change as well:
    a row short of the gate's confidence is not checked against drift or neighbours, yet its
    reader should see them (trial 19: an unchanged row beside a spinning neighbour read +42 %,
    98.6 % sure, `inconclusive` with no word of the neighbour)."""
    if measured.change.estimate == 0:
        return why
    machine = _explained(measured, slower=measured.change.estimate > 0)
    return f"{why}; also, {machine}" if machine else why


def _explained(measured: Measured, slower: bool) -> str:
    """Why a change cannot be blamed on the code, or "": the machine's own drift (raw rounds),
    or other processes' use of the CPUs (any mode: a kernel runs as fast as ever beside a
    neighbour that slows the benchmark)."""
    return _drift_explains(measured, slower) or contention.explains(
        measured.others_saved, measured.others_now, slower
    )


def _drift_explains(measured: Measured, slower: bool) -> str:
    """Why a raw change cannot be told from the machine's own drift the same way, or "" when it
    can. Both ways: a session on a quieter machine than the saved runs' is faster too (a new-user
    trial read an unchanged benchmark -19 % [-30, -6] `faster` against three saved runs)."""
    machine, change = measured.machine, measured.change
    if measured.mode != "raw" or machine is None:
        return ""
    if slower and (machine.p_slower < MACHINE_CONFIDENCE or change.low > machine.high):
        return ""
    if not slower and (machine.p_slower > 1 - MACHINE_CONFIDENCE or change.high < machine.low):
        return ""
    way = "slower" if slower else "faster"
    return (
        f"the machine itself measured {abs(machine.estimate):.1%} {way} than at the baseline "
        "(calibration kernel); a raw change this size cannot be told from that drift"
    )


def _unresolved(found: Change, threshold: float, saved_runs: int) -> str:
    if found.high < threshold:
        # Only an improvement is left open: "cannot resolve a 5 % change" read as a slowdown not
        # ruled out, beside a gate line that rightly did not count it (trial 21: -1.4 %
        # [-6.7, +4.2]).
        return (
            f"no slowdown of {threshold:.1%} (the interval stays under it), but an improvement "
            f"of {threshold:.1%} is neither shown nor ruled out (noise: {found.source})"
        )
    if math.isfinite(found.detectable) and found.detectable <= threshold:
        # Precise enough for the threshold, and still neither verdict: the change itself lies
        # near it (its interval reaches it; a slowdown is not 99 % sure, or is under half of it).
        return (
            f"neither shown slower nor shown within {threshold:.1%}: the interval reaches the "
            f"threshold, though this comparison catches {format_detectable(found.detectable * 100)}"
            " 4 times in 5 "
            f"(noise: {found.source})"
        )
    detectable = format_detectable(found.detectable * 100)
    return (
        f"cannot resolve a {threshold:.1%} change here: the smallest slowdown this comparison "
        f"catches 4 times in 5 is {detectable} (noise: {found.source})" + _few_runs(saved_runs)
    )


def _few_runs(saved_runs: int) -> str:
    """What would narrow an interval a short history of saved runs leaves wide, or ""."""
    if not 0 < saved_runs < DEFAULT_KEEP:
        return ""
    # Few runs leave few degrees of freedom: with 2 the 95 % interval is 12.7 standard errors
    # wide on each side, with 5 only 2.8; a user seeing 1000 % here should know why.
    return "; each further run saved under this baseline name narrows it"


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
    return row


def with_change(row: Row, found: Change) -> Row:
    """``row`` carrying the numbers of ``found``: estimate, interval, how sure, what it detects,
    where its noise came from."""
    return replace(
        row,
        change=found.estimate,
        low=found.low,
        high=found.high,
        confidence=found.p_slower,
        detectable=found.detectable,
        noise_source=found.source,
    )


def row_of(measured: Measured, decision: Decision, common: dict[str, Any], forced: bool) -> Row:
    """The row of a decided comparison; ``common`` names the benchmark and its values."""
    machine = measured.machine
    row = Row(
        status="compared",
        verdict=decision.verdict,
        regression=decision.regression,
        forced=forced,
        calibrated=measured.mode == "calibrated",
        machine=None if machine is None else machine.estimate,
        reason=decision.reason,
        threshold=decision.threshold,
        **common,
    )
    return with_change(row, measured.change)


def interval_agrees(low: float, high: float, threshold: float) -> bool:
    """Whether a re-measurement's 95 % interval agrees with a regression found before: above zero
    (97.5 % one-sided) and reaching the threshold. Agreeing asks less than finding: it has only
    to rule out what made the first measurement alone (a burst of load; in a same-job comparison,
    ``sameref.confirm``, an offset between two processes)."""
    return low > 0 and high >= threshold


def agrees(measured: Measured, decision: Decision, threshold: float) -> bool:
    """Whether a re-measurement (``measured``, decided as ``decision``) agrees with a regression
    its first measurement found: its own gate fails, or its interval agrees
    (``interval_agrees``) around a change of at least half the threshold, with nothing about
    the machine to explain it. Asking it to fail the gate on its own asked for a second finding
    from a measurement that shares the first one's between-session noise (the same saved runs,
    the same session). (A new user's +7.3 % change read +9.7 % [+5.4, +14.2], then +6.8 %
    [-0.4, +14.5]: withdrawn either way.)
    """
    found = measured.change
    if decision.regression:
        return True
    if found.estimate < threshold / 2 or _explained(measured, slower=True):
        return False
    return interval_agrees(found.low, found.high, threshold)


def _confirmed(first: Row, base: Side, again: RunSummary, threshold: float) -> Row:
    """A regression stands only if a re-measurement in fresh rounds agrees (``agrees``), on the
    statistic that found it."""
    if first.statistic == TAIL:
        measured = tail_measured(base, again, threshold)
    else:
        measured = measure(base, again, threshold)
    second = None if measured is None else decide(measured, threshold)
    first_text = f"first {_interval_text(first.change, first.low, first.high)}"
    if measured is None or second is None or not agrees(measured, second, threshold):
        again_text = "no samples" if measured is None else _change_text(measured.change)
        # A re-measurement as slow as the first, beside a busier machine, is not an agreement;
        # without this the reason read as one (g47: "first +9.9 % [+8.9, +10.9], again +9.7 %
        # [+8.7, +10.7]", not confirmed because a neighbour took 0.75 cores meanwhile).
        machine = "" if measured is None else _explained(measured, slower=True)
        why = f"not confirmed by a re-measurement: {first_text}, again {again_text}"
        return replace(
            first,
            verdict="inconclusive",
            regression=False,
            confirmed=False,
            reason=f"{why}, when {machine}" if machine else why,
        )
    # Its current time is the re-measurement's, as its change is.
    now = again.mean if first.statistic == TAIL and again.mean else again.raw
    row = row_of(measured, second, {**_common_of(first), "current_value": now.value}, first.forced)
    return replace(
        row,
        statistic=first.statistic,
        verdict="slower",
        regression=True,
        confirmed=True,
        reason=f"confirmed by a re-measurement in fresh rounds ({first_text})",
    )


# --------------------------------------------------------------------------- the tail


def tail_measured(base: Side, current: RunSummary, threshold: float) -> Measured | None:
    """The change of the mean of all rounds against the saved runs' (raw), or None where a saved
    run has no mean (saved before it was kept)."""
    saved_runs = sessions(base.runs)
    runs = saved_runs or list(base.runs)
    history = [run.mean for run in runs if run.mean is not None]
    if current.mean is None or not history or len(history) != len(runs):
        return None
    found = change(history, current.mean, assumed=threshold)
    if found is None:
        return None
    machine = _machine(base, current)
    found = _with_drift(found, "raw", machine, _typical_drift(base, current))
    saved = tuple(run.others for run in saved_runs)
    return Measured(found, "raw", machine, len(saved_runs), saved, current.others)


def tail(row: Row, measured: Measured | None, threshold: float, values: Mapping[str, float]) -> Row:
    """``row`` failed on the mean of all rounds where slow calls in the tail made that the
    threshold or more slower, and ``row`` is no regression or one the mean shows clearly larger
    (``_clearly_larger``: slow calls left the other calls a few percent slower, and "+5.6 %"
    undersold a mean +48 %); else ``row`` itself.

    The gate's location, the mean of the fastest half (in a same-job pair, the middle half of
    the paired ratios), leaves out the rounds that interference slows, and with them a change
    that slows only some calls (trial 18: a cache miss on every 5th call, mean +27.7 %, read
    +3-4 %). The mean keeps them, and is held to more than the location: 99 % sure, and its
    estimate (not only its interval) at the threshold -- it is a second look at the same
    rounds. A slowdown the machine explains (drift, other processes) leaves the row
    ``inconclusive``; a regression found here is confirmed on the mean, like any other.
    ``values`` are the means of both sides (``base_value``, ``current_value``).
    """
    if measured is None or row.status != "compared" or row.change is None:
        return row
    found = measured.change
    if found.p_slower < FAIL_CONFIDENCE or found.estimate < threshold:
        return row
    shown = row.regression or row.change >= threshold  # the usual statistic sees it already
    if shown and not _clearly_larger(found, row):
        return row  # (trial 19: "slow calls in the tail" led a row slow in every call)
    why = (
        f"slow calls in the tail: the {TAIL} is {_change_text(found)}, the gate's usual "
        f"statistic {_interval_text(row.change, row.low, row.high)}"
    )
    explained = _explained(measured, slower=True)
    if explained and row.regression:
        return row
    # Explained, it is not failed but keeps the mean's numbers: the gate's UNRESOLVED lines
    # name rows by their change, and a mean +74 % under a location +3.9 % went unnamed there
    # (trial 19, beside a TensorFlow neighbour).
    verdict = "inconclusive" if explained else "slower"
    reason = f"{why}, but {explained}" if explained else why
    decision = Decision(verdict, not explained and found.high >= threshold, reason, threshold)
    tailed = row_of(measured, decision, {**_common_of(row), **values}, row.forced)
    return replace(tailed, statistic=TAIL)


def _clearly_larger(mean: Change, row: Row) -> bool:
    """Whether the mean's slowdown is beyond the row's interval and at least twice its change
    (on the log scale): slow calls in the tail, not a uniform slowdown the two statistics
    measure a few percent apart (+194 % against +183 %, both intervals narrow)."""
    if row.change is None or row.high is None or row.change <= -1:
        return False
    return mean.low > row.high and mean.log >= 2 * math.log1p(row.change)


def tail_values(base: Side, current: RunSummary) -> dict[str, float]:
    """A tail row's base and current round times: the means of all rounds, the statistic of its
    change (the saved runs' geometric mean of them, as for the location)."""
    runs = sessions(base.runs) or list(base.runs)
    logs = [run.mean.log for run in runs if run.mean is not None]
    if not logs or current.mean is None:
        return {}
    base_value = math.exp(math.fsum(logs) / len(logs))
    return {"base_value": base_value, "current_value": current.mean.value}


def _interval_text(change: float | None, low: float | None, high: float | None) -> str:
    if change is None or low is None or high is None:
        return "unknown"
    return f"{change:+.1%} [{low:+.1%}, {high:+.1%}]"


def _change_text(found: Change) -> str:
    return _interval_text(found.estimate, found.low, found.high)


def _common_of(row: Row) -> dict[str, Any]:
    keys = ("nodeid", "metric", "unit", "higher_is_better", "base_value", "current_value")
    return {key: getattr(row, key) for key in keys}


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
