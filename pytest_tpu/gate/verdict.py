"""A measured change against a threshold: ``slower``, ``faster``, ``unchanged`` or ``inconclusive``,
with the reason, and whether it fails the gate."""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist
from typing import Any

from pytest_tpu.gate import bandwidth, contention
from pytest_tpu.gate.history import DEFAULT_KEEP
from pytest_tpu.gate.model import MACHINE_CONFIDENCE, Decision, Measured, Row
from pytest_tpu.gate.stats import FAIL_CONFIDENCE, Change
from pytest_tpu.units import format_detectable

# Before what about the machine could explain a change as well, in a row's reason (``lines``
# repeats that part in an UNRESOLVED line).
ALSO = "; also, "


def decide(measured: Measured, threshold: float) -> Decision:
    """The verdict of one measured change against ``threshold`` (a round-time slowdown)."""
    return replace(_decided(measured, threshold), threshold=threshold)


def _decided(measured: Measured, threshold: float) -> Decision:
    found = measured.change
    floor = threshold / 2
    if found.p_slower >= FAIL_CONFIDENCE and found.estimate >= floor:
        drift = explained_by_machine(measured, slower=True)
        if drift:
            return Decision("inconclusive", False, drift)
        return Decision("slower", found.high >= threshold)
    if found.p_slower <= 1 - FAIL_CONFIDENCE and found.estimate <= -floor:
        drift = explained_by_machine(measured, slower=False)
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
    machine = explained_by_machine(measured, slower=measured.change.estimate > 0)
    return f"{why}{ALSO}{machine}" if machine else why


def explained_by_machine(measured: Measured, slower: bool) -> str:
    """Why a change cannot be blamed on the code, or "": the machine's own drift (raw rounds),
    or other processes' use of the CPUs, or the host's memory speed (any mode: a kernel runs as
    fast as ever beside a neighbour, or a host, that slows the benchmark)."""
    return (
        _drift_explains(measured, slower)
        or contention.explains(measured.others_saved, measured.others_now, slower)
        or bandwidth.explains(measured.copy_saved, measured.copy_now, measured.change, slower)
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
        f"the calibration kernel timed beside this benchmark's rounds ran "
        f"{abs(machine.estimate):.1%} {way} than beside its saved ones (a reading of the machine "
        "for this row, as noisy as the kernel's rounds); a raw change this size cannot be told "
        "from that drift"
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
    copies = bandwidth.copies_change(measured.copy_saved, measured.copy_now)
    row = Row(
        status="compared",
        verdict=decision.verdict,
        regression=decision.regression,
        forced=forced,
        calibrated=measured.mode == "calibrated",
        machine=None if machine is None else machine.estimate,
        reason=decision.reason,
        threshold=decision.threshold,
        memory_copy=None if copies is None else copies.estimate,
        **common,
    )
    return with_change(row, measured.change)


def interval_agrees(low: float, high: float, threshold: float) -> bool:
    """Whether a re-measurement's 95 % interval agrees with a regression found before: above zero
    (97.5 % one-sided) and reaching the threshold. Agreeing asks less than finding: it has only
    to rule out what made the first measurement alone (a burst of load; in a same-job comparison,
    ``sameref.confirm``, an offset between two processes)."""
    return low > 0 and high >= threshold


# How sure two processes' readings of one change must be to differ before the gate takes their
# processes to differ by more than the saved runs showed (``processes_apart``).
APART_CONFIDENCE = 0.99


def processes_apart(first: Row, again: Change, threshold: float, slower: bool = True) -> bool:
    """Whether this session's reading of a change (``first``, a row) and a fresh process's
    (``again``) lie further apart than both their intervals allow at ``APART_CONFIDENCE``, and
    by a gap that could bring the change under what its verdict claims: ``threshold`` for a
    slowdown, half of it for an improvement (``slower=False``; what a ``faster`` row claims).

    Both are measured against the same saved runs, so their difference is the two processes'
    own: an interval that covers the noise between sessions covers it too. Where they are
    further apart, the processes differ by more than the saved runs showed, and neither
    reading's interval can be trusted. Each standard error is taken from its 95 % interval on
    the normal quantile, which overstates it for few degrees of freedom: the test leans to
    keeping a verdict. (g34, quiet: an unchanged Keras transformer read +27.9 % [+18.7,
    +37.8] in the session, confirmed in fresh rounds, and +8.2 % [+1.6, +21.9] in a fresh
    process, which agreed it was slower: the gate failed unchanged code.)
    """
    if first.change is None or first.low is None or first.high is None:
        return False
    z95 = NormalDist().inv_cdf(0.975)

    def se(low: float, high: float) -> float:
        # An interval reaching -100 % (a baseline of 1e20 s) is unbounded: nothing is apart.
        return (math.log1p(high) - math.log1p(low)) / (2 * z95) if low > -1 else math.inf

    spread = math.hypot(se(first.low, first.high), se(again.low, again.high))
    if not (spread > 0 and math.isfinite(spread)):
        return False
    apart = abs(math.log1p(first.change) - again.log)
    if apart <= NormalDist().inv_cdf(0.5 + APART_CONFIDENCE / 2) * spread:
        return False
    # Apart leaves the size of a change open, not always its being past what it claims: where
    # both intervals' near ends, moved toward zero by as much again as the two differ, stay past
    # it, the processes differ in how much, not in whether (CI: a forced 1 us baseline read
    # +14529 % here and +20504 % in a fresh process, and the gate passed it).
    if slower:
        ends, bar = (first.low, again.low), math.log1p(threshold)
    else:  # mirrored: how far below zero each interval's upper end lies
        ends, bar = (first.high, again.high), -math.log1p(-threshold / 2)
    nearest = min((1 if slower else -1) * math.log1p(end) for end in ends)
    return nearest - apart < bar


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
    if found.estimate < threshold / 2 or explained_by_machine(measured, slower=True):
        return False
    return interval_agrees(found.low, found.high, threshold)


def improvement_agrees(measured: Measured, decision: Decision, threshold: float) -> bool:
    """Whether a fresh process's reading (``measured``, decided as ``decision``) agrees with an
    improvement this session found: ``faster`` on its own, or an interval wholly below zero
    (97.5 % one-sided) around an improvement of at least half the threshold, with nothing about
    the machine to explain it; the mirror of ``agrees``."""
    found = measured.change
    if decision.verdict == "faster":
        return True
    if found.estimate > -threshold / 2 or explained_by_machine(measured, slower=False):
        return False
    return found.high < 0


def interval_text(change: float | None, low: float | None, high: float | None) -> str:
    if change is None or low is None or high is None:
        return "unknown"
    return f"{change:+.1%} [{low:+.1%}, {high:+.1%}]"


def change_text(found: Change) -> str:
    return interval_text(found.estimate, found.low, found.high)


def common_of(row: Row) -> dict[str, Any]:
    keys = ("nodeid", "metric", "unit", "higher_is_better", "base_value", "current_value")
    return {key: getattr(row, key) for key in keys}
