"""Measuring a benchmark again in the same session: --measure-noise runs and confirmations.

pytest has no public way to run a test without logging it; pytest-rerunfailures uses the same
function (``_pytest.runner.runtestprotocol``) for the same reason. Each extra run sets the test's
own fixtures up afresh; wider fixtures survive when the next test shares them.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tpu.results import REPORT_ATTR

CALIBRATION_ATTR = "pytest_tpu_calibration"  # on the call report: kernel timings per round
NOISE_ATTR = "pytest_tpu_noise"  # on the call report: --measure-noise repetitions
CONFIRM_ATTR = "pytest_tpu_confirm"  # on the call report: the confirming re-measurement
THRESHOLDS_ATTR = "pytest_tpu_thresholds"  # on the call report: its marker's thresholds


def run_unlogged(item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.TestReport]:
    """Run ``item`` once more, setup to teardown, without reporting it."""
    from _pytest.runner import runtestprotocol

    return runtestprotocol(item, nextitem=nextitem, log=False)


def measurement(reports: list[pytest.TestReport]) -> dict[str, Any] | None:
    """The result and kernel timings of a run's passed call report, as plain JSON data."""
    for report in reports:
        if report.when == "call" and report.passed:
            result = getattr(report, REPORT_ATTR, None)
            if result is not None:
                return {"result": result, "calibration": getattr(report, CALIBRATION_ATTR, None)}
    return None


def log_reports(item: pytest.Item, reports: list[pytest.TestReport]) -> None:
    """Report a run the way pytest's own protocol does."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def call_report(reports: list[pytest.TestReport]) -> pytest.TestReport | None:
    return next((report for report in reports if report.when == "call"), None)
