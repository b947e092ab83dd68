"""A same-job regression stands only if a second pair of fresh processes agrees.

Pairing neighbouring rounds cancels what the machine does over time, and pinning both sides'
threads alike (``pinning``) cancels where they run, but not everything that differs between the two
processes: a benchmark can run a percent or two faster in one process than in another with the same
code (where its buffers land, how its dicts hash), for the whole session. Rounds of the same two
processes cannot reveal that, so a benchmark about to fail is measured again by a new head process
and a new base process -- a nested ``--compare-ref`` session of just those benchmarks -- and the
session fails only where that measurement agrees. An improvement of the threshold or more is
measured by the same new pair and stands only where it agrees (mirrored). Where the new pair agrees
with a regression, a third pair measures it and the spread between the three pairs decides
(``pairs``; two more pairs where three leave it open): two pairs can agree on an offset of their
processes by chance, each within its own narrow interval. So is a regression the new pair lies
further from than both pairs' rounds allow (two pairs, two offsets), and a slowdown that one pair
was sure of between half the threshold and the threshold (``rows.doubtful``): an offset may have
made a regression of the threshold look that small, and one pair alone calls it nothing either
way. Passing sessions without an improvement or such a slowdown pay nothing.

Agreeing asks less than finding: the first pair was already 99 % (one-sided) sure of a slowdown
whose interval reaches the threshold; the new pair has only to rule out that the first pair's
processes made it. So a regression stands where the new pair's own gate fails, or where its 95 %
interval lies above zero (97.5 % one-sided) and reaches the threshold. A new pair that sees no
slowdown, or one clearly below the threshold, withdraws it; the row stays ``slower`` (not a
regression) where the new pair's 95 % interval lies above zero and its change is at least half the
threshold -- two pairs then agree on a slowdown no offset between processes explains --,
``unchanged`` where the new pair itself says so (its interval within the threshold, its change
under half of it), and ``inconclusive`` otherwise; where the two pairs lie further apart than
both their rounds allow, that row's change is uncertain by the spread between the pairs
(``pairs``), not by the new pair's rounds alone.
(Measured here with the stricter rule, both pairs failing on their own: the new pair withdrew 16 of
the 23 first-pair failures of a Keras CNN made 10 % slower, most of them measured again at +4 to
+12 % with intervals from just below to just above zero; a new pair measures only the failing
benchmarks, the first of them in a fresh process.) A re-measurement that cannot run leaves the
first measurement standing, and the summary says so: a broken confirmation must not turn a measured
regression into a pass.

A new pair can also be too noisy to tell either way: its interval reaches below zero and past the
threshold, and it could not have caught the threshold reliably (a burst of load in a handful of
rounds, a fresh process still settling). Withdrawing on such a measurement would let noise in the
confirmation hide a real regression, so those benchmarks are measured once more, by yet another
pair, with as many times their rounds as the new pair's own detectable change asks for (at least 2,
at most ``--tpu-compare-ref-rounds``), and that pair decides by the same rule. (Measured here in
r25, with a bursty neighbour: 3 of 10 Keras CNN ``benchmark(fn)`` rows made 10 % slower were
withdrawn by new pairs whose 8-11 rounds gave intervals 18-26 points wide, such as +2.8 %
[-8.6 %, +15.5 %].)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Row, interval_agrees, with_change
from pytest_tpu.gate.lines import pct
from pytest_tpu.gate.stats import TAIL, Change
from pytest_tpu.sameref import pairs, seed, worktree
from pytest_tpu.sameref.reportrow import number, numbers
from pytest_tpu.sameref.rows import TAIL_ENV, doubtful, factor_within
from pytest_tpu.sameref.swap import SWAPPED_KEY, Swap, inverted

CONFIRM_ENV = "PYTEST_TPU_REF_CONFIRMING"  # set in the nested session: it does not confirm again
ROUNDS_ENV = "PYTEST_TPU_REF_ROUNDS"  # {node id: factor} in a session with more rounds, as JSON
TIMEOUT_S = 3600.0
GRACE_S = 1.0  # a nested session that got the same Ctrl-C is cleaning up already
STOP_S = 30.0  # for a SIGTERMed nested session to stop its base session and remove its worktree


def confirming() -> bool:
    """Whether this session is itself the re-measurement."""
    return bool(os.environ.get(CONFIRM_ENV))


def more_rounds_for(
    failing: Sequence[str],
    again: Mapping[str, Mapping[str, Any] | None],
    thresholds: Mapping[str, float],
    most: int,
    inherited: Mapping[str, int],
) -> dict[str, int]:
    """The regressions a new pair could not tell, with the times the first pair's rounds their
    next pair takes: what ``once_more`` asks, on top of what this session already had
    (``inherited``), but never past ``most`` in all (trial 15: a row measured again with 4x the
    rounds asked 4x more of that, "once more with 16x the rounds" under the default of 4, 85 s
    for one benchmark)."""
    wanted = {}
    for nodeid in failing:
        factor = once_more(again.get(nodeid), thresholds[nodeid], most)
        if factor:
            had = inherited.get(nodeid, 1)
            wanted[nodeid] = max(had, min(most, factor * had))
    return wanted


def factors() -> dict[str, int]:
    """The round factor of each benchmark of a session with more rounds, by node id."""
    try:
        found = json.loads(os.environ.get(ROUNDS_ENV) or "{}")
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): int(v) for k, v in found.items() if isinstance(v, int) and v > 1}


def command(
    nodeids: Sequence[str], commit: str, pct: float, report: Path, measuring: Sequence[str]
) -> list[str]:
    return [
        sys.executable, "-m", "pytest", *nodeids, "-q", "-p", "no:cacheprovider",
        "-p", "no:randomly", f"--compare-ref={commit}", f"--fail-on-regression={pct:g}",
        f"--tpu-report={report}", *measuring,
    ]  # fmt: skip


def remeasure(
    rows: Sequence[Row],
    commit: str,
    pct: float,
    rootdir: Path,
    measuring: Sequence[str],
    own: Mapping[str, float] | None = None,
    most: int = 1,
    swap: Swap | None = None,
) -> tuple[list[Row], str]:
    """``rows`` with each regression (and improvement) confirmed or withdrawn, and a line on
    what ran.

    ``pct`` is the session's time threshold in percent; ``own`` a benchmark's own (a fraction,
    from its marker), by node id; ``most`` the largest factor of rounds for a pair measuring once
    more where the new pair could not tell. The nested sessions read the same markers. With
    ``swap``, the first new pair and every second one after it run with the roles swapped.
    """
    thresholds = {row.nodeid: (own or {}).get(row.nodeid, pct / 100) for row in rows}
    failing = [row.nodeid for row in rows if row.regression]
    # An improvement from one pair can be the two processes' offset as much as a regression can.
    improving = [row.nodeid for row in rows if row.status == "compared" and row.verdict == "faster"]
    # A slowdown under the threshold that one pair is sure of can be a regression of the
    # threshold that an offset between its processes made look smaller (``rows.doubtful``).
    under = [row.nodeid for row in rows if doubtful(row, thresholds[row.nodeid])]
    if not failing and not improving and not under:
        return list(rows), ""
    env = _confirming(rows)
    measured = failing + improving + under
    again, problem = nested(measured, commit, pct, rootdir, measuring, env, swap)
    if problem:  # a broken re-measurement must not turn a measured regression into a pass
        return list(rows), f"the re-measurement {problem}: the first one stands"
    counts = [f"{len(failing)} regression(s)"] if failing else []
    counts += [f"{len(improving)} improvement(s)"] if improving else []
    counts += [f"{len(under)} slowdown(s) under the threshold"] if under else []
    line = f"re-measured {' and '.join(counts)} in a new pair of processes"
    inherited = factors()  # a session with more rounds already: its new pairs start there
    wanted = more_rounds_for(failing, again, thresholds, most, inherited)
    # A regression the new pair agrees with is measured by a third pair, and the spread between
    # the pairs decides: two pairs can agree on an offset of their processes (trial 17: an
    # unchanged 1 ms Python tokenizer read +4.5 % [+3.5, +5.5] and +5.1 % [+4.5, +5.7], and
    # failed a 5 % gate "99.9 % sure"; its pairs read -4.0 % to +5.1 % across sessions). So is
    # one that the new pair lies further from than both pairs' rounds allow (two pairs, two
    # offsets: neither tells which is nearer the code's change), and a slowdown under the
    # threshold that the new pair measured at all.
    by_id = {row.nodeid: row for row in rows}
    agreed = [
        n
        for n in failing
        if n not in wanted and to_more_pairs(by_id[n], again.get(n), thresholds[n])
    ]
    agreed += [n for n in under if _interval(again.get(n) or {}) is not None]
    # An improvement the new pair agrees with goes to a third pair too: one new pair can share
    # the first one's offset as well for a speed-up (seen: an unchanged 56 µs tokenizer -6.9 %
    # "faster", confirmed by one new pair).
    agreed += [n for n in improving if _improves(again.get(n), thresholds[n])]
    last_rounds = {**{nodeid: inherited.get(nodeid, 1) for nodeid in agreed}, **wanted}
    more: dict[str, Mapping[str, Any]] = {}
    if last_rounds:
        env = {**_confirming(rows), ROUNDS_ENV: json.dumps(last_rounds)}
        more, problem = nested(list(last_rounds), commit, pct, rootdir, measuring, env)
        if wanted:
            line += (
                f"; {len(wanted)} that it could not tell measured once more with up to "
                f"{max(wanted.values())}x the rounds"
            )
        if agreed:
            line += f"; {len(agreed)} measured by a third pair"
        if problem:  # as above: the first measurement stands for those
            line += f" (that re-measurement {problem}: the first one stands)"
    standing = set(wanted) if problem else set()
    later = {n: [again.get(n), more.get(n)] for n in agreed}
    if agreed and not problem:
        spread = _Spread(by_id, thresholds, {n: last_rounds[n] for n in agreed})
        broken, note = spread.further(later, commit, pct, rootdir, measuring, swap)
        standing |= broken
        line += note
    judged = []
    for row in rows:
        nodeid, threshold = row.nodeid, thresholds[row.nodeid]
        if nodeid in improving:
            pairs_later = later.get(nodeid) if not problem else None
            judged.append(_improvement(row, again.get(nodeid), threshold, pairs_later))
        elif nodeid in standing:
            judged.append(row)
        elif nodeid in agreed and not problem:
            judged.append(_across(row, later[nodeid], threshold))
        else:
            extra = (wanted[nodeid], more.get(nodeid)) if nodeid in wanted else None
            judged.append(_judged(row, again.get(nodeid), threshold, extra))
    return judged, line + _outcome(judged, failing, improving, under)


def to_more_pairs(first: Row, again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a regression goes to a third pair (``remeasure``): the new pair's row ``again``
    agrees with it, or lies further from it than both pairs' rounds allow."""
    return _confirms(again, threshold) or pairs.disagree(first, again)


def _confirming(rows: Iterable[Row]) -> dict[str, str]:
    """The environment of a nested session that re-measures ``rows``' regressions: it does not
    confirm again, and judges those found on the mean of all rounds on that statistic."""
    tailed = [row.nodeid for row in rows if row.statistic == TAIL]
    return {CONFIRM_ENV: "1", **({TAIL_ENV: json.dumps(tailed)} if tailed else {})}


def _outcome(
    judged: Sequence[Row], failing: Sequence[str], improving: Sequence[str], under: Sequence[str]
) -> str:
    """How the re-measured rows came out, for the summary line: regressions and improvements
    each confirmed or withdrawn (trial 21: "1 confirmed, 1 withdrawn" counted a withdrawn
    improvement of unchanged code beside a confirmed regression), slowdowns under the threshold
    shown to reach it."""
    found = []
    for kind, measured in (("regression", failing), ("improvement", improving)):
        rows = [row for row in judged if row.nodeid in measured]
        stood = sum(row.confirmed is True for row in rows)
        if rows:
            found.append(f"{kind}s: {stood} confirmed, {len(rows) - stood} withdrawn")
    if under:
        reached = sum(row.regression for row in judged if row.nodeid in under)
        found.append(f"{reached} of {len(under)} slowdown(s) under the threshold reach it")
    return f" ({'; '.join(found)})"


def once_more(again: Mapping[str, Any] | None, threshold: float, most: int) -> int:
    """How many times its rounds a last pair needs where the new pair ``again`` (a report row, in
    percent) could not tell either way; 0 where it could (or ``most`` allows no more)."""
    if again is None or most < 2:
        return 0
    found = numbers(again, "ci_low", "ci_high", "detectable_pct")
    if found is None:
        return 0
    low, high, detectable = found
    limit = threshold * 100
    # Below zero and past the threshold, with a threshold it could not reliably catch: noise.
    if low > 0 or high < limit or not detectable > limit:
        return 0
    return factor_within(detectable / 100, threshold, most)


def nested(
    nodeids: Sequence[str],
    commit: str,
    pct: float,
    rootdir: Path,
    measuring: Sequence[str],
    env: Mapping[str, str],
    swap: Swap | None = None,
) -> tuple[dict[str, Mapping[str, Any]], str]:
    """Run a nested ``--compare-ref`` session of ``nodeids`` with ``env`` added: its report's
    time rows by name, or why there are none ("did not run (...)", "gave no comparison (...)").
    With ``swap``, the base's code leads and the rows are turned back (``swap``)."""
    cwd, added = (swap.cwd, swap.env()) if swap is not None else (rootdir, {})
    with tempfile.TemporaryDirectory(prefix="pytest-tpu-again-") as folder:
        report = Path(folder) / "again.json"
        args = command(nodeids, commit, pct, report, measuring)
        try:
            code, output = _run(args, cwd, {**os.environ, **env, **added, **seed.for_new_pair()})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {}, f"did not run ({exc})"
        again = report_rows(report)
        if swap is not None:
            again = {name: inverted(row) for name, row in again.items()}
    if not again:
        tail = " | ".join(output.strip().splitlines()[-2:])
        return {}, f"gave no comparison (exit {code}: {tail})"
    return again, ""


def _run(args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[int, str]:
    """Run the nested session to its end; its exit code and output.

    Whatever stops the wait (a timeout, Ctrl-C, SIGTERM turned into KeyboardInterrupt) stops the
    nested session the way it cleans up: SIGTERM, so that it ends its own base session and
    removes its worktree. ``subprocess.run`` would SIGKILL it and leave both behind.
    """
    with tempfile.TemporaryFile() as out:  # a file, not a pipe: nothing needs draining
        process = subprocess.Popen(
            list(args), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            code = process.wait(timeout=TIMEOUT_S)
        except BaseException:
            _stop(process, cwd)
            raise
        out.seek(0)
        return code, out.read().decode("utf-8", errors="replace")


def _stop(process: subprocess.Popen[bytes], cwd: Path) -> None:
    """End a nested session: a moment for a Ctrl-C it got too, then SIGTERM, then SIGKILL."""
    for wait, stop in ((GRACE_S, process.terminate), (STOP_S, process.kill)):
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            stop()
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting politely
            stop()
    process.wait()
    # Killed outright, it could not remove its worktree: remove it now that its owner is gone.
    with contextlib.suppress(worktree.RefError):
        worktree.remove_stale(worktree.repository_root(cwd))


def report_rows(report: Path) -> dict[str, Mapping[str, Any]]:
    try:
        document = json.loads(report.read_text())
        rows = document["comparison"]["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(r["name"]): r for r in rows if isinstance(r, dict) and r.get("metric") == "time"}


def _judged(
    row: Row,
    again: Mapping[str, Any] | None,
    threshold: float,
    extra: tuple[int, Mapping[str, Any] | None] | None = None,
) -> Row:
    """``row`` confirmed or withdrawn by the new pair's row ``again`` (threshold 0.05: 5 %), or,
    where that pair could not tell, by ``extra``: the last pair's factor of rounds and row."""
    if not row.regression:
        return row
    if again is None:
        return _withdrawn(row, "the re-measurement has no row for it")
    interval = _interval(again)
    if interval is None:
        return _withdrawn(row, f"the re-measurement was {again.get('verdict')}: no interval")
    text = f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {interval}"
    every = [again]  # the new pairs, for the spread between pairs below
    if extra is not None:
        factor, last = extra
        again = last or {}
        every.append(again)
        interval = _interval(again)
        if interval is None:
            return _withdrawn(row, f"not confirmed: {text}; once more, no interval")
        text += f", once more with {factor}x the rounds {interval}"
    if _confirms(again, threshold):
        return _confirmed_by(row, again, text)
    # Both pairs sure of a slowdown of at least half the threshold, the new one that it is below
    # the threshold: slower, no more. (Not the new pair's verdict: one pair alone says no more
    # than ``inconclusive`` there, ``rows.one_pair``; two pairs are what it lacks.)
    low, change = numbers(again, "ci_low", "change_pct") or [0.0, 0.0]  # _interval found them
    why = f"not confirmed by a new pair of processes: {text}"
    if low > 0 and change >= threshold * 50:  # half the threshold, in percent
        return _withdrawn(row, why, "slower", again)
    # Every pair counts: the first and the last alone leave one degree of freedom, and an
    # interval 12.7 standard errors wide each way (trial 21: -0.1 % [-3.1, +2.9] by the last
    # pair, shown as [-39, +64] "detects 388 %").
    found = pairs.across(row, every) if pairs.disagree(row, again) else None
    if found is not None:
        # Further apart than both pairs' rounds allow: the new pair's own interval would show an
        # offset between processes as a precise "no change" (seen: a 30 us function read +7.8 %
        # [+7.1, +8.4], then +0.3 % [-0.2, +0.8], shown "inconclusive" beside that interval).
        return _on_spread(row, found, f"{why}; the spread between the pairs counted", threshold)
    # Two pairs within each other's reach, the new one precise enough to show the change within
    # the threshold, and under half of it: its own verdict, as a first pair's would be (trial 17:
    # +1.3 % [+0.5, +2.1] under a 3 % threshold read "inconclusive", beside an interval that
    # settled it).
    still = "unchanged" if again.get("verdict") == "unchanged" else "inconclusive"
    return _withdrawn(row, why, still, again)


def _improves(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row agrees with an improvement: its 95 % interval lies below
    zero and reaches the threshold below it (the rule for a regression, mirrored)."""
    found = None if again is None else numbers(again, "ci_low", "ci_high")
    return found is not None and found[1] < 0 and found[0] <= -threshold * 100


def _improvement(
    row: Row,
    again: Mapping[str, Any] | None,
    threshold: float,
    later: Sequence[Mapping[str, Any] | None] | None = None,
) -> Row:
    """``row``, faster by the threshold or more in one pair, confirmed where the new pair agrees
    (``_improves``) and, with a third pair's row in ``later``, the spread of all the pairs does
    too; ``inconclusive`` otherwise, with the new pairs' numbers."""
    interval = None if again is None else _interval(again)
    if again is None or interval is None:
        why = "not confirmed: the new pair of processes has no interval for it"
        return replace(row, verdict="inconclusive", reason=why)
    if later and (found := pairs.across(row, later)) is not None:
        return _faster_across(row, found, later, threshold)
    text = f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {interval}"
    if _improves(again, threshold):
        return _confirmed_by(row, again, text)
    why = f"not confirmed by a new pair of processes: {text}"
    fields = measured_as(row, again)
    return replace(row, verdict="inconclusive", confirmed=False, reason=why, **fields)


def _faster_across(
    row: Row, found: Change, later: Sequence[Mapping[str, Any] | None], threshold: float
) -> Row:
    """``row``, an improvement the new pair agreed with, judged on the spread of every pair."""
    text = _pairs_text(row, later)
    measured = _measured_across(row, found)
    if found.high < 0 and found.low <= -threshold:
        why = f"confirmed by new pairs of processes, the spread between pairs counted ({text})"
        return replace(measured, verdict="faster", confirmed=True, reason=why)
    why = f"not confirmed by new pairs of processes, the spread between pairs counted: {text}"
    return replace(measured, verdict="inconclusive", confirmed=False, reason=why)


def _pairs_text(row: Row, later: Sequence[Mapping[str, Any] | None]) -> str:
    """Every pair's change and interval, the first one's first."""
    shown = [str(_interval(one or {})) for one in later]
    return (
        f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], again {shown[0]}, "
        f"a third pair {shown[1]}" + "".join(f", then {one}" for one in shown[2:])
    )


def _confirmed_by(row: Row, again: Mapping[str, Any], text: str) -> Row:
    """``row`` confirmed by the new pair's report row ``again``, shown with that pair's numbers:
    the first pair was picked for looking slow (or fast), so it overstates (trial 16: +20.1 %
    headed a row whose later pairs read +1.6 % and +11.4 %); ``text`` keeps every pair's."""
    why = f"confirmed by a new pair of processes ({text})"
    return replace(row, confirmed=True, reason=why, **measured_as(row, again))


def _confirms(again: Mapping[str, Any] | None, threshold: float) -> bool:
    """Whether a new pair's report row agrees with a regression: its own gate fails, or its 95 %
    interval lies above zero and reaches the threshold."""
    if again is None:
        return False
    low, high = numbers(again, "ci_low", "ci_high") or [0.0, 0.0]
    return again.get("regression") is True or interval_agrees(low, high, threshold * 100)


@dataclass(frozen=True)
class _Spread:
    """Regressions judged on the spread between pairs: their first rows, thresholds and rounds."""

    rows: Mapping[str, Row]
    thresholds: Mapping[str, float]
    rounds: Mapping[str, int]

    def further(
        self,
        later: dict[str, list[Mapping[str, Any] | None]],
        commit: str,
        pct: float,
        rootdir: Path,
        measuring: Sequence[str],
        swap: Swap | None,
    ) -> tuple[set[str], str]:
        """Add ``pairs.FURTHER`` pairs' rows to ``later`` where three pairs leave a regression
        open; the node ids whose further pairs could not run (their first measurement stands),
        and what the summary line adds."""
        opened = [
            n
            for n, rows in later.items()
            if pairs.still_open(pairs.across(self.rows[n], rows), self.thresholds[n])
        ]
        if not opened:
            return set(), ""
        rounds = json.dumps({n: self.rounds[n] for n in opened})
        env = {**_confirming(self.rows.values()), ROUNDS_ENV: rounds}
        note = f"; {len(opened)} that three pairs left open measured by {pairs.FURTHER} more"
        for index in range(pairs.FURTHER):  # the roles swapped in every second pair, as before
            roles = swap if index % 2 == 0 else None
            found, problem = nested(opened, commit, pct, rootdir, measuring, env, roles)
            if problem:  # as everywhere: a broken re-measurement leaves the first one standing
                return set(opened), f"{note} (that re-measurement {problem}: the first one stands)"
            for nodeid in opened:
                later[nodeid].append(found.get(nodeid))
        return set(), note


def _across(row: Row, later: Sequence[Mapping[str, Any] | None], threshold: float) -> Row:
    """``row`` confirmed or withdrawn by the new pairs' rows ``later``, uncertain by the spread of
    them all and the first (``pairs``): each pair's interval is its rounds' own, and only the
    spread between pairs shows an offset between processes."""
    found = pairs.across(row, later)
    if found is None:  # no third measurement: the two pairs decide
        return _judged(row, later[0], threshold)
    text = _pairs_text(row, later)  # each pair has an interval: across found them
    # A row one pair measured under the threshold (``rows.doubtful``) was no regression yet.
    was = row.regression
    if found.low > 0 and found.high >= threshold:  # the rule of _judged, on the pairs' spread
        how = "confirmed by" if was else "a regression by"
        why = f"{how} new pairs of processes, the spread between pairs counted ({text})"
        measured = _measured_across(row, found)
        return replace(measured, verdict="slower", regression=True, confirmed=True, reason=why)
    how = "not confirmed by" if was else "measured by"
    why = f"{how} new pairs of processes, the spread between pairs counted: {text}"
    return _on_spread(row, found, why, threshold)


def _measured_across(row: Row, found: Change) -> Row:
    """``row`` with the change the pairs measured together."""
    base = row.base_value
    current = None if base is None else base * (1 + found.estimate)
    return replace(with_change(row, found), current_value=current)


def _on_spread(row: Row, found: Change, why: str, threshold: float) -> Row:
    """``row`` withdrawn, with the change and interval of several pairs, uncertain by their
    spread: ``slower`` where that interval lies above zero and the change is at least half the
    threshold, ``inconclusive`` otherwise."""
    still = "slower" if found.low > 0 and found.estimate >= threshold / 2 else "inconclusive"
    measured = _measured_across(row, found)
    return replace(measured, verdict=still, regression=False, confirmed=False, reason=why)


def _interval(row: Mapping[str, Any]) -> str | None:
    """A report row's change and 95 % interval as text, or None where it has none."""
    found = numbers(row, "change_pct", "ci_low", "ci_high")
    if found is None:
        return None
    change, low, high = found
    roles = " (roles swapped)" if row.get(SWAPPED_KEY) else ""
    return f"{change:+.1f}% [{low:+.1f}%, {high:+.1f}%]{roles}"


def _withdrawn(
    row: Row, why: str, verdict: str = "inconclusive", last: Mapping[str, Any] | None = None
) -> Row:
    """``row`` withdrawn; with the numbers of ``last``, the pair that withdrew it, where given:
    a row more rounds would resolve is then measured again only if that pair leaves it open."""
    fields = measured_as(row, last) if last is not None else {}
    return replace(row, verdict=verdict, regression=False, confirmed=False, reason=why, **fields)


def measured_as(row: Row, again: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``row`` that a new pair's report row ``again`` (in percent) measured."""
    return {
        "change": number(again, "change_pct", 100),
        "low": number(again, "ci_low", 100),
        "high": number(again, "ci_high", 100),
        "confidence": number(again, "confidence_pct", 100),
        "detectable": number(again, "detectable_pct", 100),
        "noise_source": str(again.get("noise_source") or row.noise_source),
        "base_value": number(again, "baseline") or row.base_value,
        "current_value": number(again, "current") or row.current_value,
        "statistic": TAIL if again.get("statistic") == TAIL else "",
    }
