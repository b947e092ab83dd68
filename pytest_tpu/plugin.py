"""pytest-tpu's hooks and fixtures. Imports only the standard library and pytest at load time:
TensorFlow is imported the first time a test needs a device."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tpu.devicelock import device_lock
from pytest_tpu.options import KINDS, add_options, resolve_settings
from pytest_tpu.results import (
    REPORT_ATTR,
    BenchResult,
    ResultStore,
    result_from_item,
    results_key,
)
from pytest_tpu.session import DeviceSession, header_shown_key, session_key

MARKER = (
    "accelerators(*kinds): run this test once per named device kind "
    f"({', '.join(KINDS)}) among those selected with --accelerator"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    config.stash[session_key] = DeviceSession(resolve_settings(config))
    store = config.stash[results_key] = ResultStore()
    config.pluginmanager.register(ResultCollector(store), "pytest-tpu-results")
    _register_features(config)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _enable_benchmarks_on_xdist_worker(session.config)


def _enable_benchmarks_on_xdist_worker(config: pytest.Config) -> None:
    """pytest-benchmark turns itself off under pytest-xdist because parallel timings are
    unreliable; here every benchmark holds its device's lock (``devicelock``), so timings stay
    serial per device and the workers' results can be measured and gathered."""
    bench_session = getattr(config, "_benchmarksession", None)
    if hasattr(config, "workerinput") and getattr(bench_session, "xdist_warning", False):
        bench_session.disabled = False  # type: ignore[union-attr]
        bench_session.xdist_warning = False  # type: ignore[union-attr]


def _register_features(config: pytest.Config) -> None:
    """Register each optional feature's plugin object only when its options ask for it."""
    from pytest_tpu.measure import MeasurePlugin
    from pytest_tpu.summary import SummaryPlugin

    settings = config.stash[session_key].settings
    config.pluginmanager.register(SummaryPlugin(config), "pytest-tpu-summary")
    config.pluginmanager.register(MeasurePlugin(config), "pytest-tpu-measure")
    gate_wanted = (
        settings.save_baseline,
        settings.compare,
        settings.fail_on_regression,
        settings.measure_noise,
    )
    if any(value not in (None, False) for value in gate_wanted):
        from pytest_tpu.gate.plugin import GatePlugin

        config.pluginmanager.register(GatePlugin(config), "pytest-tpu-gate")
    from pytest_tpu import cluster

    if cluster.wanted(settings):  # --workers, --virtual-cpus, or TF_CONFIG set
        cluster.register(config)


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
    """Parametrize every test that uses a device over the selected, wanted kinds."""
    marked = metafunc.definition.get_closest_marker("accelerators") is not None
    if "accelerator" not in metafunc.fixturenames:
        if not marked:
            return
        # The marker alone asks for devices: give the test the fixture it implies.
        metafunc.fixturenames.append("accelerator")
    wanted = _marker_kinds(metafunc)
    state = metafunc.config.stash[session_key]
    params = [
        pytest.param(kind, id=kind, marks=[pytest.mark.skip(reason=reason)] if reason else [])
        for kind, reason in state.kinds_for(wanted)
    ]
    metafunc.parametrize("accelerator", params, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config) -> None:
    """A kind named explicitly in --accelerator but missing is a usage error (exit 4)."""
    missing = config.stash[session_key].missing_explicit()
    if missing:
        raise pytest.UsageError(
            "--accelerator asked for devices that are not present: " + "; ".join(missing)
        )


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """The devices line, once discovery has happened (never forces it)."""
    state = config.stash[session_key]
    if not state.discovered:
        return None
    config.stash[header_shown_key] = True
    return state.inventory().header_line()


@pytest.fixture
def accelerator(request: pytest.FixtureRequest) -> Any:
    """The device under test (see ``pytest_tpu.Accelerator``), one per selected kind."""
    state = request.config.stash[session_key]
    kind = getattr(request, "param", None)
    if kind is None:  # requested dynamically, outside parametrization: first selected device
        kinds = [k for k, reason in state.kinds_for(KINDS) if reason is None]
        kind = kinds[0] if kinds else "cpu"
    return state.accelerator(kind)


@pytest.fixture(scope="session")
def workload_size(pytestconfig: pytest.Config) -> str:
    """``--workload-size``: smoke, default or full."""
    return pytestconfig.stash[session_key].settings.workload_size


@pytest.fixture(scope="session")
def workload_data(pytestconfig: pytest.Config) -> str:
    """``--workload-data``: synthetic or real."""
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
    """Under pytest-xdist, run device work under its device's lock (see ``devicelock``)."""
    workerinput = getattr(item.config, "workerinput", None)
    uses = set(getattr(item, "fixturenames", ()))
    if workerinput is None or not {"benchmark", "accelerator"} & uses:
        return (yield)
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("accelerator", "cpu") if callspec else "cpu"
    with device_lock(str(workerinput.get("testrunuid", "run")), str(kind)):
        return (yield)


class ResultCollector:
    """Gathers results from reports, wherever they ran (this process or an xdist worker)."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.store.add(BenchResult.from_json(data))
