"""Baselines and the regression gate as a pytest plugin object (registered only when used).

At session start everything that can be checked is checked: the baseline to compare with loads,
the baseline to save can be written, --fail-on-regression has something to compare with. While
the benchmarks run, a calibration kernel is timed before every round (``calibration``). A
benchmark the gate is about to fail is measured again right away, in fresh rounds
(``remeasure``); it fails only if that agrees. At session end the controller (never an xdist
worker) compares, decides the exit status and saves, each step on its own so that one failing
never takes the others down; the terminal summary only prints what was decided.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.gate import (
    bandwidth,
    calibration,
    contention,
    fresh,
    loading,
    remeasure,
    saving,
)
from pytest_tpu.gate import baseline as store
from pytest_tpu.gate.compare import (
    Row,
    Scope,
    Side,
    compare_one,
    compare_runs,
    comparison_key,
    regressions,
    remember_gate,
)
from pytest_tpu.gate.history import RunSummary, metrics_of, saved_when, summarize
from pytest_tpu.gate.lines import (
    between_sessions_hint,
    comparison_lines,
    gate_lines,
    gate_verdict,
    noise_line,
    saved_span_note,
)
from pytest_tpu.gate.markers import marker_thresholds
from pytest_tpu.gate.model import against_key
from pytest_tpu.gate.stats import Estimate, relative_spread
from pytest_tpu.options import (
    REGRESSION_EXIT_CODE,
    SAVE_FAILED_EXIT_CODE,
    Settings,
    benchmarks_disabled,
    under_xdist,
)
from pytest_tpu.results import BenchResult, results_key
from pytest_tpu.session import session_key
from pytest_tpu.timing import size_rounds_on_a_steady_call

NOISE_RUNS = 5  # runs per benchmark with --measure-noise, the normal run included
_DONE_STATUSES = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, REGRESSION_EXIT_CODE)
recording_key = pytest.StashKey[calibration.Recording]()
use_key = pytest.StashKey["contention.Use | None"]()  # cores taken during the call
copy_key = pytest.StashKey["Estimate | None"]()  # memory copies around the call (bandwidth)
rerun_key = pytest.StashKey[str]()  # set while a benchmark is measured again: its label


def _timer(config: pytest.Config) -> Callable[[], float]:
    """pytest-benchmark's timer (``--benchmark-timer``), so the kernel and rounds agree."""
    try:
        option = config.getoption("benchmark_timer")
    except ValueError:
        return time.perf_counter
    return getattr(option, "target", time.perf_counter)


@dataclass
class Measurements:
    """What the session's reports carried besides the results: kernels, repeats, confirmations."""

    calibration: dict[str, dict[str, Any]] = field(default_factory=dict)
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)  # from markers
    noise: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    confirm: dict[str, dict[str, Any]] = field(default_factory=dict)


def _summary(result: BenchResult, calibration: dict[str, Any] | None, **kw: Any) -> RunSummary:
    timings = (calibration or {}).get("timings") or []
    kind = str((calibration or {}).get("kind", ""))
    aligned = timings if len(timings) == len(result.samples) else []
    others = contention.cores((calibration or {}).get("others"))
    own = contention.cores((calibration or {}).get("own"))
    copies = optional_estimate((calibration or {}).get("memory_copy"))
    metrics = metrics_of(result.extra_info)
    run = summarize(
        result.samples,
        aligned,
        kind,
        metrics=metrics,
        others=others,
        own=own,
        memory_copy=copies,
        **kw,
    )
    assert run is not None  # passed results have samples
    return run


def optional_estimate(data: object) -> Estimate | None:
    """An estimate carried on a report (it may cross pytest-xdist as any JSON), or None."""
    try:
        return None if data is None else Estimate.from_json(data)
    except ValueError:
        return None


def _json_of(found: Estimate | None) -> list[float] | None:
    return None if found is None else found.to_json()


def unmeasured_cause(config: pytest.Config) -> str:
    """Why a benchmark test that passed left no measurement (pytest-benchmark's own rules)."""
    if benchmarks_disabled(config):
        return "ran once, unmeasured: --benchmark-disable"
    if under_xdist(config):
        return (
            "ran unmeasured: pytest-benchmark measures nothing under pytest-xdist (-n); "
            "run the benchmarks without -n"
        )
    return "ran without measuring: the test no longer calls the benchmark fixture"


class GatePlugin:
    """Saves baselines, compares with them and decides the regression verdict."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[session_key].settings
        self.worker = hasattr(config, "workerinput")
        self.baseline: loading.Baseline | None = None
        self.lines: list[str] = []
        self.seen = Measurements()
        self.kernels = calibration.Kernels(_timer(config))
        # A fresh process checking a session is dated as that session (``fresh.WHEN_ENV``).
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.when = os.environ.get(fresh.WHEN_ENV) or started
        self.failing: list[str] = []
        self.kernel_kinds: dict[str, str] = {}
        self._env: dict[str, Any] | None = None
        self.ready = False
        self.deselected: list[pytest.Item] = []
        self.ran: set[str] = set()  # node ids of the tests that passed in this session
        self.spent: dict[str, float] = {}  # seconds each test took, setup to teardown
        # Set in a child session started to check a regression afresh (``fresh``): it only
        # measures, and writes what it measured there.
        self.fresh_out = fresh.claim_output()

    # ------------------------------------------------------------------ session start

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Usage errors before any benchmark runs; workers load the baseline to confirm."""
        settings = self.settings
        if settings.gating and not (settings.compare or settings.compare_ref):
            # Set in an ini file, it applies to every run: say where it came from.
            where = (
                "" if self.config.getoption("fail_on_regression") else " (ini fail_on_regression)"
            )
            raise pytest.UsageError(
                f"--fail-on-regression{where} needs something to compare with: add "
                "--compare=NAME (a baseline saved with --save-baseline=NAME) or --compare-ref=REF"
            )
        if settings.save_baseline and not self.worker:
            problem = store.check_target(settings.baseline_dir, settings.save_baseline)
            if problem:
                raise pytest.UsageError(f"--save-baseline={settings.save_baseline}: {problem}")
        if settings.profile_regressions is not None and not self.worker:
            _check_profile_dir(settings.profile_regressions)
        if settings.compare:
            self.baseline = self._load(settings.compare)
            self.config.stash[against_key] = _described(
                settings.compare, self.baseline, self.config.rootpath
            )
        self.kernel_kinds = _kernel_kinds(self.baseline or self._saved(settings.save_baseline))
        self.ready = True

    def _saved(self, name: str | None) -> loading.Baseline | None:
        """The baseline this session adds to, when it loads (only to keep its kernel kinds)."""
        try:
            path = store.baseline_path(self.settings.baseline_dir, name or "")
            return store.load(path) if name and path.is_file() else None
        except loading.BaselineError:
            return None

    def _load(self, name: str) -> loading.Baseline:
        directory = self.settings.baseline_dir
        try:
            path = store.baseline_path(directory, name)
            if not directory.is_dir():  # a misspelt --tpu-baseline-dir, or nothing saved yet
                raise pytest.UsageError(
                    f"--compare={name}: the baseline folder {directory} does not exist, so no "
                    f"baseline was saved there (--save-baseline={name} saves one; "
                    "--tpu-baseline-dir or ini tpu_baseline_dir names another folder)"
                )
            if not path.is_file():
                names = ", ".join(store.list_names(directory)) or "none"
                raise pytest.UsageError(
                    f"--compare={name}: no baseline {name!r} in {directory}; saved: {names}"
                )
            return store.load(path)
        except loading.BaselineError as exc:
            raise pytest.UsageError(f"--compare={name}: {exc}") from None

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.deselected += items  # -k, -m: not "missing" from the comparison

    # ------------------------------------------------------------------ per benchmark

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """Time the calibration kernel before every round, on the benchmark's device."""
        funcargs = getattr(item, "funcargs", None) or {}
        fixture = funcargs.get("benchmark")
        if fixture is None or getattr(fixture, "disabled", False) or self.settings.compare_ref:
            # Same-job comparisons pair neighbouring rounds instead: no kernel on one side only.
            return (yield)
        devices = getattr(funcargs.get("accelerator"), "devices", ())
        device = str(devices[0]) if devices else None
        label = item.stash.get(rerun_key, "")
        if label:  # pytest-benchmark's own table and JSON name the repetition apart
            fixture.name = f"{fixture.name} ({label})"
            fixture.fullname = f"{fixture.fullname} ({label})"
        timer = getattr(fixture, "_timer", None) or self.kernels.timer
        prefer = self.kernel_kinds.get(item.nodeid, "")
        size_rounds_on_a_steady_call(fixture)  # first: the kernel wraps the steady runner
        item.stash[recording_key] = calibration.instrument(
            fixture, self.kernels, device, timer, prefer
        )
        probe = bandwidth.Probe()  # first: its copies are this process's own CPU time
        meter = contention.Meter.start()
        try:
            return (yield)
        finally:
            item.stash[use_key] = meter.use()
            item.stash[copy_key] = probe.finish()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Carry the kernel timings on the call report, so they cross pytest-xdist too."""
        report = yield
        record = item.stash.get(recording_key, None)
        if call.when == "call" and record is not None:
            fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
            stats = getattr(getattr(fixture, "stats", None), "stats", None)
            rounds = len(getattr(stats, "data", ()))
            use = item.stash.get(use_key, None)
            data = {
                "timings": record.aligned(rounds),
                "kind": record.kind,
                "others": None if use is None else use.others,
                "own": None if use is None else use.own,
                "memory_copy": _json_of(item.stash.get(copy_key, None)),
            }
            setattr(report, remeasure.CALIBRATION_ATTR, data)
            del item.stash[recording_key]
        if call.when == "call":
            own = marker_thresholds(item)
            if own:
                setattr(report, remeasure.THRESHOLDS_ATTR, own)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        """Run a benchmark, repeating it for --measure-noise or to confirm a regression."""
        if "benchmark" not in getattr(item, "fixturenames", ()):
            return None
        if not self.settings.measure_noise and not self._may_fail(item):
            return None
        noise = self._noise_runs(item, nextitem)
        reports = remeasure.run_unlogged(item, nextitem)
        report = remeasure.call_report(reports)
        if report is not None:
            if noise:
                setattr(report, remeasure.NOISE_ATTR, noise)
            self._confirm_if_failing(item, nextitem, reports, report)
        remeasure.log_reports(item, reports)
        return True

    def _may_fail(self, item: pytest.Item) -> bool:
        base = self.baseline
        return self.settings.gating and (base is not None and item.nodeid in base.sides)

    def _noise_runs(self, item: pytest.Item, nextitem: pytest.Item | None) -> list[Any]:
        if not self.settings.measure_noise:
            return []
        runs = []
        for index in range(NOISE_RUNS - 1):
            item.stash[rerun_key] = f"noise run {index + 2}"
            try:
                found = remeasure.measurement(remeasure.run_unlogged(item, nextitem))
            finally:
                del item.stash[rerun_key]
            if found is not None:
                runs.append(found)
        return runs

    def _confirm_if_failing(
        self,
        item: pytest.Item,
        nextitem: pytest.Item | None,
        reports: list[pytest.TestReport],
        report: pytest.TestReport,
    ) -> None:
        first = remeasure.measurement(reports)
        if first is None or not self._may_fail(item) or not self._fails(first):
            return
        item.stash[rerun_key] = "confirmation"
        try:
            again = remeasure.measurement(remeasure.run_unlogged(item, nextitem))
        finally:
            del item.stash[rerun_key]
        if again is not None:
            setattr(report, remeasure.CONFIRM_ATTR, again)

    def _fails(self, found: dict[str, Any]) -> bool:
        """Whether one measurement alone would fail the gate (decides a confirmation)."""
        assert self.baseline is not None
        result = BenchResult.from_json(found["result"])
        side = store.side_of(result, self._environment(), [_summary(result, found["calibration"])])
        row = compare_one(self.baseline.sides[result.nodeid], side, self._threshold(), False)
        return row.regression

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.spent[report.nodeid] = self.spent.get(report.nodeid, 0.0) + report.duration
        if report.when != "call":
            return
        if report.passed:  # ran: a saved benchmark without a result here was not measured
            self.ran.add(report.nodeid)
        for attr, bucket in (
            (remeasure.CALIBRATION_ATTR, self.seen.calibration),
            (remeasure.NOISE_ATTR, self.seen.noise),
            (remeasure.CONFIRM_ATTR, self.seen.confirm),
            (remeasure.THRESHOLDS_ATTR, self.seen.thresholds),
        ):
            value = getattr(report, attr, None)
            if value:
                bucket[report.nodeid] = value

    # ------------------------------------------------------------------ session end

    def _threshold(self) -> float:
        return (self.settings.fail_on_regression or 5.0) / 100

    def _environment(self) -> dict[str, Any]:
        """The session's environment key, read once (it runs git)."""
        if self._env is None:
            self._env = store.session_environment(self.config.rootpath)
            # Rounds that take turns with a base process run on a shared core with caches the
            # other side just used: their times differ from a plain run's (seen: a 70 µs
            # function at 90-110 µs). Runs saved so are their own history, never mixed in.
            self._env["rounds"] = (
                "alternating (--compare-ref)" if self.settings.compare_ref else "alone"
            )
        return self._env

    def _runs(self, result: BenchResult) -> list[RunSummary]:
        """This session's runs of a benchmark: the run, then --measure-noise repetitions."""
        commit = self._environment().get("commit")
        runs = [_summary(result, self.seen.calibration.get(result.nodeid), when=self.when)]
        for extra in self.seen.noise.get(result.nodeid, []):
            again = BenchResult.from_json(extra["result"])
            runs.append(_summary(again, extra.get("calibration"), when=self.when, source="noise"))
        return [replace(run, commit=commit) for run in runs]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Compare, decide and save; the controller only, and only after a completed run."""
        if self.worker or not self.ready:
            return
        if session.exitstatus not in _DONE_STATUSES:
            asked = ["no baseline saved"] if self.settings.save_baseline else []
            asked += ["nothing compared with a baseline"] if self.settings.compare else []
            if asked:  # only what this session was asked to do (--compare-ref says its own)
                # "Interrupted" read oddly where -k matched nothing (new-user trial 28).
                empty = session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
                why = "no tests ran" if empty else "session interrupted"
                self.lines.append(f"{why}: {', '.join(asked)}")
            return
        results = self.config.stash[results_key]
        if self.fresh_out is not None:
            self._write_fresh(self.fresh_out, results.passed)
            return
        steps: list[tuple[str, Callable[[], None]]] = []
        if self.baseline is not None:
            steps.append(("compare", lambda: self._compare(session, results)))
        if self.settings.save_baseline:
            steps.append(("save", lambda: self._save(session, results)))
        if self.settings.measure_noise:
            steps.append(("noise", lambda: self._report_noise(results.passed)))
        if self.settings.profile_regressions is not None:
            steps.append(("profile", self._profile))
        for name, step in steps:
            try:
                step()
            except Exception as exc:  # one failing step must not take the others down
                self.lines.append(f"pytest-tpu: the {name} step failed: {exc!r}")
                if name == "save":
                    self._save_failed(session)

    def _compare(self, session: pytest.Session, results: Any) -> None:
        assert self.baseline is not None
        rows = self._rows(session, results, fresh.Fresh())
        checking = self._to_check_afresh(rows)
        if self.settings.gating and checking:
            again = fresh.replayed([result.nodeid for result in results.passed], checking)
            spent = math.fsum(self.spent.get(nodeid, 0.0) for nodeid in again)
            rows = self._rows(
                session, results, fresh.measure(self.config, self.settings, again, spent, self.when)
            )
        self.config.stash[comparison_key] = rows
        self.lines += comparison_lines(str(self.baseline.path), rows)
        if self.settings.gating:
            self._decide(session, rows)

    def _to_check_afresh(self, rows: list[Row]) -> list[str]:
        """Gated time rows a fresh process must read again (it re-measures time, not memory):
        those the gate is about to fail on, and improvements, which stand only if it agrees
        (``compare._fresh_checked``). A session with neither starts no process."""
        found = [row for row in rows if row.regression or row.verdict == "faster"]
        gated = self._time_thresholds(found)
        return [row.nodeid for row in found if row.metric == "time" and row.nodeid in gated]

    def _rows(self, session: pytest.Session, results: Any, checked: fresh.Fresh) -> list[Row]:
        """Every row, with what a fresh process measured where one was asked (``checked``)."""
        assert self.baseline is not None
        current = {result.nodeid: self._side(result, checked) for result in results.passed}
        return compare_runs(
            self.baseline.sides,
            current,
            threshold=self._threshold(),
            force=self.settings.compare_force,
            failed=[result.nodeid for result in results.failed],
            thresholds={key: self._thresholds_of(key) for key in current},
            scope=self._scope(session),
            ran=self.ran,
            unmeasured_why=unmeasured_cause(self.config),
        )

    def _side(self, result: BenchResult, checked: fresh.Fresh) -> Side:
        """This session's side of a benchmark: its runs, its confirmation, a fresh process's."""
        confirm = self.seen.confirm.get(result.nodeid)
        again = None
        if confirm is not None:
            again = _summary(BenchResult.from_json(confirm["result"]), confirm.get("calibration"))
        side = store.side_of(result, self._environment(), self._runs(result), again)
        found = checked.measurements.get(result.nodeid)
        if found is not None:
            return replace(
                side,
                fresh=_summary(BenchResult.from_json(found["result"]), found.get("calibration")),
            )
        if checked.problem or checked.measurements:  # asked, and it did not measure this one
            return replace(side, fresh_problem=checked.problem or "it did not measure it")
        return side

    def _write_fresh(self, path: Path, passed: Sequence[BenchResult]) -> None:
        """In a child session: what it measured, for the session that started it."""
        measured = {
            result.nodeid: {
                "result": result.to_json(),
                "calibration": self.seen.calibration.get(result.nodeid),
            }
            for result in passed
        }
        fresh.write(path, measured)

    def _thresholds_of(self, nodeid: str) -> dict[str, float]:
        """A benchmark's thresholds (fractions): its marker's, over the session's."""
        merged = {**self.settings.thresholds, **self.seen.thresholds.get(nodeid, {})}
        return {metric: pct / 100 for metric, pct in merged.items()}

    def _decide(self, session: pytest.Session, rows: list[Row]) -> None:
        threshold = self.settings.fail_on_regression or 5.0
        gated = [r for r in rows if r.metric in self._thresholds_of(r.nodeid)]
        shown = {r.metric for r in rows if r.status == "compared"}
        not_gated = sorted(shown - {r.metric for r in gated})
        limits = self.settings.thresholds
        said = gate_lines(gated or rows, threshold, self.settings.compare, not_gated, limits)
        hint = between_sessions_hint(gated or rows, self._time_thresholds(rows))
        said += [hint] if hint else []  # stored runs only: a same-job session says its own
        failing = regressions(gated)
        note = self._span_note(failing)
        said += [note] if note else []
        self.lines += said
        remember_gate(self.config, said, gate_verdict(gated or rows))
        if failing and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = REGRESSION_EXIT_CODE
        self.failing = [row.nodeid for row in failing]

    def _span_note(self, failing: Sequence[Row]) -> str:
        """How far apart in time the saved runs behind ``failing`` were, where it matters."""
        if not failing or self.baseline is None:
            return ""
        sides = [self.baseline.sides.get(row.nodeid) for row in failing]
        runs = [run for side in sides if side is not None for run in side.runs]
        return saved_span_note(runs, datetime.now(timezone.utc))

    def _scope(self, session: pytest.Session) -> Scope | None:
        """The files this session collected (and those of saved benchmarks that are gone) and
        the tests it deselected; None where it collected nothing itself (an xdist controller:
        its workers collect)."""
        items = [*session.items, *self.deselected]
        if not items:
            return None
        files = {item.nodeid.partition("::")[0] for item in items} - self._named()
        # A saved benchmark whose file is gone was not left out: it is missing.
        saved = {key.partition("::")[0] for key in self.baseline.sides} if self.baseline else set()
        files |= {name for name in saved if not (self.config.rootpath / name).exists()}
        return Scope(frozenset(files), frozenset(x.nodeid for x in self.deselected))

    def _named(self) -> set[str]:
        """Files of which the command line named single tests (``file.py::test_x``): collected
        only in part, so the rest of them are not missing."""
        params = self.config.invocation_params
        named = set()
        for arg in params.args:
            path, sep, _ = str(arg).partition("::")
            if sep:
                full = (params.dir / path).resolve()
                with contextlib.suppress(ValueError):
                    named.add(full.relative_to(self.config.rootpath.resolve()).as_posix())
        return named

    def _time_thresholds(self, rows: list[Row]) -> dict[str, float]:
        """Each gated benchmark's time threshold (a fraction), by node id."""
        thresholds = {row.nodeid: self._thresholds_of(row.nodeid) for row in rows}
        return {nodeid: own["time"] for nodeid, own in thresholds.items() if "time" in own}

    def _profile(self) -> None:
        """After the verdict, so the profiler's re-run never touches this session's timings."""
        if self.failing:
            from pytest_tpu.profiling import profile_regressions

            profile_regressions(self.config, self.failing)

    def _save(self, session: pytest.Session, results: Any) -> None:
        name = self.settings.save_baseline or ""
        saver = saving.Saver(self.config, self.settings, self._environment)
        saved = saver.save(name, results, self._runs)
        self.lines += saver.lines
        if not saved:
            self._save_failed(session)

    def _save_failed(self, session: pytest.Session) -> None:
        if session.exitstatus in (pytest.ExitCode.OK, REGRESSION_EXIT_CODE):
            session.exitstatus = SAVE_FAILED_EXIT_CODE
        self.lines.append(f"--save-baseline failed: exit code {SAVE_FAILED_EXIT_CODE}")

    def _report_noise(self, passed: list[BenchResult]) -> None:
        self.lines.append("noise: run-to-run spread of each benchmark within this session")
        for result in passed:
            runs = self._runs(result)
            raw = [run.raw.value for run in runs]
            cal = [run.calibrated.value for run in runs if run.calibrated is not None]
            self.lines.append(
                noise_line(
                    result.nodeid,
                    relative_spread(raw) if len(raw) >= 2 else None,
                    relative_spread(cal) if len(cal) == len(raw) >= 2 else None,
                    len(runs),
                )
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Print what the session decided; never raises."""
        if not self.lines:
            return
        try:
            terminalreporter.write_sep("-", "pytest-tpu baselines")
            for line in self.lines:
                terminalreporter.write_line(line)
        except Exception as exc:  # a summary must never turn a verdict into a traceback
            terminalreporter.write_line(f"pytest-tpu: could not print the gate summary: {exc}")


def _kernel_kinds(saved: loading.Baseline | None) -> dict[str, str]:
    """The calibration kernel each saved benchmark's latest run used."""
    if saved is None:
        return {}
    return {nodeid: side.latest.kernel_kind for nodeid, side in saved.sides.items()}


def _described(name: str, baseline: loading.Baseline, root: Path) -> str:
    """What a report compared with: the name alone does not say which file or which runs, and
    a report is read after the baseline has moved on (trial 34: ``"baseline": "main"``). The
    file relative to the rootdir where it is under it, as a pull request's reader sees it."""
    runs = [run for side in baseline.sides.values() for run in side.runs]
    path = baseline.path
    with contextlib.suppress(ValueError):
        path = path.relative_to(root)
    return f"{name} ({path}; {saved_when(runs)})"


def _check_profile_dir(path: Path) -> None:
    """--tpu-profile-regressions must name a folder that is or can be made: checked at start."""
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"--tpu-profile-regressions={path}: is not a folder")
    parent = next((p for p in (path, *path.parents) if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK):
        raise pytest.UsageError(f"--tpu-profile-regressions={path}: {parent} cannot be written")
