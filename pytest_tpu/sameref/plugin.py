"""``--compare-ref=REF``: measure the base revision and this tree in the same job, round by round.

The head is this session, run as it is (a dirty tree included). The base is a child pytest
session in a temporary git worktree of REF, started with the same environment, the same test
selection and the same measuring options. The instrument is the same on both sides: the child
imports this very plugin (its directory goes first on the child's ``PYTHONPATH``); only the code
under test comes from REF. Every benchmark round on either side waits for its turn (``turns``),
so rounds alternate ABBA and the verdict is taken on pairs of neighbouring rounds (``rows``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Generator
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.childargs import measuring_args, session_args
from pytest_tpu.gate.compare import (
    Row,
    comparison_key,
    regressions,
    remember_gate,
    verdict_key,
)
from pytest_tpu.gate.lines import comparison_lines, gate_lines, gate_verdict
from pytest_tpu.gate.model import against_key, against_notes_key, head_key
from pytest_tpu.options import (
    REF_HOME_ENV,
    REGRESSION_EXIT_CODE,
    Settings,
    measuring_off,
    under_xdist,
)
from pytest_tpu.progress import format_seconds
from pytest_tpu.report.notes import progress_lines
from pytest_tpu.results import REPORT_ATTR, results_key
from pytest_tpu.sameref import (
    collector,
    confirm,
    gpu,
    imports,
    nested,
    resolve,
    seed,
    spin,
    untracked,
    worktree,
)
from pytest_tpu.sameref.args import child_args
from pytest_tpu.sameref.pinning import CORE_ENV, Pin, core_from_env, shared_core
from pytest_tpu.sameref.rows import base_crashed, build_rows, not_run, one_pair_note, unchecked
from pytest_tpu.sameref.runner import wrap_runner
from pytest_tpu.sameref.swap import Swap, swap_for
from pytest_tpu.sameref.turns import Follower, Leader, open_listener

UNMEASURED = {  # options under which no benchmark is measured, so no base is run
    "--benchmark-disable": "--benchmark-disable measures nothing, so the base revision was not run",
    "--benchmark-skip": "--benchmark-skip skips every benchmark, so the base revision was not run",
}
CONNECT_TIMEOUT_S = 300.0  # the base session's start: Python, pytest, plugins, its conftests
STOP_TIMEOUT_S = 10.0


class HeadPlugin:
    """This session's side: starts the base, leads the turns, compares and decides."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.ref = settings.compare_ref or ""
        self.tree: worktree.Worktree | worktree.Borrowed | None = None
        # A new pair with the roles swapped: its base side is the head's tree, as it is.
        self.borrowed = os.environ.pop(worktree.BORROW_ENV, "")
        self.child: subprocess.Popen[bytes] | None = None
        self.leader: Leader | None = None
        self.conn: Connection | None = None
        self.dirty = ""  # what the tree holds beyond HEAD, or nothing
        self.unmeasured = ""  # why nothing will be measured (no base run), or ""
        self.stale: list[Path] = []  # worktrees of killed sessions, removed at the start
        self.leftovers: list[Path] = []  # their temporary folders no repository lists
        self.lines: list[str] = []
        self.tabled: set[str] = set()  # lines the reports carry already: counts, gate lines
        self.remeasured: set[str] = set()  # lines on new pairs: the terminal splits long ones
        self.log = Path()
        self._old_sigterm: Any = None
        self.whole_runs = False
        self.base_runs: list[dict[str, list[float]]] = []
        self.core = shared_core()
        self.own: dict[str, float] = {}  # a benchmark's own time threshold (fraction), by marker
        self.factors = nested.factors()  # more rounds, when this session resolves rows
        self.first_rounds = nested.first_rounds()  # the outermost first pair's, when nested

    # -------------------------------------------------------------- start

    def check(self) -> None:
        """Usage errors before anything starts: options that cannot combine, an unknown REF."""
        config = self.config
        if self.settings.compare and not self._from_ini():
            raise pytest.UsageError("--compare-ref and --compare cannot be used together")
        if self.settings.compare:  # trial 33: the error named an option nobody had typed
            raise pytest.UsageError(
                f"--compare={self.settings.compare} cannot be used with the ini file's "
                f"compare_ref = {self.ref}: add -o compare_ref= to compare with a stored baseline"
            )
        if config.getoption("numprocesses", None) or under_xdist(config):
            raise pytest.UsageError(
                "--compare-ref takes turns round by round with one base process; it cannot run "
                "under pytest-xdist (-n): drop -n"
            )
        if self.settings.workers:
            raise pytest.UsageError("--compare-ref cannot be combined with --tpu-workers")
        selection = self.settings.accelerator
        tpu = "tpu" in selection.kinds and selection.mode != "auto"
        mode = self.settings.compare_ref_mode
        self.whole_runs = mode == "runs" or (mode == "auto" and tpu)
        try:
            root = worktree.repository_root(config.rootpath)
            self.commit = worktree.resolve(root, self.ref)
        except worktree.RefError as exc:
            raise pytest.UsageError(f"--compare-ref={self.ref}: {exc}") from None
        self.root = root
        # Every process it starts imports the project's code from its own tree (``imports``).
        os.environ.setdefault(REF_HOME_ENV, str(root))
        # The report names the commit: "origin/main" read a week later says nothing of which.
        config.stash[against_key] = f"{self.ref} ({self.commit[:12]}, same job)"
        self.dirty = worktree.dirty(root)
        config.stash[head_key] = worktree.head(root, self.dirty)
        # Nothing is measured, so the base is not run at all (trial 15: every row "missing").
        # (--benchmark-skip, trial 16: a base session ran for nothing, and 6 rows were missing)
        self.unmeasured = UNMEASURED.get(measuring_off(config), "")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check out REF, start the base session and wait for it to connect."""
        if self.unmeasured:
            return
        # Said in the header: git's own list changes under the user (trial 32: silently).
        self.stale = worktree.remove_stale(self.root)
        self.leftovers = worktree.remove_leftovers()
        try:
            self.tree = (
                worktree.borrow(Path(self.borrowed))
                if self.borrowed
                else worktree.create(self.root, self.commit)
            )
        except worktree.RefError as exc:
            raise pytest.UsageError(f"--compare-ref={self.ref}: {exc}") from None
        self._old_sigterm = signal.signal(signal.SIGTERM, _interrupt)
        self.log = self.tree.scratch / "base-session.log"
        if self.whole_runs:
            return  # the first whole base run waits for the header's device check (runtestloop)
        listener, env = open_listener(str(self.tree.scratch))
        self._start_child(env)
        self.conn = self._accept(listener)

    def _from_ini(self) -> bool:
        """Whether REF came from the ini file's ``compare_ref``, not from the command line."""
        return not self.config.getoption("compare_ref", None)

    def _child_cwd_env(self, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
        """Where the base session runs and with what environment: this one's, plus ``env``."""
        assert self.tree is not None
        here = Path(self.config.invocation_params.dir)
        try:
            cwd = self.tree.path / here.resolve().relative_to(self.root.resolve())
        except ValueError:
            cwd = self.tree.path
        path = os.pathsep.join(p for p in (_plugin_root(), os.environ.get("PYTHONPATH")) if p)
        full_env = {
            **os.environ,
            **env,
            "PYTHONPATH": path,  # GPU memory growth: in os.environ since the start (sameref.gpu)
        }
        if self.core is not None:
            full_env[CORE_ENV] = str(self.core)
        return cwd, full_env

    def _start_child(self, env: dict[str, str]) -> None:
        assert self.tree is not None
        cwd, full_env = self._child_cwd_env(env)
        with open(self.log, "wb") as out:
            self.child = subprocess.Popen(
                child_args(self.config, self.settings, self.root, self.tree.path),
                cwd=cwd,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def _whole_run(self) -> None:
        """One whole base run, to its end (the device is the base's meanwhile)."""
        from pytest_tpu.sameref.runs import base_samples, run_base

        assert self.tree is not None
        cwd, env = self._child_cwd_env({})
        report = self.tree.scratch / f"base-run-{len(self.base_runs) + 1}.json"
        args = child_args(self.config, self.settings, self.root, self.tree.path)
        problem = run_base(args, cwd, env, report, self.log)
        if problem:
            self.lines.append(f"base run {len(self.base_runs) + 1}: {problem}: {self._log_tail()}")
        self.base_runs.append(base_samples(report))

    def _accept(self, listener: Listener) -> Connection | None:
        box: list[Connection] = []
        thread = threading.Thread(target=lambda: box.append(listener.accept()), daemon=True)
        thread.start()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while thread.is_alive() and time.monotonic() < deadline:
            if self.child is not None and self.child.poll() is not None:
                break
            thread.join(0.1)
        if not box:
            tail = self._log_tail()
            self.lines.append(f"the base session ({self.ref}) did not start: {tail}")
            return None
        return box[0]

    def _log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no output"
        return " | ".join(lines[-3:]) or "no output"

    def _times_note(self) -> str:
        """What the table's times are: rounds taken in turns, not a plain run's (trial 31: a numpy
        FFT at 251-273 µs in every same-job table, 176-184 µs in plain runs, unmarked), and not
        pytest-benchmark's table of the same process's rounds either."""
        # What the pinning is, said where it shows (trial 35: "every thread pinned to core 1" was
        # explained only in the docs, and read as if the benchmark ran on one core).
        pinned = (
            f", each process's threads on the same cores as the other's (the rounds on core "
            f"{self.core})"
            if self.core is not None
            else ""
        )
        # Trial 70 read the comparison table beside pytest-benchmark's (7.2 ms against a mean of
        # 9.5 ms for the same rounds) and asked which was true: say what each shows. Trial 73
        # read 61 ms beside pytest-benchmark's median of 34.8 ms: the row's new pair's rounds.
        return (
            f"the table's times are rounds taken in turns with the other tree's process{pinned}: "
            "baseline the base's, current the baseline times the paired change (a row new pairs "
            "measured: theirs); they compare base with head, and can differ from a plain "
            "run's and from pytest-benchmark's table, which shows this process's rounds as they "
            "came"
        )

    def _let_go_note(self) -> str:
        """The benchmarks whose threads both sides let go of (``pinning``), since a reader of the
        header's "every thread pinned" would take their rounds for pinned too."""
        leader = self.leader
        if leader is None or self.core is None:
            return ""
        names = [nodeid for nodeid in leader.churned if leader.let_go(nodeid)]
        if not names:
            return ""
        return (
            "not pinned from their third round on, on either side, because their calls start "
            "threads (which would inherit the rounds' one core): " + ", ".join(names)
        )

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if self.unmeasured:
            return [f"compare-ref: {self.ref} not run: {self.unmeasured}"]
        head = f"this tree with {self.dirty}, measured as it is" if self.dirty else "HEAD"
        how = (
            "whole runs alternate (base, head, base): the device admits one process at a time"
            if self.whole_runs
            else "one process per tree, benchmark rounds alternate ABBA"
        )
        if self.core is not None and not self.whole_runs:
            how += (
                f", every thread pinned alike on both sides, the rounds on core {self.core} "
                "(a thread pool keeps every core)"
            )
        spinning = spin.describe()
        if spinning and not self.whole_runs:  # whole runs never run beside each other
            how += f", {spinning}"
        how += f", {seed.describe()}"
        if growth := gpu.describe():
            how += f", {growth}"
        where = f"{self.ref} ({self.commit[:12]}) in a temporary worktree"
        if self._from_ini():  # trial 33: a comparison nobody asked for on the command line
            where = f"{where} (the ini file's compare_ref; -o compare_ref= turns it off)"
        lines = [f"compare-ref: {where} vs {head}; {how} (same job)"]
        if self.stale:
            paths = ", ".join(str(path) for path in self.stale)
            lines.append(f"compare-ref: removed the worktree(s) of a killed session: {paths}")
        if self.leftovers:
            paths = ", ".join(str(path) for path in self.leftovers)
            lines.append(f"compare-ref: removed temporary folder(s) of killed sessions: {paths}")
        return lines

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_tpu.gate.markers import marker_thresholds

        for item in session.items:  # @pytest.mark.regression_threshold(time=...) as with --compare
            own = marker_thresholds(item).get("time")
            if own is not None:
                self.own[item.nodeid] = own / 100
        ini = self.config.inipath if self.config.option.inifilename else None
        where = {item.nodeid: item.path for item in session.items}
        given = self.config.args if self.config.args_source == pytest.Config.ArgsSource.ARGS else []
        rootdir = self.config.rootpath if self.config.option.rootdir else None
        nested.locate(where, Path(self.config.invocation_params.dir), ini, given, rootdir)
        if self.conn is not None:
            self.leader = Leader(self.conn, [item.nodeid for item in session.items])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Whole runs: the base runs once before the head's tests (base, head, base).

        Not at the session's start: a device the options ask for and the machine lacks is a
        usage error at the end of collection (the header), and a whole base run before it would
        be spent for nothing (trial 14: two base runs, 12 s, then the error)."""
        if not self.whole_runs or self.tree is None or self.base_runs:
            return
        option = session.config.option
        if option.collectonly or (session.testsfailed and not option.continue_on_collection_errors):
            return  # no test will run: pytest's own loop stops here
        self._whole_run()

    # -------------------------------------------------------------- rounds

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        leader = self.leader
        fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
        if leader is None or fixture is None or getattr(fixture, "disabled", False):
            return (yield)
        nodeid = item.nodeid
        pin = Pin(None if self.whole_runs else self.core)
        factor = self.factors.get(nodeid, 1)
        wrap_runner(
            fixture,
            lambda seen: leader.before_head_round(nodeid, seen),
            pin,
            factor,
            lambda seconds: leader.sized_on(nodeid, seconds),
            self.first_rounds.get(nodeid, 0),
        )
        try:
            try:
                outcome = yield
            finally:
                pin.release()
                collector.thaw()
        except (KeyboardInterrupt, SystemExit):
            raise  # stopping: the base is ended at unconfigure, not waited for
        except BaseException:
            leader.after_head_test(nodeid)  # a failed test: the base may still take its turns
            raise
        leader.after_head_test(nodeid)
        return outcome

    # -------------------------------------------------------------- end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            self._finish(session)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM while the base session ends: new-user trial 32 met a traceback
            # and exit 130, without a summary, in 3 of 11 interrupts. The base session is stopped
            # and the worktree removed at unconfigure, as for any interrupt.
            ending = "interrupted while the base session was ending: nothing compared"
            self._interrupted(session, f"{ending}, and the gate was not applied")
        # The reports (written later, trylast) keep what the terminal said beyond the rows and the
        # gate: re-measurements and their seconds, the times line, an interrupt (trial 33).
        notes = [line for line in self.lines if line not in self.tabled]
        self.config.stash[against_notes_key] = notes

    def _interrupted(self, session: pytest.Session, line: str) -> None:
        """The session ends as interrupted (exit code 2), ``line`` saying when; the report says
        the gate was not applied."""
        session.exitstatus = pytest.ExitCode.INTERRUPTED
        self.lines.append(line)
        # pytest's last lines then say so, red, above the counts (trial 22: the session ended on a
        # plain "6 passed", its exit code 2).
        session.shouldstop = "interrupted: the gate was not applied"
        if self.settings.gating:  # the report says so too, not only the terminal
            self.config.stash[verdict_key] = "not applied (interrupted)"

    def _finish(self, session: pytest.Session) -> None:
        if session.exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # its error says why; no base run, no "the base session did not run"
        if self.unmeasured:
            self._nothing_measured()
            return
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self.lines.append("session interrupted: the base session was stopped, nothing compared")
            return  # pytest_unconfigure ends the base session and removes the worktree
        results = self.config.stash[results_key]
        threshold = (self.settings.fail_on_regression or 5.0) / 100
        failed = [r.nodeid for r in results.failed]
        if self.whole_runs:
            from pytest_tpu.sameref import runs

            if not self.base_runs:
                return  # no test ran (collection only, or errors): the base was not run either
            self._whole_run()
            rows = runs.build_rows(results.passed, failed, self.base_runs, threshold, self.own)
        elif self.leader is None:
            self.lines.append(f"nothing compared with {self.ref}: the base session did not run")
            return
        else:
            base = self.leader.finish()
            self._stop_child()
            if self.leader.note:
                self.lines.append(f"base session: {self.leader.note}")
            self.lines += imports.described(*self.leader.imported, self.ref)
            rows = build_rows(results.passed, failed, base, self.leader.rounds, threshold, self.own)
            nested.remember_first_rounds(
                {n: min(len(r.head), len(r.base)) for n, r in self.leader.rounds.items()}
            )
            crash = self._crash()
            if crash:
                rows = base_crashed(rows, self._in_base, crash)
            try:
                rows = self._confirmed(rows, session)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the new pair is stopped and cleaned
                when = "interrupted while measuring again in a new pair of processes"
                shown = "the rows below are the first pair's, and the gate was not applied"
                self._interrupted(session, f"{when}: {shown}")
                # A slowdown one pair alone read is no verdict (trial 32: "SLOWER" and "1 slower"
                # above "the gate was not applied").
                rows = unchecked(rows)
        copies = imports.installed_copies(self.root)
        self.lines += imports.installed_said(copies)
        rows = not_run(rows, {item.nodeid for item in session.items})
        self.config.stash[comparison_key] = rows
        self._say_reported(comparison_lines(f"{self.ref} (same job)", rows, baseline=False))
        if rows and not self.whole_runs:
            self.lines.append(self._times_note())
            if let_go := self._let_go_note():
                self.lines.append(let_go)
        if note := one_pair_note(rows):
            self.lines.append(note)
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            return  # _interrupted said so
        if self.settings.gating:  # same job: time only (memory and compile need a history)
            said = gate_lines(rows, self.settings.fail_on_regression or 5.0, self.ref)
            verdict = gate_verdict(rows)
            if copies and verdict == "passed":  # it cannot vouch for code neither side ran
                said, verdict = imports.not_passed(said, copies), "inconclusive"
            self._say_reported(said)
            remember_gate(self.config, said, verdict)
            if regressions(rows) and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = REGRESSION_EXIT_CODE

    def _say_reported(self, lines: list[str]) -> None:
        """Terminal lines the reports carry in their own form (counts, the gate's lines), so
        that they are not repeated among the reports' notes."""
        self.lines += lines
        self.tabled.update(lines)

    def _nothing_measured(self) -> None:
        """Nothing measured (--benchmark-disable, -skip): the gate says why; exit code stands."""
        self.lines.append(f"nothing compared with {self.ref}: {self.unmeasured}")
        if self.settings.gating:
            pct = self.settings.fail_on_regression or 5.0
            said = [f"regression gate ({pct:g}%): NOTHING CHECKED - {self.unmeasured}"]
            self._say_reported(said)
            remember_gate(self.config, said, "nothing checked")

    def _confirmed(self, rows: list[Row], session: pytest.Session) -> list[Row]:
        """Regressions stand only if a new pair of processes measures them too (``confirm``),
        with or without the gate: one pair's verdict covers its rounds, not the offset between its
        two processes (new-user trial 21, no gate: unchanged code ``SLOWER`` "99.9 % sure" in 6
        of 9 sessions). Under the gate, rows the rounds could not resolve are measured again with
        more of them (``resolve``)."""
        if nested.confirming():
            return rows
        if session.exitstatus != pytest.ExitCode.OK:
            return rows  # tests failed: the session fails anyway, no time is spent on this
        pct = self.settings.fail_on_regression or 5.0
        # The new pairs compare as this one does: the same measuring options, the same mode.
        mode = f"--tpu-compare-ref-mode={self.settings.compare_ref_mode}"
        measuring = [*session_args(self.config), *measuring_args(self.config, self.settings), mode]
        root = self.config.rootpath
        most = self.settings.compare_ref_rounds
        swap = None if self.tree is None else swap_for(self.tree.path, self.root, root)
        started = time.monotonic()
        nested.announce_with(self._announcer(started))
        try:
            return self._remeasured(rows, pct, root, measuring, most, swap)
        finally:
            nested.announce_with(None)

    def _remeasured(
        self,
        rows: list[Row],
        pct: float,
        root: Path,
        measuring: list[str],
        most: int,
        swap: Swap | None,
    ) -> list[Row]:
        """``rows`` after the new pairs of processes: regressions confirmed or withdrawn, and
        under the gate the rows the rounds could not resolve measured again with more."""
        started = time.monotonic()
        rows, line = confirm.remeasure(
            rows, self.commit, pct, root, measuring, self.own, most, swap
        )
        lines = [_took(line, started)]
        # A re-measurement with more rounds does not resolve again; nor does a session that
        # only compares: resolving buys a verdict for the gate.
        if self.settings.gating and not resolve.resolving():
            started = time.monotonic()
            rows, line = resolve.resolve(
                rows, self.commit, pct, root, measuring, self.own, most, swap
            )
            lines.append(_took(line, started))
        said = [line for line in lines if line]
        self.lines += said
        self.remeasured.update(said)
        return rows

    def _announcer(self, started: float) -> Callable[[str], None] | None:
        """A line on the terminal as each new pair of processes starts, with the time since the
        last test after the first; none under ``-q``, as for a benchmark's progress
        (``progress``)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return None

        def write(line: str) -> None:
            took = time.monotonic() - started
            since = f" ({format_seconds(took)} since the last test)" if took >= 1 else ""
            reporter.write_line(f"compare-ref: {line}{since}")

        return write

    def _crash(self) -> str:
        """How the base session ended, where it did not end well: its exit code or signal; ""
        where it ended normally."""
        child = self.child
        code = child.poll() if child is not None else None
        if code is None or code in (0, 1, 5) or not (self.leader and self.leader.note):
            return ""  # passed, tests failed, or no tests: its results say so
        how = f"exit code {code}"
        if code < 0:
            try:
                how = f"killed by signal {-code}, {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        # Its output's tail is a native traceback's last frames (pytest's __main__): not said.
        return f"the base session ended ({how}) before it measured this"

    def _in_base(self, nodeid: str) -> bool:
        """Whether the base revision has the test: its file, and its function's name in it."""
        if self.tree is None:
            return False
        path, _, rest = nodeid.partition("::")
        name = rest.rpartition("::")[2].partition("[")[0]
        try:  # node ids are relative to the rootdir, which may lie below the repository's root
            where = self.config.rootpath.resolve().relative_to(self.root.resolve())
            text = (self.tree.path / where / path).read_text(errors="replace")
        except (OSError, ValueError):
            return False
        return bool(name) and name in text

    def _stop_child(self) -> None:
        child = self.child
        if child is None or child.poll() is not None:
            return
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.terminate()
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.lines:
            terminalreporter.write_sep("-", f"pytest-tpu: compared with {self.ref} (same job)")
            for line in self.lines:
                for part in progress_lines(line) if line in self.remeasured else [line]:
                    terminalreporter.write_line(part)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Whatever happened: the base session ends and the worktree goes."""
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.close()
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        if self.tree is not None:
            self.tree.remove()
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)


def _took(line: str, started: float) -> str:
    """``line`` on a re-measurement with the seconds it took, so that a reader sees what the new
    pairs of processes added to the session (a passing session pays them only where a row was in
    doubt); "" stays "" (nothing ran)."""
    return f"{line} [{time.monotonic() - started:.0f} s]" if line else ""


def _plugin_root() -> str:
    """The folder this plugin is imported from, for the base's ``PYTHONPATH``, so that both
    sides run the same instrument; "" where it is a site folder, which the base reaches anyway
    (put first, a whole ``site-packages`` changed the base's import order: trial 41)."""
    import site

    root = os.path.realpath(Path(__file__).resolve().parents[2])
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    return "" if root in {os.path.realpath(folder) for folder in sites} else root


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM ends the session like Ctrl-C, so the worktree and the base session are cleaned."""
    raise KeyboardInterrupt(f"signal {signum}")


class BasePlugin:
    """The base session's side: takes its turns and reports its results to the head."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.core = core_from_env()
        self.factors = nested.factors()
        self.first_rounds = nested.first_rounds()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
        pin = Pin(self.core)
        nodeid = item.nodeid
        timed = fixture is not None and not getattr(fixture, "disabled", False)
        if timed:
            follower = self.follower
            wrap_runner(
                fixture,
                lambda seen: follower.before_round(nodeid, seen),
                pin,
                self.factors.get(nodeid, 1),
                lambda seconds: follower.sized_on(nodeid, seconds),
                self.first_rounds.get(nodeid, 0),
            )
        try:
            return (yield)
        finally:
            pin.release()
            collector.thaw()
            if timed:  # this side's teardown and report wait until the head's rounds are over
                self.follower.done(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if report.when == "call" and data is not None and report.passed:
            self.follower.result(report.nodeid, {"outcome": "passed", **data})
        elif report.failed:
            error = str(getattr(report.longrepr, "reprcrash", report.longrepr) or "failed")
            error = error[:300] + untracked.hint(error, Path.cwd())
            self.follower.result(report.nodeid, {"outcome": "failed", "error": error})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a module that does not import here: its rows say so, not "new"
            error = _last_error(str(report.longrepr))
            where = report.nodeid or "the tests"
            error = f"collecting {where}: {error[:300]}" + untracked.hint(error, Path.cwd())
            result = {"outcome": "failed", "error": error, "collector": True}
            self.follower.result(report.nodeid, result)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        moved, early = imports.moved()
        if moved or early:
            self.follower.imports(moved, early)
        self.follower.bye()


def _last_error(text: str) -> str:
    """The exception of a collection error's report: its last ``E`` line, or its last line."""
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    lines = errors or text.strip().splitlines() or ["failed"]
    return lines[-1]


def register(config: pytest.Config, settings: Settings) -> None:
    """Register the head's plugin (``--compare-ref``) or the base's (a child of one)."""
    keep = nested.kept()
    if keep is not None:  # a nested session given its parent's arguments, on both sides
        config.pluginmanager.register(nested.Keep(keep), "pytest-tpu-ref-keep")
    follower = Follower.connect()
    if follower is not None:
        for name in ("PYTEST_TPU_REF_ADDRESS", "PYTEST_TPU_REF_KEY"):
            os.environ.pop(name, None)  # never inherited by this session's own children
        config.pluginmanager.register(BasePlugin(follower), "pytest-tpu-ref-base")
        return
    if settings.compare_ref:
        head = HeadPlugin(config, settings)
        head.check()
        config.pluginmanager.register(head, "pytest-tpu-ref-head")
