"""What the gate compares and decides with: a benchmark's side, a row of the table, a measured
change, a decision; the thresholds, and the fields that make two environments comparable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_tpu.gate.history import RunSummary, sessions
from pytest_tpu.gate.stats import Change, Estimate

DEFAULT_THRESHOLD = 0.05  # the verdicts' threshold when no --fail-on-regression is given
# Verdict thresholds of the other metrics when none is given: a first call (trace, compile)
# varies far more between sessions than steady rounds do.
DEFAULT_THRESHOLDS = {"time": DEFAULT_THRESHOLD, "memory": 0.05, "compile": 0.25}
METRIC_UNITS = {"memory": "B", "compile": "s"}
# Memory added by a benchmark's calls is compared from this size up: below it, the process's
# allocator decides what its peak resident set shows (see ``compare_memory``).
MEMORY_FLOOR_BYTES = 2**20
MACHINE_CONFIDENCE = 0.95  # how sure the kernel's slowdown must be to be called drift
# How much of the machine's drift since the baseline the ratios to the kernel may have failed to
# divide out. The kernel is a different program: a drift it sees may hit this benchmark more or
# less (seen here: a kernel 50 % slower beside a benchmark 60 % slower). Half is assumed for the
# ratios, all of it for raw rounds, and added to the uncertainty -- but only the drift variance
# beyond the kernel's across the saved runs: drift of that spread was there when the history's
# between-session noise was measured, so it is already in the interval.
# Raw rounds whose saved runs show they follow the kernel less are charged less (``carried``).
UNTRACKED_DRIFT = {"raw": 1.0, "calibrated": 0.5}
KEY_FIELDS = (
    "accelerator",
    "device",
    "replicas",
    "tf_minor",
    "jit_compile",
    "dtype",
    "batch_size",
    "workload_size",
    "threads",
    "timer",
    "rounds",
)
VERDICTS = ("slower", "faster", "unchanged", "inconclusive")
MODES = ("raw", "calibrated")


@dataclass(frozen=True)
class Side:
    """One benchmark's measurements on one side: its runs, oldest first, and its fields.

    For the current session ``runs`` holds this run (and --measure-noise repetitions);
    ``confirm`` holds the re-measurement of a benchmark the gate was about to fail, ``fresh``
    its measurement in a fresh process where that confirmed it (``gate.fresh``), and
    ``fresh_problem`` why a fresh process was asked and measured nothing.
    """

    nodeid: str
    runs: tuple[RunSummary, ...]
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    value: float | None = None
    environment: Mapping[str, Any] = field(default_factory=dict)
    confirm: RunSummary | None = None
    fresh: RunSummary | None = None
    fresh_problem: str = ""

    @property
    def latest(self) -> RunSummary:
        return sessions(self.runs)[-1] if sessions(self.runs) else self.runs[-1]


@dataclass(frozen=True)
class Row:
    """One line of the comparison table.

    ``status`` is ``compared``, ``new`` (current run only), ``missing`` (baseline only),
    ``unmeasured`` (ran without a measurement), ``failed`` (failed in this run) or
    ``incompatible`` (``reason`` says why). ``base_value`` and
    ``current_value`` are round-time locations in seconds; ``change``/``low``/``high`` the round
    time's relative change and interval, calibrated when ``calibrated``.
    """

    nodeid: str
    status: str
    metric: str = "time"
    unit: str = "s"
    higher_is_better: bool = False
    base_value: float | None = None
    current_value: float | None = None
    verdict: str | None = None
    change: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    detectable: float | None = None
    regression: bool = False
    forced: bool = False
    calibrated: bool = False
    machine: float | None = None
    noise_source: str = ""
    confirmed: bool | None = None  # None: no re-measurement was needed
    reason: str = ""
    threshold: float | None = None  # the time threshold its verdict was judged against
    statistic: str = ""  # "": the gate's location (module docstring); TAIL: the mean of all rounds
    memory_copy: float | None = None  # how much slower the host copied memory (``bandwidth``)
    allowance: float | None = None  # a memory row: the change in bytes that counts as none


comparison_key = pytest.StashKey[list[Row]]()
verdict_key = pytest.StashKey[str]()  # the gate's verdict: passed, failed, nothing checked
# What the gate said in the terminal (each regression, each row it could not resolve, the verdict,
# the hint), for the reports: a pull request's summary must not say only "passed".
gate_lines_key = pytest.StashKey[list[str]]()
# What a comparison is against, where a name alone does not say it ("HEAD~1 (<sha>, same job)"),
# and what it said beyond its rows and the gate's lines (re-measurements, interrupts): a report
# read a week later must say which commit the base was, and what it took (trial 33).
against_key = pytest.StashKey[str]()
against_notes_key = pytest.StashKey[list[str]]()
# What was measured as the head, where a git checkout says it ("1a2b3c4d5e6f with uncommitted
# changes"): a report beside its base's commit must name the other side too (trial 35).
head_key = pytest.StashKey[str]()


@dataclass(frozen=True)
class Measured:
    """The change of one comparison in the mode chosen, with the machine's own drift."""

    change: Change
    mode: str
    machine: Change | None
    saved_runs: int = 0  # sessions in the baseline's history (0: not a stored baseline)
    # CPU cores other processes took in each saved run and in this one (``contention``).
    others_saved: tuple[float | None, ...] = ()
    others_now: float | None = None
    # Where the saved runs and this one timed copies larger than the caches (``bandwidth``).
    copy_saved: tuple[Estimate | None, ...] = ()
    copy_now: Estimate | None = None


@dataclass(frozen=True)
class Decision:
    verdict: str
    regression: bool
    reason: str = ""
    threshold: float | None = None  # the time threshold it was judged against
