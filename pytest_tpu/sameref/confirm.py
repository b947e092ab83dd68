"""A same-job regression stands only if a second pair of fresh processes agrees.

Pairing neighbouring rounds cancels what the machine does over time, and pinning both sides'
threads alike (``pinning``) cancels where they run, but not everything that differs between the two
processes: a benchmark can run a percent or two faster in one process than in another with the same
code (where its buffers land, how its dicts hash), for the whole session. Rounds of the same two
processes cannot reveal that, so a benchmark about to fail is measured again by a new head process
and a new base process -- a nested ``--compare-ref`` session of just those benchmarks -- and the
session fails only where that measurement agrees. Passing sessions pay nothing.

Agreeing asks less than finding: the first pair was already 99 % (one-sided) sure of a slowdown
whose interval reaches the threshold; the new pair has only to rule out that the first pair's
processes made it. So a regression stands where the new pair's own gate fails, or where its 95 %
interval lies above zero (97.5 % one-sided) and reaches the threshold. A new pair that sees no
slowdown, or one clearly below the threshold, withdraws it; the row stays ``slower`` (not a
regression) where the new pair's own verdict is ``slower``, and is ``inconclusive`` otherwise.
(Measured here with the stricter rule, both pairs failing on their own: the new pair withdrew 16 of
the 23 first-pair failures of a Keras CNN made 10 % slower, most of them measured again at +4 to
+12 % with intervals from just below to just above zero; a new pair measures only the failing
benchmarks, the first of them in a fresh process.) A re-measurement that cannot run leaves the
first measurement standing, and the summary says so: a broken confirmation must not turn a measured
regression into a pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.lines import pct
from pytest_tpu.sameref import worktree

CONFIRM_ENV = "PYTEST_TPU_REF_CONFIRMING"  # set in the nested session: it does not confirm again
TIMEOUT_S = 3600.0
GRACE_S = 1.0  # a nested session that got the same Ctrl-C is cleaning up already
STOP_S = 30.0  # for a SIGTERMed nested session to stop its base session and remove its worktree


def confirming() -> bool:
    """Whether this session is itself the re-measurement."""
    return bool(os.environ.get(CONFIRM_ENV))


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
) -> tuple[list[Row], str]:
    """``rows`` with each regression confirmed or withdrawn, and a line on what ran.

    ``pct`` is the session's time threshold in percent; ``own`` a benchmark's own (a fraction,
    from its marker), by node id. The nested session reads the same markers.
    """
    failing = [row.nodeid for row in rows if row.regression]
    if not failing:
        return list(rows), ""
    again, problem = nested(failing, commit, pct, rootdir, measuring, {CONFIRM_ENV: "1"})
    if problem:  # a broken re-measurement must not turn a measured regression into a pass
        return list(rows), f"the re-measurement {problem}: the first one stands"
    line = f"re-measured {len(failing)} regression(s) in a new pair of processes"
    thresholds = own or {}
    judged = [
        _judged(row, again.get(row.nodeid), thresholds.get(row.nodeid, pct / 100)) for row in rows
    ]
    return judged, line


def nested(
    nodeids: Sequence[str],
    commit: str,
    pct: float,
    rootdir: Path,
    measuring: Sequence[str],
    env: Mapping[str, str],
) -> tuple[dict[str, Mapping[str, Any]], str]:
    """Run a nested ``--compare-ref`` session of ``nodeids`` with ``env`` added: its report's
    time rows by name, or why there are none ("did not run (...)", "gave no comparison (...)")."""
    with tempfile.TemporaryDirectory(prefix="pytest-tpu-again-") as folder:
        report = Path(folder) / "again.json"
        args = command(nodeids, commit, pct, report, measuring)
        try:
            code, output = _run(args, rootdir, {**os.environ, **env})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {}, f"did not run ({exc})"
        again = report_rows(report)
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


def _judged(row: Row, again: Mapping[str, Any] | None, threshold: float) -> Row:
    """``row`` confirmed or withdrawn by the new pair's row ``again`` (threshold 0.05: 5 %)."""
    if not row.regression:
        return row
    if again is None:
        return _withdrawn(row, "the re-measurement has no row for it")
    values = [again.get(key) for key in ("change_pct", "ci_low", "ci_high")]
    if not all(isinstance(x, int | float) for x in values):
        return _withdrawn(row, f"the re-measurement was {again.get('verdict')}: no interval")
    change, low, high = (float(x) for x in values)  # type: ignore[arg-type]
    text = f"first {pct(row.change)} [{pct(row.low)}, {pct(row.high)}], "
    text += f"again {change:+.1f}% [{low:+.1f}%, {high:+.1f}%]"
    agrees = low > 0 and high >= threshold * 100
    if again.get("regression") is True or agrees:
        return replace(row, confirmed=True, reason=f"confirmed by a new pair of processes ({text})")
    # Both pairs sure of a slowdown, the new one sure it is below the threshold: slower, no more.
    still = "slower" if again.get("verdict") == "slower" else "inconclusive"
    return _withdrawn(row, f"not confirmed by a new pair of processes: {text}", still)


def _withdrawn(row: Row, why: str, verdict: str = "inconclusive") -> Row:
    return replace(row, verdict=verdict, regression=False, confirmed=False, reason=why)
