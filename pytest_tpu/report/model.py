"""What the report is made of: cells, rows, tables, comparison rows, and the words they use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_tpu import units

MAX_WIDTH = 100  # the terminal's width where the caller does not know it (files, tests)
# A comparison row's name is cut no shorter than this; where the figures leave it less, each
# row's name goes on a line of its own above its figures (trial 14: "test_a…mory)").
NAME_MIN = 24
# pytest-benchmark's default timer, as its options name it: tables of it say nothing more.
WALL_CLOCKS = ("", "perf_counter", "time.perf_counter", "default_timer")
SPREAD_LEGEND = "±: the rounds' spread (standard deviation over the mean), not an interval"
INTERVAL_LEGEND = "[a, b]: 95% intervals of a change"
# A same-job row of one pair of processes: its interval is its rounds' (trial 40, point 3: "95 %
# interval" read as covering all the noise, on a row whose two processes may differ by more).
ONE_PAIR_LEGEND = (
    "a row of one pair of processes: of that pair's rounds only, which leave out an offset "
    "between two processes with the same code"
)


def legend(compared: bool, one_pair: bool = False) -> str:
    """What "±" means, and "[a, b]" where a comparison shows intervals (trial 40: the second
    under a plain run's tables, where no interval was shown)."""
    return f"{SPREAD_LEGEND}; {interval_legend(one_pair)}" if compared else SPREAD_LEGEND


def interval_legend(one_pair: bool) -> str:
    """What "[a, b]" means, with what a one-pair row's interval covers where a comparison has
    one: under a comparison of plain benchmarks, which has no tables and no "±", on its own."""
    return f"{INTERVAL_LEGEND} ({ONE_PAIR_LEGEND})" if one_pair else INTERVAL_LEGEND


# The device kinds in the order people read them (the same order as options.KINDS, which is not
# imported here because options imports pytest).
KIND_ORDER = ("cpu", "gpu", "tpu")
# Fields that identify a configuration, with how a row label spells them.
CONFIG_FIELDS = {"n": "N={}", "dtype": "{}", "batch_size": "batch {}"}
CONFIG_HEADERS = {"n": "N", "dtype": "dtype", "batch_size": "batch"}
# The one-off first call, under whichever name the workload records it.
COLD_FIELDS = {"cold_s": "cold", "first_epoch_s": "1st epoch", "first_step_s": "1st step"}
# Secondary figures for the cross-configuration table, with their units.
EXTRA_METRICS = {
    "epoch_s": ("epoch", "s"),
    "step_ms": ("step", "ms"),
    "us_per_sample": ("per sample", "µs"),
    "tflops": ("", "TFLOP/s"),
    "samples_per_s": ("samples/s", ""),
    "latency_p50_ms": ("p50", "ms"),
    "latency_p90_ms": ("p90", "ms"),
    "pct_peak": ("% peak", ""),
    "achieved_tflops": ("model", "TFLOP/s"),
    "peak_memory_bytes": ("peak mem", "B"),
}
MEMORY_FIELD = "peak_memory_bytes"
# The gate's metrics besides time, which it judges only when asked: counted apart from time.
OTHER_METRICS = ("compile", "memory")
METRIC_NAMES = {
    "tflops": "FLOP/s",
    "epoch_s": "epoch time",
    "step_ms": "step time",
    "samples_per_s": "throughput",
}
VERDICTS = (
    "slower",
    "inconclusive",
    "faster",
    "unchanged",
    "new",
    "missing",
    "failed",
    "unmeasured",
    "incompatible",
)
# A memory row's verdict is said in its own words: less memory is not "faster". The data (JSON,
# counts) keeps the one vocabulary, where "slower" means worse.
MEMORY_WORDS = {"slower": "larger", "faster": "smaller"}


def display_name(nodeid: str) -> str:
    """A benchmark's name as the comparison table shows it: its node id without the file."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def verdict_word(verdict: str, metric: str) -> str:
    return MEMORY_WORDS.get(verdict, verdict) if metric == "memory" else verdict


@dataclass(frozen=True)
class Cell:
    """One benchmark configuration measured on one device."""

    value: float | None  # the headline, in the table's unit; None when the test failed
    spread: float | None = None  # relative (0.03 = 3 %)
    speedup: float | None = None  # against the table's reference device
    cold: float | None = None  # seconds of the first call (trace + compile)
    extras: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Row:
    """One benchmark configuration (node id without the device) across devices."""

    key: str
    label: str
    config: dict[str, Any]
    cells: dict[str, Cell]


@dataclass(frozen=True)
class WorkloadTable:
    """The speedup table of one workload (one test function and headline metric)."""

    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    reference: str | None
    kinds: tuple[str, ...]
    rows: tuple[Row, ...]
    cold_field: str | None = None
    missing: dict[str, str] = field(default_factory=dict)
    timer: str = ""  # pytest-benchmark's timer, where it is not the wall clock

    @property
    def title(self) -> str:
        """``test_matmul: FLOP/s in TFLOP/s (higher is better), speedup vs cpu``; a timer other
        than the wall clock is named (trial 15: CPU time of all threads, 45 ms, read as a 23 ms
        wall-clock call)."""
        name = METRIC_NAMES.get(self.metric, self.metric)
        unit = self.scale[1]
        better = "higher" if self.higher_is_better else "lower"
        vs = f", speedup vs {self.reference}" if self.reference and len(self.kinds) > 1 else ""
        timer = f", timer {self.timer}" if self.timer else ""
        return f"{self.workload}: {name} in {unit} ({better} is better){vs}{timer}"

    @property
    def scale(self) -> tuple[float, str]:
        """The factor and unit every figure of the table is shown in."""
        values = [c.value for r in self.rows for c in r.cells.values() if c.value is not None]
        return units.pick_unit(values, self.unit)


@dataclass(frozen=True)
class ComparisonRow:
    """One benchmark on one device, this run against the baseline (from the gate's ``compare``).

    ``change_pct`` is ``(current - baseline) / baseline * 100`` of the metric itself, so for a
    time a positive change is slower and for FLOP/s it is faster; ``verdict`` says which.
    ``ci_low``/``ci_high`` bound ``change_pct`` (in %). Values are in ``unit``.
    """

    name: str  # node id (or name) of the benchmark
    kind: str  # device kind
    metric: str
    unit: str
    higher_is_better: bool
    baseline: float | None
    current: float | None
    change_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # one of VERDICTS
    note: str = ""
    # How the gate measured the change: "calibrated", "raw" or "paired" (--compare-ref), the
    # machine's own drift since the baseline, where the noise estimate came from, and the
    # smallest slowdown the comparison would catch 4 times in 5 (all in %).
    mode: str = ""
    machine_pct: float | None = None
    noise_source: str = ""
    detectable_pct: float | None = None
    confirmed: bool | None = None
    regression: bool = False  # this row fails the gate
    confidence_pct: float | None = None  # how sure the comparison is of a slowdown (in %)
    # On a --compare-ref row of one pair of processes, confidence_pct is null: that pair's rounds
    # cannot see an offset between its two processes, and unchanged rows were "99 % sure" of a
    # slowdown in 52 of 116 (a 100 us numpy function). This is how sure those rounds alone are.
    pair_confidence_pct: float | None = None
    threshold_pct: float | None = None  # the slowdown the verdict was judged against (in %)
    # What baseline, current and change measure, for a time row: the mean of the fastest half
    # (raw), the middle half of paired ratios (paired), ratios to the calibration kernel
    # (calibrated), or the mean of all rounds (a row failed on slow calls in the tail).
    statistic: str = ""
    # How much slower the host copied memory than in the saved runs (in %; ``gate.bandwidth``).
    memory_copy_pct: float | None = None
    # A memory row: the change in bytes that counts as none (``gate.metrics.compare_memory``).
    allowance_bytes: float | None = None
