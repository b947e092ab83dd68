"""Fixtures shared by the plugin's tests."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

# Modules whose tests judge real timings: a gate's verdict on a planted change or on unchanged
# code. ``make unit`` runs them after the rest has run on both cores (pytest-xdist), two at a time
# and beside nothing else. A test of theirs marked ``untimed`` judges no timing (a usage error, a
# row's status, memory, a saved field, a rule on given figures, a regression planted a million
# times over) and runs with the rest.
# Two at a time, because most of them wait: their sessions take turns round by round, and most
# of their time is processes starting, on one core at a time. (Session 81, 2 cores: 473 s one at
# a time; 234-315 s in ten runs two at a time.) The gate they test is built to stand a
# neighbour; where a test's path depends on a quiet machine, a rerun says so (below).
TIMED_MODULES = frozenset(
    {
        "test_bandwidth.py",
        "test_calibration.py",
        "test_compare_ref.py",
        "test_contention.py",
        "test_gate.py",
        "test_metric_gate.py",
        "test_pinning.py",
        "test_tail.py",
    }
)
# ... except those whose tests read the machine itself: the CPU time other processes took, the
# memory's speed, which threads churn in a round. Another test's processes beside them are what
# they measure, so they run alone, last (marker ``alone``; session 81: a pinning trial read no
# churn with a test beside it). Single tests elsewhere that do so carry the marker themselves,
# and so do the few whose path a test beside them changed (each says when).
ALONE_MODULES = frozenset(
    {"test_bandwidth.py", "test_calibration.py", "test_contention.py", "test_pinning.py"}
)


# matplotlib's own folder (``make install``): on .venv's path, Keras would import matplotlib.pyplot
# in each of the TensorFlow processes the tests start (0.8-1 s of ``import tensorflow``'s 4-5 s).
PLOT = Path(os.environ.get("PYTEST_TPU_PLOT", Path(__file__).parents[1] / ".venv" / "plot"))


@pytest.fixture
def matplotlib_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib importable in this process for one test, as ``pytest-tpu[plot]`` makes it.

    Its folder goes last on ``sys.path``: what .venv has (numpy) is what the plugin runs on."""
    if importlib.util.find_spec("matplotlib") is None and PLOT.is_dir():
        monkeypatch.setattr(sys, "path", [*sys.path, str(PLOT)])
        importlib.invalidate_caches()
    pytest.importorskip("matplotlib", reason=f"matplotlib is in neither .venv nor {PLOT}")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by it
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in TIMED_MODULES and not item.get_closest_marker("untimed"):
            item.add_marker("timed")
            if item.path.name in ALONE_MODULES:
                item.add_marker("alone")


# Why each timed test that ``make unit`` ran once more failed the first time: pytest-rerunfailures
# reports that attempt as "rerun" and shows nothing of it, and it is the path under load a test
# does not yet foresee (node id, the assertion's lines).
_RERUNS: list[tuple[str, list[str]]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # the plugin's own outcome
        # The assertion, not the dozens of output lines a failed fnmatch_lines lists after it.
        lines = report.longreprtext.splitlines()
        why = [line for line in lines if line.startswith("E ") and "    and: " not in line]
        _RERUNS.append((report.nodeid, why[:12]))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RERUNS:
        return
    terminalreporter.section("why tests were run again")
    for nodeid, why in _RERUNS:
        terminalreporter.line(nodeid)
        for line in why:
            terminalreporter.line(f"  {line}")


@pytest.fixture(autouse=True)
def _sessions_are_not_xdist_workers(monkeypatch):
    """The sessions a test starts are its own, not workers of the xdist run that may be running
    this suite (``make unit``): pytest-benchmark reads ``PYTEST_XDIST_WORKER`` from the
    environment, and would switch itself off in them."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def private_device_lock(tmp_path, monkeypatch):
    """Other sessions on this machine hold the shared device lock (in the temporary folder); a
    test's own sessions use their own."""
    lockdir = tmp_path / "locks"
    lockdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(lockdir))
    monkeypatch.setattr(tempfile, "tempdir", str(lockdir))


@pytest.fixture(scope="session")
def tensorflow_in_process():
    """TensorFlow, imported into this process once and before any test's pytester snapshot.

    A test that runs device sessions in process (``pytester.runpytest``) saves a TensorFlow
    import (about 5 s) per session, but pytester removes at teardown what a test imported, and
    TensorFlow cannot be imported twice into one process: a session fixture is set up before
    the function-scoped ``pytester`` takes its snapshot.
    """
    import tensorflow as tf

    return tf
