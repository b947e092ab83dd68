"""Scale-out with MultiWorkerMirroredStrategy (``--tpu-workers``, ``TF_CONFIG``), scaling table.

One plugin object, three roles chosen at configure time:

* **controller** (``--tpu-workers=N``, no ``TF_CONFIG``): runs the session's tests in N local worker
  processes (``python -m pytest`` with the same arguments), each with its own ``TF_CONFIG`` on
  127.0.0.1, replays the chief's reports as its own (so the terminal, ``--junitxml``, the result
  store and the gate see them), then runs 1, 2, 4, ... workers for the scaling table.
* **worker** (``TF_CONFIG`` set, by the controller or by the user's own cluster): joins the
  cluster; ``tpu_strategy`` is a MultiWorkerMirroredStrategy; the chief streams its reports to
  the controller.
* **observer** (neither): prints a scaling table when the session's results span several
  replica counts.

TensorFlow is imported only when a worker first needs a device, never at plugin load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import pytest

from pytest_tpu import scaling, workers
from pytest_tpu.devices import GPU_GROWTH_ENV
from pytest_tpu.merge import ReportMerger
from pytest_tpu.options import Settings, resolve_settings
from pytest_tpu.parsers import parse_positive_float
from pytest_tpu.results import REPORT_ATTR, BenchResult, results_key

CLUSTER_PLUGIN_NAME = "pytest-tpu-cluster"
REPORTS_ENV = "PYTEST_TPU_REPORTS"  # file a worker appends its serialized reports to
PARENT_ENV = "PYTEST_TPU_PARENT_PID"  # the controller's pid, watched by its workers
# How long a worker waits for the other tasks of TF_CONFIG before giving up. Long enough for
# peers that import TensorFlow on a loaded machine; short enough that a stale TF_CONFIG (a
# leftover from another job) ends the session instead of hanging it.
PEER_TIMEOUT_ENV = "PYTEST_TPU_PEER_TIMEOUT"
DEFAULT_PEER_TIMEOUT = 120.0
# Parameters that are the scale itself, not part of a workload's identity in the table.
SCALE_PARAMS = frozenset({"accelerator", "replicas", "workers"})

# Every result of every cluster run of the controller (the N-worker run and the smaller ones).
sweep_key = pytest.StashKey[list[BenchResult]]()

_FLAG, _VALUE, _OPTIONAL = "flag", "value", "optional"
# Outputs the controller writes itself from the replayed reports, and the gate's options (the
# gate runs once, in the controller, on the gathered results): never given to a worker.
_CONTROLLER_ONLY = {
    "--junitxml": _VALUE,
    "--junit-xml": _VALUE,
    "--tpu-report": _VALUE,
    "--tpu-report-plot": _VALUE,
    "--save-baseline": _OPTIONAL,
    "--compare": _OPTIONAL,
    "--fail-on-regression": _VALUE,
    "--tpu-measure-noise": _FLAG,
    "--measure-noise": _FLAG,
    "--tpu-profile-regressions": _VALUE,
    "--profile-regressions": _VALUE,
    "--tpu-workers": _VALUE,
    "--basetemp": _VALUE,
    "--benchmark-compare": _OPTIONAL,
    "--benchmark-compare-fail": _VALUE,
    "--benchmark-histogram": _OPTIONAL,
}
# pytest-benchmark's own files: the chief writes them, so they hold each result once.
_CHIEF_ONLY = {
    "--benchmark-json": _VALUE,
    "--benchmark-save": _VALUE,
    "--benchmark-autosave": _FLAG,
}

# One MultiWorkerMirroredStrategy per process: TensorFlow configures collectives once per
# process, so this cannot live on a config stash (pytester runs several configs per process).
_STRATEGY: list[Any] = []


def wanted(settings: Settings) -> bool:
    """Whether this session needs the cluster plugin at all."""
    return bool(settings.workers or settings.virtual_cpus or os.environ.get("TF_CONFIG"))


def register(config: pytest.Config) -> None:
    """Register the plugin object once (idempotent, whoever calls first)."""
    if not config.pluginmanager.has_plugin(CLUSTER_PLUGIN_NAME):
        config.pluginmanager.register(ClusterPlugin(config), CLUSTER_PLUGIN_NAME)


def pytest_configure(config: pytest.Config) -> None:
    """Module-level entry for ``-p pytest_tpu.cluster``: register when the options ask for it."""
    if wanted(resolve_settings(config)):
        register(config)


def cluster_from_env() -> dict[str, Any] | None:
    """The cluster ``TF_CONFIG`` defines, or None; a malformed one is a usage error."""
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise pytest.UsageError(f"TF_CONFIG is not valid JSON ({exc}): {raw[:200]}") from None
    problem = workers.tf_config_problem(config)
    if problem is not None:
        raise pytest.UsageError(f"TF_CONFIG cannot be used: {problem}: {raw[:200]}")
    assert isinstance(config, dict)
    return config


def peer_timeout() -> float:
    """Seconds to wait for the cluster's other tasks (``PYTEST_TPU_PEER_TIMEOUT``)."""
    raw = os.environ.get(PEER_TIMEOUT_ENV)
    if not raw:
        return DEFAULT_PEER_TIMEOUT
    try:
        return parse_positive_float(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"environment {PEER_TIMEOUT_ENV}: {exc}") from None


def join_cluster(
    cluster: dict[str, Any], virtual_cpus: int | None, say: Callable[[str], None]
) -> Any:
    """Wait (bounded) for the cluster's peers, then make the strategy; a usage error if not."""
    if _STRATEGY:
        return _STRATEGY[0]
    timeout = peer_timeout()
    with workers.sigterm_as_interrupt():  # SIGTERM ends the wait (exit code 2)
        missing = workers.wait_for_peers(cluster, timeout, say)
    if missing:
        raise pytest.UsageError(
            f"TF_CONFIG names a cluster whose other tasks did not answer within {timeout:g}s: "
            f"{'; '.join(f'{name} at {why}' for name, why in missing.items())}. Start them, or "
            f"unset TF_CONFIG if it is left over from another job ({PEER_TIMEOUT_ENV} sets the "
            "wait)"
        )
    try:
        return worker_strategy(virtual_cpus)
    except Exception as exc:  # TensorFlow's own objection to the cluster: a usage problem
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise pytest.UsageError(
            f"TF_CONFIG: TensorFlow cannot join this cluster: {type(exc).__name__}: {first}"
        ) from None


def worker_strategy(virtual_cpus: int | None = None) -> Any:
    """This process's MultiWorkerMirroredStrategy over the ``TF_CONFIG`` cluster, made once.

    TensorFlow wants collectives configured at program start, before any other op: the plugin
    calls this before device discovery initialises TensorFlow. The CPU is split first, exactly
    as discovery will ask for, so discovery's own identical request is accepted afterwards.
    """
    if not _STRATEGY:
        import tensorflow as tf

        if virtual_cpus and virtual_cpus > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            logical = [tf.config.LogicalDeviceConfiguration() for _ in range(virtual_cpus)]
            tf.config.set_logical_device_configuration(cpu, logical)
        _STRATEGY.append(tf.distribute.MultiWorkerMirroredStrategy())
    return _STRATEGY[0]


def scales(count: int) -> list[int]:
    """Worker counts for the scaling table: 1, 2, 4, ... below ``count``, then ``count``."""
    out, scale = [], 1
    while scale < count:
        out.append(scale)
        scale *= 2
    return [*out, count]


def worker_args(args: Sequence[str], chief: bool) -> list[str]:
    """The controller's command line for one worker, without the controller-only options."""
    drop = dict(_CONTROLLER_ONLY) if chief else {**_CONTROLLER_ONLY, **_CHIEF_ONLY}
    out: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        name, eq, _ = arg.partition("=")
        kind = drop.get(name)
        if kind is None:
            out.append(arg)
        elif not eq and _takes_next(kind, args, index):
            index += 1  # the option's value, given as the next argument
        index += 1
    return out


def _takes_next(kind: str, args: Sequence[str], index: int) -> bool:
    if kind == _VALUE:
        return True
    # argparse gives an optional value the next argument unless it looks like an option.
    return kind == _OPTIONAL and index + 1 < len(args) and not args[index + 1].startswith("-")


def workload_name(result: BenchResult) -> str:
    """A result's workload for the table: the test name and its non-scale parameters."""
    head = result.name.partition("[")[0]
    rest = [f"{k}={v}" for k, v in sorted(result.params.items()) if k not in SCALE_PARAMS]
    return f"{head}[{','.join(rest)}]" if rest else head


def scaling_points(results: Iterable[BenchResult]) -> list[scaling.Point]:
    """Scaling points of passed results: on the workers axis when they ran in a cluster."""
    points = []
    for result in results:
        rate = scaling.throughput_of(result.extra_info, result.samples)
        if result.outcome != "passed" or rate is None:
            continue
        axis = "workers" if "workers" in result.extra_info else "replicas"
        scale = result.extra_info.get(axis, 1)
        if isinstance(scale, int):
            device = result.kind or "?"
            points.append(scaling.Point(workload_name(result), device, axis, scale, *rate))
    return points


def scaling_rows(config: pytest.Config) -> list[scaling.ScalingRow]:
    """The session's scaling table: from the ``--tpu-workers`` runs, else from the result store.

    This is the call for ``--tpu-report``: ``scaling.to_markdown(rows)`` or
    ``scaling.to_dicts(rows)``.
    """
    results = config.stash.get(sweep_key, None)
    if results is None:
        store = config.stash.get(results_key, None)
        results = store.results if store is not None else []
    return scaling.build(scaling_points(results))


class ClusterPlugin:
    """Runs the session across local workers, or joins the cluster ``TF_CONFIG`` defines."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = resolve_settings(config)
        self.cluster = cluster_from_env()
        self.controller = self.cluster is None and bool(self.settings.workers)
        self.notes: list[str] = []
        self.crashed = False
        self._reports: IO[str] | None = None
        self.join_error: pytest.UsageError | None = None
        if self.controller and config.getoption("numprocesses", None):
            raise pytest.UsageError("--tpu-workers cannot be combined with pytest-xdist's -n")

    # -- worker role -------------------------------------------------------------------------

    def pytest_report_header(self) -> str | None:
        if self.cluster is None:
            return None
        task = self.cluster.get("task", {})
        chief = " (chief)" if workers.is_chief(self.cluster) else ""
        size = workers.cluster_size(self.cluster)
        return f"pytest-tpu cluster: {task.get('type')} {task.get('index')}{chief} of {size}"

    def pytest_sessionstart(self) -> None:
        parent = os.environ.get(PARENT_ENV)
        if self.cluster is not None and parent and parent.isdigit():
            workers.watch_parent(int(parent))

    @pytest.hookimpl(tryfirst=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Join the cluster before device discovery runs its first TensorFlow op."""
        uses_device = "accelerator" in metafunc.fixturenames or (
            metafunc.definition.get_closest_marker("accelerators") is not None
        )
        if self.cluster is None or not uses_device or self.join_error is not None:
            return
        try:
            join_cluster(self.cluster, self.settings.virtual_cpus, self._say)
        except pytest.UsageError as exc:
            # Raised here it would be a collection error per module; raised after collection
            # it ends the session once, as a usage error (exit code 4).
            self.join_error = exc

    def pytest_collection_modifyitems(self) -> None:
        if self.join_error is not None:
            raise self.join_error

    def _say(self, line: str) -> None:
        """A line seen at once: collection output is captured unless capture is lifted."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(line)
            reporter.flush()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Record the cluster size in the result (outermost, after the result is attached)."""
        report = yield
        data = getattr(report, REPORT_ATTR, None)
        if self.cluster is not None and isinstance(data, dict):
            data["extra_info"].setdefault("workers", workers.cluster_size(self.cluster))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Every worker of a controller-started cluster streams each report, one JSON line:
        a test passes only if it passed on every worker, not just on the chief."""
        path = os.environ.get(REPORTS_ENV)
        if self.cluster is None or not path:
            return
        if self._reports is None:
            self._reports = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        self._reports.write(json.dumps(data) + "\n")
        self._reports.flush()  # the controller replays reports while the run goes on

    def pytest_unconfigure(self) -> None:
        if self._reports is not None:
            self._reports.close()

    # -- controller role ---------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """Run the tests in worker processes instead of here."""
        if not self.controller or self.config.getoption("collectonly"):
            return None
        if session.testsfailed and not self.config.getoption("continue_on_collection_errors"):
            return None  # pytest's own loop reports the collection errors
        assert self.settings.workers is not None
        Controller(session, self.settings.workers, self).run()
        return True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.crashed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    # -- every role --------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The scaling table, when results span several replica or worker counts."""
        rows = scaling_rows(self.config)
        if not rows and not self.notes:
            return
        terminalreporter.write_sep("-", "pytest-tpu scaling")
        for line in scaling.render(rows).splitlines() if rows else []:
            terminalreporter.write_line(line)
        for note in self.notes:
            terminalreporter.write_line(note)


class Controller:
    """Runs the session's tests in local clusters and replays the chief's reports here."""

    def __init__(self, session: pytest.Session, count: int, plugin: ClusterPlugin) -> None:
        self.session = session
        self.config = session.config
        self.count = count
        self.plugin = plugin
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.sweep: list[BenchResult] = []

    def run(self) -> None:
        """The N-worker run (its reports replayed), then the smaller runs for the table."""
        self.config.stash[sweep_key] = self.sweep
        with (
            tempfile.TemporaryDirectory(prefix="pytest-tpu-workers-") as tmp,
            workers.sigterm_as_interrupt(),
        ):
            ok = self._run(self.count, Path(tmp), replay=True)
            for scale in scales(self.count)[:-1] if ok else []:
                if not self._run(scale, Path(tmp), replay=False):
                    break

    def _run(self, scale: int, tmp: Path, replay: bool) -> bool:
        """One cluster of ``scale`` workers; True when every worker ended normally."""
        run_dir = tmp / f"cluster-{scale}"
        run_dir.mkdir()
        ports = workers.free_ports(scale)
        reports = [run_dir / f"reports-{i}.jsonl" for i in range(scale)]
        temps = [run_dir / f"tmp-{i}" for i in range(scale)]
        for temp in temps:
            temp.mkdir()
        started = workers.start_workers(
            [self._command(i == 0, temps[i] / "basetemp") for i in range(scale)],
            [self._env(ports, i, reports[i], temps[i]) for i in range(scale)],
            self.config.invocation_params.dir,
            run_dir,
        )
        try:  # from here on, an interrupt anywhere still ends every worker
            self._announce(scale, ports, started)
            tails = [workers.JsonLinesTail(path) for path in reports]
            merger = ReportMerger(scale)
            codes = workers.wait_workers(
                started, lambda: self._receive(_read(started, tails, merger), replay)
            )
        finally:
            workers.end_workers(started)
        ok = all(code in workers.NORMAL_EXITS for code in codes)
        if replay:
            self._fail_unfinished(_exit_message(scale, started, codes))
        if not ok:
            self.plugin.crashed = self.plugin.crashed or replay
            self.plugin.notes.append(_exit_message(scale, started, codes).splitlines()[0])
        return ok

    def _command(self, chief: bool, basetemp: Path) -> list[str]:
        args = worker_args(self.config.invocation_params.args, chief)
        # Each worker its own --basetemp: pytest empties the directory it is given.
        return [sys.executable, "-m", "pytest", *args, f"--basetemp={basetemp}"]

    def _env(self, ports: Sequence[int], index: int, reports: Path, temp: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["TMPDIR"] = str(temp)  # whatever the worker leaves there goes with the run
        env["TF_CONFIG"] = json.dumps(workers.tf_config(ports, index))
        env[PARENT_ENV] = str(os.getpid())
        env[REPORTS_ENV] = str(reports)
        # The workers share this machine's GPUs, and TensorFlow's default takes nearly all of a
        # GPU's memory in the first worker to make its devices (devices.share_gpus).
        env.setdefault(GPU_GROWTH_ENV, "true")
        return env

    def _announce(self, scale: int, ports: Sequence[int], started: Sequence[Any]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        addresses = ", ".join(f"{workers.LOOPBACK}:{port}" for port in ports)
        pids = ", ".join(str(worker.pid) for worker in started)
        reporter.ensure_newline()
        reporter.write_line(f"pytest-tpu: {scale} worker(s) on {addresses} (pids {pids})")
        reporter.flush()  # seen at once, even when the output is a pipe

    def _receive(self, batch: list[dict[str, Any]], replay: bool) -> None:
        for data in batch:
            report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
            if not isinstance(report, pytest.TestReport):
                continue
            if isinstance(report.longrepr, list):
                # A skip's (path, line, reason) came back from JSON as a list; pytest's skip
                # summary (-rs) asserts a tuple.
                report.longrepr = tuple(report.longrepr)
            result = getattr(report, REPORT_ATTR, None)
            if report.when == "call" and isinstance(result, dict):
                self.sweep.append(BenchResult.from_json(result))
            if replay:
                self._replay(report)

    def _replay(self, report: pytest.TestReport) -> None:
        """Hand a worker's report to this session's hooks, as pytest-xdist's controller does."""
        hook = self.config.hook
        if report.nodeid not in self.started:
            self.started.add(report.nodeid)
            hook.pytest_runtest_logstart(nodeid=report.nodeid, location=report.location)
        hook.pytest_runtest_logreport(report=report)
        if report.when == "teardown":
            self.finished.add(report.nodeid)
            hook.pytest_runtest_logfinish(nodeid=report.nodeid, location=report.location)

    def _fail_unfinished(self, message: str) -> None:
        """Every collected test the chief did not finish fails, with the workers' fate."""
        for item in self.session.items:
            if item.nodeid in self.finished:
                continue
            keywords: dict[str, Literal[1]] = dict.fromkeys(item.keywords, 1)
            report = pytest.TestReport(
                item.nodeid, item.location, keywords, "failed", message, "call"
            )
            self._replay(report)
            self.finished.add(item.nodeid)
            self.config.hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _read(
    started: Sequence[workers.Worker], tails: Sequence[workers.JsonLinesTail], merger: ReportMerger
) -> list[dict[str, Any]]:
    """New reports of every worker, merged; whose exit is seen before its stream is read to
    the end, so nothing it wrote before exiting is taken as missing."""
    codes = [worker.process.poll() for worker in started]
    for index, tail in enumerate(tails):
        for data in tail.read_new():
            merger.add(index, data)
    for index, code in enumerate(codes):
        if code is not None:
            merger.worker_gone(index, workers.describe_exit(code))
    return merger.release()


def _exit_message(scale: int, started: Sequence[workers.Worker], codes: list[int | None]) -> str:
    """Why a cluster run ended, with the output tail of the workers that failed."""
    fates = "; ".join(
        f"worker {w.index} (pid {w.pid}): {workers.describe_exit(code)}"
        for w, code in zip(started, codes, strict=True)
    )
    lines = [f"pytest-tpu: the {scale}-worker cluster ended before this test finished: {fates}"]
    for worker, code in zip(started, codes, strict=True):
        if code not in workers.NORMAL_EXITS:
            lines += [f"--- worker {worker.index} output (last lines) ---", worker.tail()]
    return "\n".join(lines)
