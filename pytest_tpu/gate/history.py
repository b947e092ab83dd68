"""A benchmark's run as the gate keeps it: three located estimates, small enough to keep many.

Each run of a benchmark is summarised by the location of its raw round times, of its per-round
ratios to the calibration kernel (when the kernel was timed before every round) and of the
kernel itself (the machine's speed during the run). A baseline keeps the last few summaries of
each benchmark, so the gate measures how much sessions differ instead of assuming it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pytest_tpu.gate.contention import cores
from pytest_tpu.gate.stats import Estimate, estimate, lower_mean, midmean, round_ratios
from pytest_tpu.gate.stats import mean as mean_of_all

# A session this soon after the last saved run is as near to them as saved runs are to each other
# at best: ``when`` is kept to the second, and runs saved in a loop lie seconds apart.
NEAR_S = 60
DEFAULT_KEEP = 5  # runs kept per benchmark and baseline name (--tpu-baseline-history)
SOURCES = ("run", "noise")
# One value per run of the metrics gated besides time, from extra_info, the first key present
# wins: the memory the rounds added (the device allocator's peak, or peak RSS on a CPU), and the
# first call's time (trace and compile): the suite's own cold_s/first_epoch_s/first_step_s, or
# the plugin's first_call_s for users' benchmarks. A key present with nothing usable gives no
# value: falling through to the next key would mix two quantities in one history (an increase of
# 0 B replaced by the whole process's 1 GB peak made an unchanged benchmark -100 % in memory).
# Memory may be 0 (the calls added nothing the kernel saw): that run's value is as real as any,
# and dropping it hid how much an unchanged benchmark's increase moves between runs (trial 16: an
# LSTM fit added 0 B in 3 of 5 saved runs; its history kept the other 2, and an unchanged run
# failed a memory gate at +36 %). A first call takes time: it must be positive.
METRIC_KEYS = {
    "memory": ("peak_memory_increase_bytes", "peak_memory_bytes"),
    "compile": ("cold_s", "first_epoch_s", "first_step_s", "first_call_s"),
}


def metrics_of(extra_info: Mapping[str, Any]) -> dict[str, float]:
    """The gated metrics a result carries (see ``usable``)."""
    found: dict[str, float] = {}
    for metric, keys in METRIC_KEYS.items():
        key = next((key for key in keys if key in extra_info), None)
        value = extra_info.get(key) if key else None
        number = usable(metric, value)
        if number is not None:
            found[metric] = number
    return found


def usable(metric: str, value: Any) -> float | None:
    """``value`` as a number, where it is one: positive for a first call's time, at least 0 for
    memory added; None otherwise."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value) if (value >= 0 if metric == "memory" else value > 0) else None


@dataclass(frozen=True)
class RunSummary:
    """One run of one benchmark: located raw, calibrated and kernel estimates."""

    rounds: int
    raw: Estimate
    calibrated: Estimate | None = None
    kernel: Estimate | None = None
    kernel_kind: str = ""  # which calibration kernel: calibrated runs compare only alike
    when: str = ""
    commit: str | None = None
    source: str = "run"  # "run", or "noise" for a --measure-noise repetition
    metrics: Mapping[str, float] = field(default_factory=dict)  # memory, compile: one value
    # CPU cores other processes took during the call, and this process took (``contention``).
    others: float | None = None
    own: float | None = None
    # The mean of all rounds, for the tail check (``gate.tail``); None in runs saved before.
    mean: Estimate | None = None
    # Seconds per GiB of copies larger than the CPU caches around the rounds (``bandwidth``).
    memory_copy: Estimate | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "raw": self.raw.to_json(),
            "calibrated": self.calibrated.to_json() if self.calibrated else None,
            "kernel": self.kernel.to_json() if self.kernel else None,
            "kernel_kind": self.kernel_kind,
            "when": self.when,
            "commit": self.commit,
            "source": self.source,
            "metrics": dict(self.metrics),
            "others": self.others,
            "own": self.own,
            "mean": self.mean.to_json() if self.mean else None,
            "memory_copy": self.memory_copy.to_json() if self.memory_copy else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> RunSummary:
        """Parse a stored summary; ``ValueError`` says what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("a run summary is not an object")
        rounds = data.get("rounds")
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError("'rounds' is not a whole number of at least 1")
        source = data.get("source", "run")
        if source not in SOURCES:
            raise ValueError(f"'source' is {source!r}; valid: {', '.join(SOURCES)}")
        commit = data.get("commit")
        metrics = data.get("metrics", {})
        if not isinstance(metrics, Mapping) or not all(
            key in METRIC_KEYS and usable(key, v) is not None for key, v in metrics.items()
        ):
            raise ValueError(
                "'metrics' is not an object of memory (at least 0) and compile (positive) values"
            )
        others, own = data.get("others"), data.get("own")
        for key, value in (("others", others), ("own", own)):
            if value is not None and cores(value) is None:
                raise ValueError(f"'{key}' is not a number of CPU cores (at least 0)")
        return cls(
            rounds=rounds,
            raw=Estimate.from_json(data.get("raw")),
            calibrated=_optional(data.get("calibrated")),
            kernel=_optional(data.get("kernel")),
            kernel_kind=str(data.get("kernel_kind", "")),
            when=str(data.get("when", "")),
            commit=commit if isinstance(commit, str) else None,
            source=source,
            metrics={key: float(v) for key, v in metrics.items()},
            others=cores(others),
            own=cores(own),
            mean=_optional(data.get("mean")),
            memory_copy=_optional(data.get("memory_copy")),
        )


def _optional(data: Any) -> Estimate | None:
    return None if data is None else Estimate.from_json(data)


def summarize(
    samples: Sequence[float],
    calibration: Sequence[float | None] = (),
    kernel_kind: str = "",
    *,
    when: str = "",
    commit: str | None = None,
    source: str = "run",
    metrics: Mapping[str, float] | None = None,
    others: float | None = None,
    own: float | None = None,
    memory_copy: Estimate | None = None,
) -> RunSummary | None:
    """Summarise a run's rounds (in measured order) and the kernel timed before each round."""
    raw = estimate(samples, lower_mean)
    if raw is None:
        return None
    aligned = len(calibration) == len(samples) and any(x is not None for x in calibration)
    calibrated = estimate(round_ratios(samples, calibration), midmean) if aligned else None
    timings = [x for x in calibration if x is not None]
    kernel = estimate(timings, lower_mean) if timings else None
    return RunSummary(
        rounds=len(samples),
        raw=raw,
        calibrated=calibrated,
        kernel=kernel,
        kernel_kind=kernel_kind if kernel else "",
        when=when,
        commit=commit,
        source=source,
        metrics=dict(metrics or {}),
        others=others,
        own=own,
        mean=estimate(steady(samples), mean_of_all),
        memory_copy=memory_copy,
    )


def steady(samples: Sequence[float]) -> Sequence[float]:
    """The rounds after the first: a ``benchmark.pedantic`` without warm-up rounds traces or
    compiles in its first round, which the first-call metric reports apart. The mean of all
    rounds (``RunSummary.mean``) must not be that first call's (a test with a 4 s trace in the
    first of 5 rounds of 3 ms failed the time gate "on the tail" when the trace grew)."""
    return samples[1:] if len(samples) > 1 else samples


def sessions(history: Sequence[RunSummary]) -> list[RunSummary]:
    """The runs that were whole sessions (not --measure-noise repetitions)."""
    return [run for run in history if run.source == "run"]


def noise_logs(history: Sequence[RunSummary], mode: str) -> list[float]:
    """Log locations of --measure-noise repetitions (run-to-run within one session)."""
    out = []
    for run in history:
        part = getattr(run, mode)
        if run.source == "noise" and part is not None and math.isfinite(part.log):
            out.append(part.log)
    return out


def moment(when: str) -> datetime | None:
    """A run's start, in UTC, or None where it was not recorded or cannot be read."""
    try:
        found = datetime.fromisoformat(when)
    except (TypeError, ValueError):
        return None
    return found if found.tzinfo is not None else None


def duration(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def saved_when(runs: Iterable[RunSummary]) -> str:
    """How many runs were saved and when, for a report read later: ``5 runs saved 2026-11-27
    22:14 to 22:31 UTC`` (the runs of every benchmark, told apart by their start)."""
    saved = {run.when for run in runs if run.source == "run"}
    times = sorted(t for when in saved if (t := moment(when)))
    count = f"{len(saved)} run{'s' if len(saved) != 1 else ''} saved"
    if not times:
        return count
    first, last = (t.astimezone(timezone.utc) for t in (times[0], times[-1]))
    end = last.strftime("%H:%M" if last.date() == first.date() else "%Y-%m-%d %H:%M")
    span = first.strftime("%Y-%m-%d %H:%M") + ("" if last == first else f" to {end}")
    return f"{count} {span} UTC"


@dataclass(frozen=True)
class Reach:
    """When saved runs were taken, and how far a later session lies from the last of them."""

    times: list[datetime]  # sorted, the saved runs whose time is known
    span: timedelta  # first to last of them
    after: timedelta  # last of them to the session


def saved_reach(runs: Iterable[RunSummary], now: datetime) -> Reach | None:
    """The saved runs' span and this session's distance from them, where the session lies
    further from the last of them than they lie from each other; else None (also with fewer
    than two runs of known time). Shared by the verdict (``beyond_reach``) and the summary
    line that says so (``lines.saved_span_note``), so both read the same runs the same way.
    """
    times = sorted(t for run in runs if run.source == "run" and (t := moment(run.when)))
    if len(times) < 2:
        return None
    span, after = times[-1] - times[0], now - times[-1]
    return Reach(times, span, after) if after > span else None


def beyond_reach(history: Sequence[RunSummary], when: str) -> str:
    """Where a session started (``when``) further from the last of its saved runs than they lie
    from each other, and more than ``NEAR_S`` after it, what they span; else "" (also where a
    saved run's time is not known).

    Their spread is the noise of sessions as far apart as they were, and no more: five runs
    saved within 2.5 minutes had unchanged Keras models within 5 % of each other, and sessions
    of the next 25 minutes read the CNN up to 57 % slower and failed it (g36); new-user trial
    30 failed an unchanged GRU step at +26.7 % four minutes after five runs saved within three.
    """
    now = moment(when)
    reach = saved_reach(history, now) if now is not None else None
    saved = sum(run.source == "run" for run in history)
    # A run saved without its time (or one saved run): nothing to tell.
    if reach is None or len(reach.times) != saved or reach.after.total_seconds() <= NEAR_S:
        return ""
    within, after = duration(reach.span), duration(reach.after)
    return f"{len(reach.times)} saved runs within {within}, the last {after} before"
