"""Baselines and the regression gate as a pytest plugin object (registered only when used).

At session start the baseline directory must be writable (``--save-baseline``) and the compared
baseline must exist and load (``--compare``): usage errors before any benchmark runs. Before each
round of a benchmark the gate times a fixed calibration kernel with the benchmark's own timer
(``pytest_tpu.gate.calibration``), and decides on the per-round ratios, so a machine that is slower
today as a whole is not mistaken for a regression. At session end the controller
(never an xdist worker) saves, compares and decides the exit status; the terminal summary only
prints what was decided.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import Any

import pytest

from pytest_tpu.gate import baseline as store
from pytest_tpu.gate import calibration
from pytest_tpu.gate.compare import Row, compare_runs, comparison_key, regressions
from pytest_tpu.gate.stats import (
    compare_samples,
    detectable_slowdown,
    relative_spread,
    run_locations,
)
from pytest_tpu.options import REGRESSION_EXIT_CODE, Settings
from pytest_tpu.results import REPORT_ATTR, BenchResult, results_key

NOISE_ATTR = "pytest_tpu_noise"
NOISE_RUNS = 5  # runs per benchmark with --measure-noise, the normal run included
_SAVE_STATUSES = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
noise_key = pytest.StashKey[list[dict[str, Any]]]()


def _settings(config: pytest.Config) -> Settings:
    from pytest_tpu.session import session_key

    return config.stash[session_key].settings


def _timer(config: pytest.Config) -> Callable[[], float]:
    """pytest-benchmark's timer (``--benchmark-timer``), so calibration and rounds agree."""
    try:
        option = config.getoption("benchmark_timer")
    except ValueError:
        return time.perf_counter
    return getattr(option, "target", time.perf_counter)


def _noise_results(reports: list[pytest.TestReport]) -> list[dict[str, Any]]:
    return [
        getattr(report, REPORT_ATTR)
        for report in reports
        if report.when == "call" and getattr(report, REPORT_ATTR, None) is not None
    ]


class GatePlugin:
    """Saves baselines, compares with them and decides the regression verdict."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = _settings(config)
        self.worker = hasattr(config, "workerinput")
        self.baseline: store.Baseline | None = None
        self.ready = False
        self.lines: list[str] = []
        self.noise: dict[str, list[BenchResult]] = {}
        self.kernels = calibration.Kernels()

    # ------------------------------------------------------------------ session start

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Usage errors before any benchmark runs: unwritable directory, unusable baseline."""
        if self.worker:
            return
        directory = self.settings.baseline_dir
        if self.settings.save_baseline:
            problem = store.check_writable(directory)
            if problem:
                raise pytest.UsageError(f"--save-baseline: {problem}")
        if self.settings.compare:
            self.baseline = self._load(self.settings.compare)
        self.ready = True

    def _load(self, name: str) -> store.Baseline:
        directory = self.settings.baseline_dir
        try:
            path = store.baseline_path(directory, name)
            if not path.is_file():
                names = ", ".join(store.list_names(directory)) or "none"
                raise pytest.UsageError(
                    f"--compare={name}: no baseline {name!r} in {directory}; saved: {names}"
                )
            return store.load(path)
        except store.BaselineError as exc:
            raise pytest.UsageError(f"--compare={name}: {exc}") from None

    # ------------------------------------------------------------------ per benchmark

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        """With --measure-noise, run each benchmark again in fresh, unlogged runs first."""
        if self.settings.measure_noise and "benchmark" in getattr(item, "fixturenames", ()):
            # pytest has no public way to run a test without logging it; pytest-rerunfailures
            # uses the same function for the same reason.
            from _pytest.runner import runtestprotocol

            runs: list[dict[str, Any]] = []
            for _ in range(NOISE_RUNS - 1):
                # Tear down as far as before the next test: the test's own fixtures are fresh
                # each run, wider ones survive when the next test shares them.
                runs.extend(_noise_results(runtestprotocol(item, nextitem=nextitem, log=False)))
            item.stash[noise_key] = runs
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """Time the calibration kernel beside the benchmark's rounds, on the benchmark's device."""
        funcargs = getattr(item, "funcargs", {})
        fixture = funcargs.get("benchmark")
        if fixture is None or not callable(getattr(fixture, "pedantic", None)):
            return (yield)
        devices = getattr(funcargs.get("accelerator"), "devices", ())
        device = devices[0] if devices else None
        timer = getattr(fixture, "_timer", None) or _timer(self.config)
        record = calibration.instrument(fixture, lambda: self.kernels.get(device), timer)
        try:
            return (yield)
        finally:
            _store_calibration(fixture, record)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Carry the noise runs on the call report, so they cross pytest-xdist too."""
        report = yield
        if call.when == "call" and noise_key in item.stash:
            setattr(report, NOISE_ATTR, item.stash[noise_key])
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        runs = getattr(report, NOISE_ATTR, None)
        if runs and report.when == "call":
            self.noise[report.nodeid] = [BenchResult.from_json(run) for run in runs]

    # ------------------------------------------------------------------ session end

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Save, compare and decide; the controller only, and only after a completed run."""
        if self.worker or not self.ready:
            return
        if session.exitstatus not in _SAVE_STATUSES:
            self.lines.append("session interrupted: no baseline saved, nothing compared")
            return
        results = self.config.stash[results_key]
        environment = store.session_environment(self.config.rootpath)
        if self.baseline is not None:
            self._compare(session, results.passed, results.failed, environment)
        elif self.settings.fail_on_regression is not None:
            self.lines.append("--fail-on-regression has nothing to check: no --compare given")
        if self.settings.save_baseline:
            self._save(results.passed, results.failed, environment)
        if self.settings.measure_noise:
            self._report_noise(results.passed)

    def _save(
        self, passed: list[BenchResult], failed: list[BenchResult], environment: dict[str, Any]
    ) -> None:
        name = self.settings.save_baseline or ""
        if not passed:
            self.lines.append(f"no benchmark passed: baseline {name!r} not saved")
            return
        left_out = [result.nodeid for result in failed]
        try:
            path = store.save(self.settings.baseline_dir, name, passed, environment, left_out)
        except (OSError, store.BaselineError) as exc:
            self.lines.append(f"baseline {name!r} NOT saved: {exc}")
            return
        self.lines.append(f"saved baseline {name!r}: {len(passed)} benchmarks in {path}")
        for result in failed:
            self.lines.append(f"  left out (failed): {result.nodeid}: {result.error}")

    def _compare(
        self,
        session: pytest.Session,
        passed: list[BenchResult],
        failed: list[BenchResult],
        environment: dict[str, Any],
    ) -> None:
        assert self.baseline is not None
        threshold = (self.settings.fail_on_regression or 5.0) / 100
        current = {result.nodeid: store.side_of(result, environment) for result in passed}
        rows = compare_runs(
            self.baseline.sides,
            current,
            threshold=threshold,
            force=self.settings.compare_force,
            failed=[result.nodeid for result in failed],
        )
        self.config.stash[comparison_key] = rows
        self.lines += comparison_lines(str(self.baseline.path), rows)
        failing = regressions(rows)
        if self.settings.fail_on_regression is not None:
            name = self.settings.compare
            self.lines += gate_lines(failing, self.settings.fail_on_regression, name)
            if failing and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = REGRESSION_EXIT_CODE
        # After the verdict, so the profiler's re-run never touches this session's timings.
        from pytest_tpu.profiling import profile_regressions

        profile_regressions(self.config, [row.nodeid for row in failing])

    def _report_noise(self, passed: list[BenchResult]) -> None:
        self.lines.append(
            "noise: run-to-run spread of each benchmark within this session "
            "(between sessions the machine's speed drifts more; per-round calibration cancels "
            "most of that drift)"
        )
        for result in passed:
            runs = [*self.noise.get(result.nodeid, []), result]
            self.lines.append(_noise_line(result.nodeid, runs))

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


def _store_calibration(fixture: Any, record: calibration.Recording) -> None:
    """Put the kernel timings in extra_info, per round only when they align with the rounds."""
    if not record.samples:
        return
    stats = getattr(getattr(fixture, "stats", None), "stats", None)
    rounds = len(getattr(stats, "data", ()))
    samples = record.aligned(rounds) if record.interleaved else record.samples
    fixture.extra_info[store.CALIBRATION_KEY] = samples
    fixture.extra_info[store.INTERLEAVED_KEY] = record.interleaved and len(samples) == rounds


def _noise_line(nodeid: str, runs: list[BenchResult]) -> str:
    usable = [run for run in runs if len(run.samples) >= 2]
    if len(usable) < 2:
        return f"  {nodeid}: fewer than two runs with samples; no estimate"
    samples = [run.samples for run in usable]
    calibrations = [tuple(run.extra_info.get(store.CALIBRATION_KEY) or ()) for run in usable]
    paired = all(store.side_of(run, {}).interleaved for run in usable)
    raw = relative_spread(run_locations(samples))
    spread = relative_spread(run_locations(samples, calibrations, paired=paired)) if paired else raw
    pair = compare_samples(samples[0], samples[1], *calibrations[:2], paired=paired)
    smallest = detectable_slowdown(spread, pair.width)
    measured = (
        f"raw spread {raw:.1%}, calibrated spread {spread:.2%}"
        if paired
        else (f"run-to-run spread {raw:.1%} (not calibrated per round)")
    )
    return (
        f"  {nodeid}: {len(usable)} runs, {measured}; "
        f"smallest slowdown the gate catches reliably here: {smallest:.1%}"
    )


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:+.1%}"


def _row_line(row: Row) -> str:
    """One compact line per benchmark; the full table is the report's job."""
    if row.status != "compared":
        why = f": {row.reason}" if row.reason else ""
        return f"  {row.nodeid}: {row.status}{why}"
    sure = f", {row.confidence:.1%} sure slower" if row.verdict == "slower" else ""
    machine = f", machine {_pct(row.machine)} vs baseline" if row.machine is not None else ""
    machine += "" if row.calibrated else ", raw samples: no per-round calibration"
    forced = " [forced]" if row.forced else ""
    return (
        f"  {row.nodeid}: {row.verdict} {row.metric} {_pct(row.change)} "
        f"(95% interval {_pct(row.low)} .. {_pct(row.high)}{sure}{machine}){forced}"
    )


def comparison_lines(path: str, rows: list[Row]) -> list[str]:
    """Summary lines of a comparison: counts, then one line per benchmark."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    shown = ", ".join(f"{count} {status}" for status, count in counts.items()) or "nothing"
    return [f"compared with baseline {path}: {shown}", *(_row_line(row) for row in rows)]


def gate_lines(failing: list[Row], threshold: float, name: str | None) -> list[str]:
    """The verdict of --fail-on-regression, naming each regressed benchmark."""
    if not failing:
        return [f"regression gate ({threshold:g}%): passed"]
    lines = [
        f"REGRESSION {row.nodeid}: {row.metric} {_pct(row.change)} vs baseline {name!r} "
        f"(95% interval {_pct(row.low)} .. {_pct(row.high)}; "
        f"{(row.confidence or 0):.1%} sure it is slower)"
        for row in failing
    ]
    lines.append(
        f"regression gate ({threshold:g}%): FAILED, {len(failing)} benchmark(s) regressed; "
        f"exit code {REGRESSION_EXIT_CODE}"
    )
    return lines
