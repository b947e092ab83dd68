"""The gate's lines in the terminal summary (plain data in, strings out)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pytest_tpu.gate.compare import Row, compared
from pytest_tpu.gate.history import RunSummary, duration, saved_reach
from pytest_tpu.gate.stats import (
    CONFIDENCE,
    FAIL_CONFIDENCE,
    by_one_pair,
    by_two_pairs,
    one_pair_cannot_catch,
    one_pair_may_hide,
    two_pairs_hide,
)
from pytest_tpu.gate.verdict import ALSO
from pytest_tpu.options import REGRESSION_EXIT_CODE
from pytest_tpu.report.model import OTHER_METRICS, display_name, verdict_word
from pytest_tpu.units import format_detectable


def pct(value: float | None) -> str:
    if value is None:
        return "?"
    if math.isinf(value):
        return "+inf%" if value > 0 else "-inf%"
    return f"{value:+.1%}"


def sure(value: float | None) -> str:
    """A probability as "how sure", never 100 %: the model behind it is not that certain."""
    return "?" if value is None else f"{min(value, 0.999):.1%}"


# The order the counts are said in: the verdicts as the closing counts line has them
# (``report.comparison_summary``), then a status of its own (``base failed``, ``unmeasured``),
# then the benchmarks only one side has.
_VERDICTS = ("slower", "larger", "faster", "smaller", "unchanged", "inconclusive")
_ONE_SIDE = ("new", "missing")


def _counted_first(status: str) -> int:
    if status in _VERDICTS:
        return _VERDICTS.index(status)
    if status in _ONE_SIDE:
        return len(_VERDICTS) + 1 + _ONE_SIDE.index(status)
    return len(_VERDICTS)


def comparison_lines(path: str, rows: list[Row], baseline: bool = True) -> list[str]:
    """Summary lines of a comparison: counts, then one line per benchmark."""
    what = f"baseline {path}" if baseline else path
    if not rows:  # no table follows: say what there was to compare, not "(table below)"
        return [f"compared with {what}: nothing (no benchmark measured in this session)"]
    # Time first, each other metric apart, as the closing counts line has them (trial 22: memory
    # rows' "2 unchanged" counted with the time rows here and apart there).
    counts: dict[str, dict[str, int]] = {"time": {}}
    for row in rows:
        key = row.status
        if row.status == "compared" and row.verdict:
            key = verdict_word(row.verdict, row.metric)  # memory: larger / smaller
        of = counts.setdefault(row.metric if row.metric in OTHER_METRICS else "time", {})
        of[key] = of.get(key, 0) + 1
    # In the closing counts line's order, whatever order the rows came in (new-user trial 69:
    # "1 inconclusive, 1 slower, 2 unchanged" in one session, "2 unchanged, 1 slower, 1
    # inconclusive" in the next).
    said = [
        (f"{metric}: " if metric != "time" else "")
        + ", ".join(f"{of[status]} {status}" for status in sorted(of, key=_counted_first))
        for metric in ("time", *OTHER_METRICS)
        if (of := counts.get(metric, {}))
    ]
    # One line: the rows are the comparison table's, drawn once by the summary.
    return [f"compared with {what}: {'; '.join(said)} (table below)"]


def gate_verdict(rows: Sequence[Row]) -> str:
    """The session's verdict as the reports carry it: ``failed``, ``inconclusive`` (no
    regression shown, but a row could hide one of its threshold), ``passed`` (every row rules
    one out) or ``nothing checked``."""
    measured = compared(rows)
    if not measured:
        return "nothing checked"
    if any(row.regression for row in measured):
        return "failed"
    return "inconclusive" if _doubtful(measured) else "passed"


def _doubtful(measured: Sequence[Row]) -> list[Row]:
    """The inconclusive rows that could hide a slowdown of their threshold. Those whose interval
    rules it out (an improvement not yet resolved, trial 16: -1.5% [-2.9, -0.0] at 2 %) hide
    nothing from the gate."""
    return [row for row in measured if row.verdict == "inconclusive" and _may_hide(row)]


def _checked(measured: Sequence[Row], not_gated: Sequence[str]) -> str:
    """How many rows the gate judged, by metric where there are several, and which metrics the
    table shows that it did not judge (its counts line has their rows too)."""
    by_metric = Counter(row.metric for row in measured)
    said = f"{len(measured)} checked"
    if set(by_metric) != {"time"}:
        said += " (" + ", ".join(f"{n} {metric}" for metric, n in by_metric.items()) + ")"
    if not_gated:
        said += f"; {' and '.join(not_gated)} rows shown, not gated"
    return said


def _not_checked(rows: Sequence[Row]) -> str:
    """What a passing gate did not check, by status (new, missing, failed, unmeasured, ...), or
    "": a renamed benchmark (new and missing) or one this run did not measure leaves the gate,
    and the line says so (trial 17: "passed, 4 checked" under xdist, three rows unnamed)."""
    left = Counter(row.status for row in rows if row.status != "compared")
    if not left:
        return ""
    said = ", ".join(f"{n} {status}" for status, n in sorted(left.items()))
    unmeasured = next((row for row in rows if row.status == "unmeasured" and row.reason), None)
    why = f" ({unmeasured.reason})" if unmeasured is not None else ""
    return f"; not checked: {said}{why}"


def _limits(threshold: float, limits: Mapping[str, float] | None) -> str:
    """``5%`` for a time gate, ``time 5%, memory 2%`` where other metrics are gated (trial 15:
    a memory regression failed a gate whose line said only "(5%)")."""
    if not limits or set(limits) == {"time"}:
        return f"{threshold:g}%"
    return ", ".join(f"{metric} {pct:g}%" for metric, pct in limits.items())


def _nothing_why(rows: Sequence[Row]) -> str:
    """Why a gate checked nothing: its rows' statuses and, where they are incompatible, the first
    cause and the way out. The exit code stays 0 (nothing regressed), so the line is all a CI
    log shows of a gate that will pass every run until someone acts (trial 33: "all skipped,
    failed, new, incompatible or --benchmark-disable" left the reader to guess which)."""
    if not rows:
        return "no benchmark measured in this session, or --benchmark-disable"
    left = Counter(row.status for row in rows)
    said = ", ".join(f"{n} {status}" for status, n in sorted(left.items()))
    unmeasured = next((row for row in rows if row.status == "unmeasured" and row.reason), None)
    if unmeasured is not None:
        return f"{said}: {unmeasured.reason}"
    incompatible = next((row for row in rows if row.status == "incompatible" and row.reason), None)
    if incompatible is None:
        return said
    return (
        f"{said}: {incompatible.reason}; this gate passes every run until the baseline is saved"
        " again in a compatible environment, or --tpu-compare-force compares anyway"
    )


_INCONCLUSIVE = "INCONCLUSIVE"  # a verdict line's word where a row could hide a regression
_FAILED = ": FAILED, "  # between the gate's name and its count, in a failed verdict line


def gate_lines(
    rows: Sequence[Row],
    threshold: float,
    name: str | None,
    not_gated: Sequence[str] = (),
    limits: Mapping[str, float] | None = None,
) -> list[str]:
    """The verdict of --fail-on-regression, naming each regressed benchmark; ``not_gated``: the
    metrics of the comparison that no threshold names; ``limits``: every gated metric's
    threshold in %, named in the verdict line where there is more than time's."""
    measured = compared(rows)
    gate = f"regression gate ({_limits(threshold, limits)})"
    if not measured:
        why = _nothing_why(rows)
        return [f"{gate}: NOTHING CHECKED - no benchmark was measured against the baseline ({why})"]
    failing = [row for row in measured if row.regression]
    doubtful = _doubtful(measured)
    if not failing:
        # "Passed" only where every row rules a slowdown of its threshold out. Where one could
        # hide it the gate does not fail (noise must not), but it does not say "passed" either:
        # trial 29's stored sessions headlined "passed, 6 checked" over 5 rows that could not
        # resolve 5 % (they caught 20 % to 115 %), and "passed" is what a CI log is read for.
        # Rows of several metrics each have their own threshold (compile 25 %, not time's 5 %),
        # and so does a time row with a marker (trial 16: 30 % under a session's 10 %).
        owns = {(row.metric, _own_threshold(row, threshold)) for row in doubtful}
        only = next(iter(owns)) if len(owns) == 1 else None
        size = (
            f"a {only[1]:g}% slowdown"
            if only is not None and only[0] == "time"
            else "a slowdown of its threshold"
        )
        note = _inconclusive_note(measured, doubtful, size, threshold)
        unresolved = [_unresolved_line(row, threshold) for row in doubtful]
        checked = _checked(measured, not_gated) + _not_checked(rows)
        head = f"{_INCONCLUSIVE} (no regression shown)" if doubtful else "passed"
        verdict = f"{gate}: {head}, {checked}{note}"
        return [line for line in unresolved if line] + [verdict]
    lines = [_regression_line(row, name) for row in failing]
    # What it could not rule out is named whether or not the session fails on something else.
    lines += [line for line in (_unresolved_line(row, threshold) for row in doubtful) if line]
    confirmed = " and confirmed" if all(row.confirmed for row in failing) else ""
    lines.append(
        f"{gate}{_FAILED}{len(failing)} benchmark(s) regressed"
        f"{confirmed}{_also_open(doubtful, threshold)}; exit code {REGRESSION_EXIT_CODE}"
    )
    return lines


def _also_open(doubtful: Sequence[Row], threshold: float) -> str:
    """What a failed verdict line says of the rows that could hide a slowdown as well, or "".

    The line a CI log is read for names them as a passing one does (trial 37: "FAILED, 1
    benchmark(s) regressed and confirmed; exit code 6" beside a row that detected only 91 %,
    found only in the table); an UNRESOLVED line above names only those whose estimate is past
    the threshold."""
    if not doubtful:
        return ""
    return f"; {len(doubtful)} more could hide a slowdown ({_which(doubtful, threshold)})"


def verdict_line(said: Sequence[str]) -> tuple[str, str] | None:
    """The verdict line among the lines ``gate_lines`` said, and its word (``failed``,
    ``inconclusive``, ``passed`` or ``nothing checked``), or None."""
    line = next((line for line in said if line.startswith("regression gate (")), None)
    if line is None:
        return None
    verdict = line.partition("): ")[2]
    for start, word in (
        (_FAILED.removeprefix(": "), "failed"),
        (_INCONCLUSIVE, "inconclusive"),
        ("passed", "passed"),
    ):
        if verdict.startswith(start):
            return line, word
    return line, "nothing checked"


def _inconclusive_note(
    measured: Sequence[Row], doubtful: Sequence[Row], size: str, threshold: float
) -> str:
    """What a passing verdict line says of the table's inconclusive rows: how many, and how many
    of them could hide a slowdown. All of them counted, as the summary counts them (trial 18:
    "6 inconclusive" there beside "5 inconclusive" here), and said so that the count of those
    that could hide it does not read as a share of the rows checked (trial 22: "5 of 6
    inconclusive" with every one of 6 rows inconclusive)."""
    undecided = sum(row.verdict == "inconclusive" for row in measured)
    if not undecided:
        return ""
    if not doubtful:
        return f"; {undecided} inconclusive, each ruling a slowdown of its threshold out"
    if undecided == len(doubtful):
        ruled = f"neither shown nor ruled out ({_which(doubtful, threshold)})"
        return f"; {undecided} inconclusive: {size} there is {ruled}"
    return (
        f"; {undecided} inconclusive, {len(doubtful)} of which could hide {size} "
        f"(neither shown nor ruled out: {_which(doubtful, threshold)})"
    )


# A line names at most this many rows, and how many more the table holds.
NAMED_AT_MOST = 5


def _which(rows: Sequence[Row], threshold: float) -> str:
    """The rows a count stands for, by the names the table shows them under, where they are few
    (trial 31: "2 of which could hide a 5% slowdown ... see the table" beside three
    ``inconclusive`` rows, and nothing in the table told the two apart), each with the smallest
    slowdown it could have seen: a slowdown the estimate missed (trial 34: +30 % read -7 %) is
    named nowhere else, and this is the size of what could have gone unseen."""
    named = ", ".join(_named(row, threshold) for row in rows[:NAMED_AT_MOST])
    if len(rows) > NAMED_AT_MOST:  # trial 40: six rows, and the line named none of them
        return f"{named} and {len(rows) - NAMED_AT_MOST} more (see the table)"
    return named


def _named(row: Row, threshold: float) -> str:
    """A row as the table names it (``test_x (compile)`` under its benchmark), with why it could
    hide the slowdown: the smallest slowdown it could have seen where that is past its threshold,
    else how far its interval reaches where that is past it, else that one pair of processes
    measured it (trial 35: "detects 3.5%" beside "a 5% slowdown
    ... neither shown nor ruled out" read as a contradiction: one pair must rule out half the
    threshold, for an offset between two processes it cannot show)."""
    name = display_name(row.nodeid) + (f" ({row.metric})" if row.metric != "time" else "")
    if row.metric != "time" or row.detectable is None or not math.isfinite(row.detectable):
        return name
    own = _own_threshold(row, threshold)
    if row.detectable * 100 > own:
        return f"{name} detects {format_detectable(row.detectable * 100)}"
    if row.high is not None and row.high * 100 >= own:
        # Its own interval reaches the threshold, whoever measured it: say so, as its note does
        # (trial 37: "(one pair of processes)" beside a note on +2.4 % [-0.5, +5.3] read as two
        # reasons for one row).
        return f"{name} up to {pct(row.high)}"
    # Not in parentheses of its own: the line's list of rows is in parentheses (new-user trial 69
    # read "(test_x (one pair of processes))" as hard to parse). "Under it" first: new-user trial
    # 70 read "neither shown nor ruled out (test_x by two pairs of processes only)" beside the
    # row's +3.6 % [-0.3, +7.7] at 10 % as a contradiction; the interval is under the threshold,
    # and what leaves the slowdown open is who measured it.
    if by_two_pairs(row.noise_source):
        return f"{name} under it in two pairs of processes only"
    if by_one_pair(row.noise_source):
        return f"{name} under it in one pair of processes only"
    return name


def between_sessions_hint(rows: Sequence[Row], thresholds: Mapping[str, float]) -> str:
    """What to do when stored runs cannot resolve the threshold, or "".

    Rows whose smallest detectable slowdown is past their own time threshold (``thresholds``,
    fractions by node id) are measured against sessions that differ by more than it: more saved
    runs narrow a short history, and only a comparison within one job leaves the sessions out.
    """
    measured = compared(rows)
    open_rows = [
        row
        for row in measured
        if row.metric == "time"
        and row.verdict == "inconclusive"
        and row.detectable is not None
        and row.nodeid in thresholds
        and row.detectable > thresholds[row.nodeid]
    ]
    if not open_rows:
        return ""
    finite = [
        r.detectable for r in open_rows if r.detectable is not None and math.isfinite(r.detectable)
    ]
    span = f" (they catch {min(finite):.0%} to {max(finite):.0%})" if finite else ""
    if len(finite) == 1:
        span = f" (it catches {finite[0]:.0%})"
    # One saved run measures nothing between sessions: what stood in was assumed, not found.
    assumed = all(row.noise_source.startswith("assumed") for row in open_rows)
    why = (
        "one saved run measures nothing between sessions, so they were assumed to differ by at "
        "least the threshold"
        if assumed
        else "their sessions differ by more than it here"
    )
    return (
        f"{len(open_rows)} of {len(measured)} benchmark(s) cannot resolve their threshold "
        f"against the saved runs{span}: {why}. Each run "
        "saved narrows a short history; --compare-ref=REF measures base and head in one job, "
        "which leaves the differences between sessions out (README: 'Base and head in the same "
        "job')"
    )


def saved_span_note(runs: Iterable[RunSummary], now: datetime) -> str:
    """What the saved runs behind failing regressions cover in time, where this session lies
    further from them than they lie from each other; else "".

    Their spread is the noise of sessions as far apart as they were. On this project's VM, five
    runs saved within 2.5 minutes had unchanged Keras models within about 5 % of each other, and
    the sessions of the next 25 minutes read the CNN a median 17 % slower (up to 57 %) while the
    calibration kernel did not follow (g36); a fresh process read it as slow, and the gate failed
    unchanged code. Nothing in one session tells such a machine from the code, so the line says
    what the evidence spans and where to get more: runs saved at other times, or both sides in
    one job.
    """
    reach = saved_reach(runs, now)
    if reach is None:
        return ""
    first, last = reach.times[0], reach.times[-1]
    return (
        f"the saved runs these regressions were measured against were saved within "
        f"{duration(reach.span)} ({first:%Y-%m-%d %H:%M}-{last:%H:%M} UTC) and this session ran "
        f"{duration(reach.after)} after the last of them: their spread is how much sessions that "
        "close together differ, and sessions further apart can differ by more on a shared machine. "
        "Runs saved at other times (from CI on main) measure that; --compare-ref=REF measures "
        "base and head in one job (README: 'Saved runs over time')"
    )


def noise_line(nodeid: str, raw: float | None, calibrated: float | None, runs: int) -> str:
    """What --measure-noise found for one benchmark."""
    if raw is None:
        return f"  {nodeid}: fewer than two runs with samples; no estimate"
    spread = f"raw spread {raw:.1%}"
    if calibrated is not None:
        spread += f", calibrated spread {calibrated:.2%}"
    return f"  {nodeid}: {runs} runs, {spread} (run to run within this session)"


def _may_hide(row: Row) -> bool:
    """Whether a slowdown of the row's threshold is not ruled out: by its interval, or, for one
    pair of processes leaning slower or whose rounds could not have caught the threshold, by an
    offset between the two that its interval leaves out (``sameref.rows.one_pair``)."""
    if row.high is None or row.threshold is None or row.high >= row.threshold:
        return True
    if by_two_pairs(row.noise_source):  # their mean left no room for its offset, or a speed-up
        return two_pairs_hide(row.noise_source, row.reason)
    if row.change is None or not by_one_pair(row.noise_source):
        return False
    return one_pair_cannot_catch(row.detectable, row.threshold) or one_pair_may_hide(
        row.change, row.high, row.threshold
    )


def _own_threshold(row: Row, threshold: float) -> float:
    """The time threshold a row was judged against, in %: its marker's, else the session's."""
    return row.threshold * 100 if row.threshold is not None else threshold


def _unresolved_line(row: Row, threshold: float) -> str:
    """A passing gate names what it could not rule out: an inconclusive row whose estimate is
    past its threshold, so that a green run does not hide a slowdown it was too noisy to see."""
    own = _own_threshold(row, threshold)
    if row.metric != "time" or row.change is None or row.change * 100 < own:
        return ""
    catches = (
        f"; this comparison catches {format_detectable(row.detectable * 100)} 4 times in 5"
        if row.detectable is not None and math.isfinite(row.detectable)
        else ""
    )
    # A 95 % interval above the threshold is not yet the 99 % one-sided the gate fails at (with
    # few saved runs the two differ widely); say how sure it is, or it reads as a contradiction.
    confidence = row.confidence if row.confidence is not None else 0.0
    why = (
        f"not shown to be slower ({sure(confidence)} sure; the gate fails at {FAIL_CONFIDENCE:.0%})"
        if confidence < FAIL_CONFIDENCE
        else f"not failed: {row.reason}"
    )
    # What about the machine could explain the change as well (a neighbour, drift) is said here
    # too: this line is what a CI log shows (trial 22: only the row's note named a neighbour
    # that took 0.74 of 2 cores).
    machine = row.reason.partition(ALSO)[2] if confidence < FAIL_CONFIDENCE else ""
    # One pair's interval is its rounds' own (trial 40, point 3), as the legend says too.
    alone = " of one pair of processes' rounds" if by_one_pair(row.noise_source) else ""
    return (
        f"UNRESOLVED {row.nodeid}: time{_statistic(row)} {pct(row.change)} (95% interval"
        f"{alone} {pct(row.low)} .. {pct(row.high)}), past its {own:g}% threshold but {why}"
        f"{catches} (noise: {row.noise_source or 'unknown'})"
        + (f"{ALSO}{machine}" if machine else "")
    )


def _regression_line(row: Row, name: str | None) -> str:
    if row.metric == "memory":  # deterministic: no interval to give
        change = "grew from 0 B" if row.change is None else pct(row.change)  # no ratio to 0 B
        return (
            f"REGRESSION {row.nodeid}: memory {change} vs {name!r} "
            f"({row.current_value:.0f} B against at most {row.base_value:.0f} B; "
            f"{row.noise_source})"
        )
    # The interval reaching the threshold is what fails a sure slowdown (README: "Slower needs
    # evidence"); said, or +21 % failing a 30 % marker reads as a contradiction (trial 16).
    reaches = (
        f", reaching its {row.threshold * 100:g}% threshold"
        if row.metric == "time" and row.threshold is not None
        else ""
    )
    return (
        f"REGRESSION {row.nodeid}: {row.metric}{_statistic(row)} {pct(row.change)} vs {name!r} "
        f"(95% interval {pct(row.low)} .. {pct(row.high)}{reaches}; {sure(row.confidence)} sure "
        f"it is slower{_by_whom(row)}; {row.reason or 'measured once'})"
    )


def _statistic(row: Row) -> str:
    """`` (mean of all rounds)`` after the metric of a row on that statistic, else nothing."""
    return f" ({row.statistic})" if row.statistic else ""


def _by_whom(row: Row) -> str:
    """Whose certainty a confirmed row gives, where it is under the gate's own: the
    re-measurement's, which agrees at 97.5 % once the first found it at 99 % (trial 18: "97.7 %
    sure" on a failing line read as the gate failing below its rule)."""
    if row.confirmed is not True or row.confidence is None or row.confidence >= FAIL_CONFIDENCE:
        return ""
    agreeing = (1 + CONFIDENCE) / 2  # a 95 % interval above zero: 97.5 % one-sided
    return (
        f" by the re-measurement that confirmed it (a confirmation needs {agreeing:.1%}: its "
        f"95% interval above zero; the first measurement needed {FAIL_CONFIDENCE:.0%})"
    )
