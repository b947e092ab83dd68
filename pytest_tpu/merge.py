"""One outcome per test from every worker of a cluster: the report streams, merged.

Each worker of a controller-started cluster streams its serialized test reports. The chief's
reports are the ones the controller replays (they carry the benchmark result), but a test passes
only if it passed on every worker: a failure, or a worker that ended before finishing the test,
replaces the chief's report of that phase. Reports are held until every worker has finished the
test (or is gone), so a late failure on a slow worker is never dropped. Works on plain dicts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pytest_tpu.results import REPORT_ATTR

CHIEF = 0
SECTION = "pytest-tpu cluster"


@dataclass
class _Test:
    """The reports of one test, per worker index, in arrival order."""

    reports: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)  # workers whose teardown report arrived


class ReportMerger:
    """Collects every worker's reports and releases the chief's, merged, in the chief's order."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.tests: dict[str, _Test] = {}
        self.order: list[str] = []  # node ids in the order the chief started them
        self.gone: dict[int, str] = {}  # worker index -> how it ended ("exit code 1")

    def add(self, index: int, report: dict[str, Any]) -> None:
        """One serialized report from worker ``index``."""
        nodeid = str(report.get("nodeid", ""))
        test = self.tests.setdefault(nodeid, _Test())
        if index == CHIEF and CHIEF not in test.reports:
            self.order.append(nodeid)
        test.reports.setdefault(index, []).append(report)
        if report.get("when") == "teardown":
            test.finished.add(index)

    def worker_gone(self, index: int, fate: str) -> None:
        """Worker ``index`` has exited and its stream has been read to the end."""
        self.gone.setdefault(index, fate)

    def release(self) -> list[dict[str, Any]]:
        """The chief's reports of the tests every worker is done with, merged, in order."""
        out: list[dict[str, Any]] = []
        while self.order and self._done(self.tests[self.order[0]]):
            test = self.tests.pop(self.order.pop(0))
            out += self._merge(test)
        return out

    def _done(self, test: _Test) -> bool:
        return all(i in test.finished or i in self.gone for i in range(self.count))

    def _merge(self, test: _Test) -> list[dict[str, Any]]:
        chief = test.reports.get(CHIEF, [])
        if CHIEF not in test.finished or any(r.get("outcome") == "failed" for r in chief):
            return chief  # the chief's own failure (or crash) already fails the test
        for index in range(1, self.count):
            merged = self._worker_failure(test, index, chief)
            if merged is not None:
                return merged
        return chief

    def _worker_failure(
        self, test: _Test, index: int, chief: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """The chief's reports with worker ``index``'s failure in place, or None if it passed."""
        mine = test.reports.get(index, [])
        failed = next((r for r in mine if r.get("outcome") == "failed"), None)
        if failed is not None:
            note = f"failed on worker {index} of {self.count}; the chief (worker 0) passed"
            return _replace(chief, _with_section(failed, note))
        if index in test.finished:
            return None
        fate = self.gone.get(index, "ended")
        message = (
            f"pytest-tpu: worker {index} of {self.count} ended ({fate}) before finishing "
            "this test; the chief (worker 0) passed it"
        )
        return _replace(chief, _failed_copy(_last_phase(chief), message))


def _last_phase(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The chief's call report, or its last one (a test skipped at setup has no call)."""
    return next((r for r in reports if r.get("when") == "call"), reports[-1])


def _replace(chief: list[dict[str, Any]], failed: dict[str, Any]) -> list[dict[str, Any]]:
    """The chief's reports with ``failed`` in place of the same phase.

    A failed setup means the test never ran there, so the chief's call report goes too: pytest
    would otherwise count the one test as both an error and a pass.
    """
    when = failed.get("when")
    out = [failed if r.get("when") == when else r for r in chief]
    if when == "setup":
        out = [r for r in out if r.get("when") != "call"]
    if not any(r is failed for r in out):
        out.append(failed)
    return out


def _with_section(report: dict[str, Any], note: str) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["sections"] = [*out.get("sections", []), [SECTION, note]]
    return out


def _failed_copy(report: dict[str, Any], message: str) -> dict[str, Any]:
    """The chief's report of a phase, failed with ``message``; its benchmark result too."""
    out = copy.deepcopy(report)
    out["outcome"] = "failed"
    out["longrepr"] = message
    result = out.get(REPORT_ATTR)
    if isinstance(result, dict):
        result["outcome"] = "failed"
        result["error"] = message[:300]
    return out
