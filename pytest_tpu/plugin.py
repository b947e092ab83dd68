"""pytest-tpu's hooks and fixtures. Imports only the standard library, pytest and the plugin's
small option/result modules at load time: TensorFlow is imported the first time a test needs a
device, and each feature's module only when its options ask for it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_tpu.options import (
    REF_HOME_ENV,
    Settings,
    add_options,
    resolve_settings,
    under_xdist,
)
from pytest_tpu.parsers import KINDS
from pytest_tpu.results import REPORT_ATTR, BenchResult, ResultStore, result_from_item, results_key
from pytest_tpu.session import DeviceSession, header_shown_key, session_key

if TYPE_CHECKING:
    from pytest_tpu.devices import Inventory

MARKER = (
    "accelerators(*kinds): run this test once per named device kind "
    f"({', '.join(KINDS)}) among those selected with --accelerator"
)
# The plugin's ``accelerator`` fixture requests this one, so a test whose fixture closure holds
# it is resolved by the plugin's fixture, not by a project's own ``accelerator``.
THRESHOLD_MARKER = (
    "regression_threshold(time=..., memory=..., compile=...): this benchmark's (or, on a class "
    "or module, this group's) --fail-on-regression thresholds, such as time='10%'"
)
OWNER_FIXTURE = "_pytest_tpu_device"
SUMMARY_PLUGIN_NAME = "pytest-tpu-summary"
MEASURE_PLUGIN_NAME = "pytest-tpu-measure"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """A ``--compare-ref`` session turns GPU memory growth on (``sameref.gpu``) and starts again
    on a fixed hash seed and a BLAS spin limit (``sameref.seed``) before any conftest is
    imported; other sessions, ``--help`` and collection only go on as they are. A process such a
    session started in another tree imports the project's code from that tree
    (``sameref.imports``)."""
    if os.environ.get(REF_HOME_ENV):
        from pytest_tpu.sameref.imports import follow_own_tree

        follow_own_tree()
    known = early_config.known_args_namespace
    if not (getattr(known, "compare_ref", None) or early_config.getini("compare_ref")):
        return
    from pytest_tpu.sameref import gpu

    gpu.share()  # before a conftest can make TensorFlow's devices; the base inherits it
    if known.help or known.version or known.collectonly:
        return
    from pytest_tpu.sameref.seed import start_again_aligned

    start_again_aligned(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    config.addinivalue_line("markers", THRESHOLD_MARKER)
    worker = hasattr(config, "workerinput")
    config.stash[session_key] = DeviceSession(resolve_settings(config), worker)
    threads = config.stash[session_key].settings.tpu_threads
    if threads:  # before collection imports test modules, which may start TensorFlow
        from pytest_tpu.devices import size_threads_by_environment

        size_threads_by_environment(threads)
    store = config.stash[results_key] = ResultStore()
    config.pluginmanager.register(ResultCollector(config, store), "pytest-tpu-results")
    _register_features(config)


def _register_features(config: pytest.Config) -> None:
    """Register each optional feature's plugin object only when its options ask for it."""
    settings = config.stash[session_key].settings
    if config.option.collectonly:
        # Nothing runs, so nothing is measured, compared, saved or gated: no base session, no
        # tables, no baseline written (an IDE's or a CI dry run's collection stays collection).
        return
    compared = settings.compare or settings.compare_ref
    if settings.reports or settings.report_plots or compared:
        register_summary(config)  # now: report paths are checked, comparisons are drawn
    if _gate_wanted(settings):
        from pytest_tpu.gate.plugin import GatePlugin

        config.pluginmanager.register(GatePlugin(config), "pytest-tpu-gate")
    if settings.compare_ref or os.environ.get("PYTEST_TPU_REF_ADDRESS"):
        from pytest_tpu.sameref.plugin import register

        register(config, settings)
    if settings.workers or settings.virtual_cpus or os.environ.get("TF_CONFIG"):
        from pytest_tpu import cluster, keras_rules

        cluster.register(config)
        keras_rules.register(config)


def register_measure(config: pytest.Config) -> None:
    """Memory, first call and progress for device benchmarks, registered at the first device
    setup (its hooks act in the call phase that follows), so plain sessions never import it."""
    if config.pluginmanager.has_plugin(MEASURE_PLUGIN_NAME):
        return
    from pytest_tpu.measure import MeasurePlugin

    config.pluginmanager.register(MeasurePlugin(config), MEASURE_PLUGIN_NAME)


def _gate_wanted(settings: Settings) -> bool:
    wanted = (
        settings.save_baseline,
        settings.compare,
        settings.thresholds,
        settings.measure_noise,
    )
    return any(bool(value) for value in wanted)  # a name, a flag or some thresholds


def register_summary(config: pytest.Config) -> None:
    """The tables and report files, registered once: at configure for ``--tpu-report*``, else
    when the first device benchmark's result arrives (plain sessions never import it)."""
    if config.pluginmanager.has_plugin(SUMMARY_PLUGIN_NAME):
        return
    from pytest_tpu.summary import GateLineLast, SummaryPlugin

    config.pluginmanager.register(SummaryPlugin(config), SUMMARY_PLUGIN_NAME)
    config.pluginmanager.register(GateLineLast(config), f"{SUMMARY_PLUGIN_NAME}-gate-line")


def _marker_kinds(metafunc: pytest.Metafunc) -> tuple[str, ...]:
    """The kinds the ``accelerators`` marker names (all kinds without a marker)."""
    marker = metafunc.definition.get_closest_marker("accelerators")
    if marker is None:
        return KINDS
    if marker.kwargs or not marker.args:
        pytest.fail(
            f"{metafunc.definition.nodeid}: @pytest.mark.accelerators takes one or more kinds "
            f"as positional arguments, from: {', '.join(KINDS)}",
            pytrace=False,
        )
    bad = [arg for arg in marker.args if not isinstance(arg, str) or arg.lower() not in KINDS]
    if bad:
        pytest.fail(
            f"{metafunc.definition.nodeid}: @pytest.mark.accelerators got {bad!r}; "
            f"valid kinds: {', '.join(KINDS)}",
            pytrace=False,
        )
    return tuple(arg.lower() for arg in marker.args)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test whose ``accelerator`` is the plugin's over the selected kinds.

    Decided from the options alone: no device is probed and TensorFlow is not imported here,
    so ``-k``, ``--collect-only`` and xdist workers' collection stay cheap.
    """
    marked = metafunc.definition.get_closest_marker("accelerators") is not None
    if "accelerator" not in metafunc.fixturenames:
        if not marked:
            return
        # The marker alone asks for devices: give the test the fixture it implies.
        metafunc.fixturenames.append("accelerator")
    elif OWNER_FIXTURE not in metafunc.fixturenames:
        return  # a project's own ``accelerator`` fixture: not ours to parametrize
    wanted = _marker_kinds(metafunc)
    kinds = metafunc.config.stash[session_key].kinds_for(wanted)
    metafunc.parametrize("accelerator", kinds, ids=kinds, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test the marker alone parametrized sets the device up too (so a missing one skips).

    pytest prunes a fixture the test does not name from its closure after parametrization;
    the device fixture goes back in, before any setup.
    """
    for item in items:
        if item.get_closest_marker("regression_threshold") is not None:
            from pytest_tpu.gate.markers import marker_thresholds

            marker_thresholds(item)  # a bad marker is a usage error naming the test, now
        callspec = getattr(item, "callspec", None)
        fixturenames = getattr(item, "fixturenames", None)
        if callspec is None or fixturenames is None or "accelerator" in fixturenames:
            continue
        if "accelerator" in callspec.params and item.get_closest_marker("accelerators"):
            fixturenames.append("accelerator")


def pytest_report_collectionfinish(
    config: pytest.Config, items: Sequence[pytest.Item]
) -> str | None:
    """The devices line in the header, when selected tests are about to use a device.

    Runs after -k/-m deselection: a session that runs no device test (``-k plain_test``) and
    ``--collect-only`` never discover devices, so they never import TensorFlow.
    """
    state = config.stash[session_key]
    wanted = not config.option.collectonly and any(
        OWNER_FIXTURE in getattr(item, "fixturenames", ()) for item in items
    )
    if not (wanted or state.discovered):
        return None
    config.stash[header_shown_key] = True
    line = _discovered(state).header_line()
    problem = state.usage_problem()
    if problem:  # before any test runs: pytest prints it last, as "ERROR: ...", and exits 4
        # The devices line still goes in the header, so the error's reasons sit beside what
        # was found (a returned line is lost once this hook raises).
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)
        raise pytest.UsageError(problem)
    return line


@pytest.fixture
def _pytest_tpu_device() -> None:
    """Marks the plugin's ``accelerator`` in a test's fixture closure (see ``OWNER_FIXTURE``)."""


@pytest.fixture
def accelerator(request: pytest.FixtureRequest, _pytest_tpu_device: None) -> Any:
    """The device under test (see ``pytest_tpu.Accelerator``), one per selected kind.

    Devices are discovered here, at the first setup that needs one; a missing kind skips the
    test with the reason.
    """
    state = request.config.stash[session_key]
    kind = getattr(request, "param", None)
    if kind is None:  # requested dynamically, outside parametrization: first selected device
        kind = state.first_present()
    register_measure(request.config)
    return state.accelerator(kind)


@pytest.fixture(scope="session")
def workload_size(pytestconfig: pytest.Config) -> str:
    """``--tpu-workload-size``: smoke, default or full."""
    return pytestconfig.stash[session_key].settings.workload_size


@pytest.fixture(scope="session")
def workload_data(pytestconfig: pytest.Config) -> str:
    """``--tpu-workload-data``: synthetic or real."""
    return pytestconfig.stash[session_key].settings.workload_data


@pytest.fixture
def tpu_strategy(request: pytest.FixtureRequest, accelerator: Any) -> Any:
    """The tf.distribute strategy for the device under test (one per device per session)."""
    return request.config.stash[session_key].strategy(accelerator)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the benchmark's result to the call report, so it survives pytest-xdist."""
    report: pytest.TestReport = yield
    if call.when == "call":
        result = result_from_item(item, report)
        if result is not None:
            setattr(report, REPORT_ATTR, result.to_json())
            # Headline figures as JUnit properties: junitxml reads them from the teardown report,
            # which copies the item's list.
            item.user_properties.extend(result.properties())
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Under pytest-xdist, measure the plugin's own device benchmarks, one at a time per device.

    Plain pytest-benchmark tests keep pytest-benchmark's behaviour (off under xdist).
    """
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None or OWNER_FIXTURE not in getattr(item, "fixturenames", ()):
        return (yield)
    from pytest_tpu.devicelock import device_lock, measure_on_worker

    measure_on_worker(item)
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("accelerator", "cpu") if callspec else "cpu"
    with device_lock(str(workerinput.get("testrunuid", "run")), str(kind)):
        return (yield)


class ResultCollector:
    """Gathers results from reports, wherever they ran (this process or an xdist worker)."""

    def __init__(self, config: pytest.Config, store: ResultStore) -> None:
        self.config = config
        self.store = store
        # xdist's run ids (its workers may have taken device locks); None outside xdist.
        self.runs: set[str] | None = set() if under_xdist(config) else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        run_id = getattr(report, "testrun_uid", None)  # set by xdist on its workers' reports
        if run_id and self.runs is not None:
            self.runs.add(str(run_id))
        data = getattr(report, REPORT_ATTR, None)
        # A "rerun" report (pytest-rerunfailures) is an attempt, not the test's outcome: only
        # the final attempt counts.
        if data is None or report.when != "call" or str(report.outcome) == "rerun":
            return
        result = BenchResult.from_json(data)
        self.store.add(result)
        if result.kind:
            register_summary(self.config)

    def pytest_sessionfinish(self) -> None:
        if self.runs:  # the controller, after its workers: their locks are free
            from pytest_tpu.devicelock import remove_locks

            remove_locks(self.runs)


def _discovered(state: DeviceSession) -> Inventory:
    """The devices found, or a usage error where TensorFlow could not be set up as asked."""
    from pytest_tpu.devices import ThreadsError

    try:
        return state.discover()
    except ThreadsError as exc:
        raise pytest.UsageError(str(exc)) from None
