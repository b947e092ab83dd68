"""Shared fixtures of the benchmark suite: sizes, data, progress lines and result fields.

The plugin provides ``accelerator``, ``tpu_strategy``, ``workload_size`` and ``workload_data``;
pytest-benchmark provides ``benchmark``. What is here turns them into the suite's conventions:
every result carries the same public fields in ``extra_info`` (see ``record``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_tpu.timing import thread_settings
from pytest_tpu.workloads import data as workload_data_module
from pytest_tpu.workloads.sizes import WorkloadSizes, sizes_for

Progress = Callable[[str], None]


@pytest.fixture(scope="session")
def sizes(workload_size: str) -> WorkloadSizes:
    """How much work ``--tpu-workload-size`` asks of each workload."""
    return sizes_for(workload_size)


def _load(loader: Callable[[], workload_data_module.Arrays]) -> workload_data_module.Arrays:
    try:
        return loader()
    except workload_data_module.DataNotFound as exc:
        # One clear line per benchmark instead of a traceback into numpy.
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def mnist_data(sizes: WorkloadSizes, workload_data: str) -> workload_data_module.Arrays:
    """MNIST-shaped training images for the CNN (synthetic unless ``--tpu-workload-data=real``)."""
    return _load(lambda: workload_data_module.mnist(sizes.cnn.samples, workload_data))


@pytest.fixture(scope="session")
def imdb_data(sizes: WorkloadSizes, workload_data: str) -> workload_data_module.Arrays:
    """IMDB-shaped reviews for the LSTM (synthetic unless ``--tpu-workload-data=real``)."""
    return _load(lambda: workload_data_module.imdb(sizes.lstm.samples, workload_data))


@pytest.fixture(scope="session")
def cifar10_data(sizes: WorkloadSizes, workload_data: str) -> workload_data_module.Arrays:
    """CIFAR-10-shaped images for the ResNet (synthetic unless ``--tpu-workload-data=real``)."""
    return _load(lambda: workload_data_module.cifar10(sizes.resnet.samples, workload_data))


@pytest.fixture(scope="session")
def weather_data(sizes: WorkloadSizes, workload_data: str) -> workload_data_module.Arrays:
    """Weather windows of 1344 hours for the GRU (synthetic unless ``--tpu-workload-data=real``)."""
    spec = sizes.timeseries
    return _load(lambda: workload_data_module.weather(spec.sequences, workload_data))


@pytest.fixture(scope="session")
def requests_data(sizes: WorkloadSizes, workload_data: str) -> workload_data_module.Arrays:
    """IMDB-shaped reviews that the inference requests are cut from."""
    return _load(lambda: workload_data_module.imdb(sizes.inference.samples, workload_data))


@pytest.fixture
def progress(pytestconfig: pytest.Config) -> Progress:
    """Write a line to the terminal while a test runs, under ``-v``; a no-op otherwise.

    Lines go through the terminal reporter with capture suspended (as pytest's live logging
    does), so they show as the work happens, whatever ``--capture`` says. Under pytest-xdist
    workers have no terminal and the lines are dropped.
    """
    manager = pytestconfig.pluginmanager
    reporter = manager.get_plugin("terminalreporter")
    capture = manager.get_plugin("capturemanager")
    if reporter is None or capture is None or pytestconfig.get_verbosity() < 1:
        return lambda line: None

    def write(line: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(f"    {line}")

    return write


@pytest.fixture
def record(
    benchmark: Any, accelerator: Any, tpu_strategy: Any, workload_size: str, workload_data: str
) -> Callable[..., None]:
    """Fill ``benchmark.extra_info`` with the headline and the fields every result carries.

    Written here, not left to the plugin, so that ``--benchmark-json`` carries them too.
    """

    def fill(*, metric: str, unit: str, higher_is_better: bool, **fields: Any) -> None:
        info = benchmark.extra_info
        info.update(accelerator=accelerator.kind, device=accelerator.name)
        info["replicas"] = int(tpu_strategy.num_replicas_in_sync)
        info.update(metric=metric, unit=unit, higher_is_better=higher_is_better)
        info.update(workload_size=workload_size, workload_data=workload_data)
        info.update(thread_settings())
        info.update(fields)

    return fill
