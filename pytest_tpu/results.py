"""One benchmark's result as plain data, and the session's collection of them.

Results travel from the test to the session as a JSON-able dict on the test report
(``report.pytest_tpu_result``), so they cross pytest-xdist's worker boundary unchanged and the
controller sees every worker's results. Nothing here imports TensorFlow or numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

REPORT_ATTR = "pytest_tpu_result"


@dataclass(frozen=True)
class BenchResult:
    """What one benchmark test measured: raw per-round seconds plus its descriptive fields."""

    nodeid: str  # identity across runs: the test's node id, parameters included
    name: str
    group: str | None
    params: dict[str, Any]
    extra_info: dict[str, Any]
    samples: tuple[float, ...]  # seconds per round, every round, warm-up excluded
    outcome: str = "passed"  # "passed" | "failed"
    error: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    iterations: int = 1  # calls per round (pedantic's iterations, benchmark(fn)'s calibration)

    @property
    def kind(self) -> str:
        return str(self.extra_info.get("accelerator") or self.params.get("accelerator") or "")

    @property
    def metric(self) -> str:
        """Name of the headline metric; plain round time when the benchmark names none."""
        return str(self.extra_info.get("metric", "time"))

    @property
    def unit(self) -> str:
        return str(self.extra_info.get("unit", "s"))

    @property
    def higher_is_better(self) -> bool:
        return bool(self.extra_info.get("higher_is_better", False))

    @property
    def headline(self) -> float | None:
        """The headline metric's value (median round time when no metric is recorded)."""
        value = self.extra_info.get(self.metric)
        if isinstance(value, int | float):
            return float(value)
        if self.samples:
            ordered = sorted(self.samples)
            return ordered[len(ordered) // 2]
        return None

    @property
    def base_id(self) -> str:
        """The node id without the device part of its parameters: rows of a speedup table."""
        kind = self.kind
        if not kind or "[" not in self.nodeid:
            return self.nodeid
        head, _, ids = self.nodeid.partition("[")
        parts = [part for part in ids.rstrip("]").split("-") if part != kind]
        return f"{head}[{'-'.join(parts)}]" if parts else head

    def properties(self) -> list[tuple[str, object]]:
        """The headline and the device fields, as (name, value) pairs for JUnit XML."""
        pairs: list[tuple[str, object]] = [(f"pytest_tpu.{self.metric}", self.headline)]
        for key in ("accelerator", "device", "replicas", "unit"):
            if key in self.extra_info:
                pairs.append((f"pytest_tpu.{key}", self.extra_info[key]))
        return pairs

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["samples"] = list(self.samples)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchResult:
        fields = dict(data)
        fields["samples"] = tuple(float(x) for x in fields.get("samples", ()))
        return cls(**fields)


@dataclass
class ResultStore:
    """Every benchmark result of this session, in the order the reports arrived."""

    results: list[BenchResult] = field(default_factory=list)

    def add(self, result: BenchResult) -> None:
        self.results.append(result)

    @property
    def passed(self) -> list[BenchResult]:
        return [result for result in self.results if result.outcome == "passed"]

    @property
    def failed(self) -> list[BenchResult]:
        return [result for result in self.results if result.outcome == "failed"]


results_key = pytest.StashKey[ResultStore]()


def result_from_item(item: pytest.Item, report: pytest.TestReport) -> BenchResult | None:
    """The result of a test that used pytest-benchmark's fixture, or None."""
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if fixture is None or getattr(fixture, "disabled", False):
        return None  # --benchmark-disable: the function ran once, nothing was measured
    stats = getattr(fixture, "stats", None)
    # Into the fixture's own dict, so pytest-benchmark's --benchmark-json carries them too.
    _fill_device_fields(item, fixture.extra_info)
    extra, refused = plain_extra_info(fixture.extra_info)
    for line in refused:
        # A warning, not a failure: the measurement stands, only this value is not kept.
        item.warn(pytest.PytestWarning(f"pytest-tpu: {item.nodeid}: {line}"))
    samples: tuple[float, ...] = ()
    if stats is not None:
        # Per-round durations, already divided by the iterations of each round.
        samples = tuple(float(x) for x in stats.stats.data)
    options = _options(stats)
    outcome = "failed" if report.failed or not samples else "passed"
    error = _short_error(report) if report.failed else None
    if outcome == "failed" and error is None:
        error = "the benchmark fixture was not run"
    return BenchResult(
        nodeid=item.nodeid,
        name=item.name,
        group=getattr(fixture, "group", None),
        params=_plain_params(item),
        extra_info=extra,
        samples=samples,
        outcome=outcome,
        error=error,
        options=options,
        iterations=_iterations(stats),
    )


def _iterations(stats: Any) -> int:
    value = getattr(stats, "iterations", 1)
    return value if isinstance(value, int) and value >= 1 else 1


def _options(stats: Any) -> dict[str, Any]:
    """pytest-benchmark's options of the run (timer, rounds, ...) as it writes them to JSON."""
    options = getattr(stats, "options", None)
    if not isinstance(options, dict):
        return {}
    plain = (str, int, float, bool, type(None))
    return {
        key: getattr(value, "__name__", repr(value)) if not isinstance(value, plain) else value
        for key, value in options.items()
    }


class NotPlainData(ValueError):
    """A value JSON (and so a baseline, a report, or pytest-xdist's channel) cannot carry."""


def plain_extra_info(extra: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``extra`` as plain JSON data, and one line per value left out and why.

    Numpy scalars (what ``tensor.numpy()`` returns) become Python numbers. NaN, infinities and
    arbitrary objects are left out: JSON has no NaN, and execnet (pytest-xdist) cannot send
    numpy or user objects at all, which would end the session with an INTERNALERROR.
    """
    clean: dict[str, Any] = {}
    refused: list[str] = []
    for key, value in extra.items():
        try:
            clean[str(key)] = plain(value)
        except NotPlainData as exc:
            refused.append(f"extra_info[{key!r}] is left out of the results: {exc}")
        except RecursionError:  # a list that contains itself
            refused.append(f"extra_info[{key!r}] is left out of the results: nested too deeply")
    return clean, refused


def plain(value: Any) -> Any:
    """``value`` as JSON data (numpy scalars converted); ``NotPlainData`` says what is not."""
    if value is None:
        return None
    for kind in (str, bool, int):  # subclasses (an IntEnum) as their plain base type
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotPlainData(f"{value!r} is not a JSON number")
        return float(value)  # np.float64 is a float subclass: make it a plain one
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return plain(value.item())  # numpy scalar or 0-d array
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: plain(item) for key, item in value.items()}
    hint = " (use .tolist())" if type(value).__module__ == "numpy" else ""
    raise NotPlainData(f"a {type(value).__name__} is not JSON data{hint}")


def _fill_device_fields(item: pytest.Item, extra: dict[str, Any]) -> None:
    """Record the device a test ran on, when it used the plugin's ``accelerator`` fixture
    (a project may define its own fixture of that name, holding anything)."""
    accelerator = getattr(item, "funcargs", {}).get("accelerator")
    if accelerator is None:
        return
    from pytest_tpu.accelerator import Accelerator

    if not isinstance(accelerator, Accelerator):
        return
    extra.setdefault("accelerator", accelerator.kind)
    extra.setdefault("device", accelerator.name)
    extra.setdefault("replicas", accelerator.replicas)


def _plain_params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    plain = (str, int, float, bool, type(None))
    return {k: v if isinstance(v, plain) else repr(v) for k, v in callspec.params.items()}


def _short_error(report: pytest.TestReport) -> str:
    """The exception line of a failure ("ResourceExhaustedError: OOM when ...")."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0][:300]
    text = str(report.longrepr).strip().splitlines()
    return text[-1][:300] if text else "failed"
