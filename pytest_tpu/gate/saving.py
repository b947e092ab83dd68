"""``--save-baseline=NAME``: this session's runs added to the baseline's history, and what the
summary says about it.

The plugin decides the exit status (``SAVE_FAILED_EXIT_CODE`` where nothing could be saved);
this module writes the file (``baseline.save``, atomic) and words the lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import pytest

from pytest_tpu.gate import baseline as store
from pytest_tpu.gate import loading
from pytest_tpu.gate.history import DEFAULT_KEEP, NEAR_S, RunSummary, duration, moment
from pytest_tpu.options import Settings
from pytest_tpu.results import BenchResult


class Saver:
    """Saves one session's results under a baseline name; ``lines`` says what happened."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        environment: Callable[[], dict[str, Any]],
    ) -> None:
        self.config = config
        self.settings = settings
        self.environment = environment  # asked for only once something is to be saved
        self.lines: list[str] = []

    def save(
        self, name: str, results: Any, runs_of: Callable[[BenchResult], Iterable[RunSummary]]
    ) -> bool:
        """Whether ``results`` (passed and failed benchmarks) were saved as ``name``; a benchmark's
        runs come from ``runs_of``."""
        if not results.passed:
            self.lines.append(
                f"no benchmark was measured: baseline {name!r} NOT saved (under pytest-xdist "
                "only device benchmarks, those using `accelerator`, are measured)"
            )
            return False
        directory = self.settings.baseline_dir
        previous = self._previous(name)
        new = [store.NewRun(result, tuple(runs_of(result))) for result in results.passed]
        keep = self.settings.baseline_history or DEFAULT_KEEP
        try:
            path = store.save(
                directory,
                name,
                new,
                self.environment(),
                left_out=[result.nodeid for result in results.failed],
                previous=previous,
                keep=keep,
                machine_info=self._benchmark_info("machine"),
                commit_info=self._benchmark_info("commit"),
            )
        except (OSError, loading.BaselineError) as exc:
            self.lines.append(f"baseline {name!r} NOT saved: {exc}")
            return False
        kept = store.kept_runs(previous, new, self.environment(), keep)
        counts = [len(runs) for runs in kept]
        count = f"{len(new)} benchmark{'s' if len(new) != 1 else ''}"
        self.lines.append(f"saved baseline {name!r}: {count} in {path}{_kept_text(counts)}")
        self.lines += _history_notes(counts, keep)
        self.lines += _reach_note(max(kept, key=len, default=[]))
        if self.settings.compare_ref:
            self.lines.append(_alternating_note(self.config))
        for result in results.failed:
            self.lines.append(f"  left out (failed): {result.nodeid}: {result.error}")
        return True

    def _previous(self, name: str) -> loading.Baseline | None:
        """The baseline being added to; an unreadable one is kept aside, never overwritten."""
        path = store.baseline_path(self.settings.baseline_dir, name)
        if not path.is_file():
            return None
        try:
            return store.load(path)
        except loading.BaselineError as exc:
            aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
            path.rename(aside)
            self.lines.append(f"baseline {name!r} could not be read ({exc}); kept as {aside}")
            return None

    def _benchmark_info(self, kind: str) -> dict[str, Any] | None:
        """machine_info / commit_info from pytest-benchmark's own hooks, as its saves have."""
        hook = self.config.hook
        try:
            if kind == "machine":
                info = hook.pytest_benchmark_generate_machine_info(config=self.config)
                hook.pytest_benchmark_update_machine_info(config=self.config, machine_info=info)
            else:
                info = hook.pytest_benchmark_generate_commit_info(config=self.config)
                hook.pytest_benchmark_update_commit_info(config=self.config, commit_info=info)
        except Exception:  # pytest-benchmark absent or a hook failing: a stand-in is used
            return None
        return info if isinstance(info, dict) else None


def _history_notes(counts: list[int], keep: int) -> list[str]:
    """What a short history means for the gate, under the line that says it was saved."""
    notes = []
    if counts and min(counts) < 2:
        notes.append(
            f"  the gate measures the noise between sessions from at least 2 saved runs "
            f"(it keeps the last {keep}); against 1 it assumes they differ by the threshold "
            "and says so"
        )
    few = min(keep, DEFAULT_KEEP)
    if counts and min(counts) < few:
        # With 2 saved runs the between-session noise has one degree of freedom: a trial saw
        # +68 % [+17 %, +142 %] pass, not 99 % sure. Users read "at least 2" as "enough".
        notes.append(
            f"  with fewer than {few} saved runs the noise between sessions "
            "is known so roughly that only large changes are resolved; each run saved "
            "narrows that"
        )
    return notes


def _reach_note(runs: list[RunSummary]) -> list[str]:
    """How far the saved runs' noise between sessions reaches (``history.beyond_reach``), said
    when they are saved: new-user trial 36 saved three runs within 20 s, and every later
    comparison judged them as one saved run, every row unable to resolve its threshold."""
    times = sorted(t for run in runs if (t := moment(run.when)))
    if len(times) < 2 or len(times) != len(runs):
        return []
    span = times[-1] - times[0]
    reach = duration(max(span, timedelta(seconds=NEAR_S)))
    return [
        f"  the {len(times)} saved runs lie within {duration(span)}: a comparison more than "
        f"{reach} after the last of them judges them as one saved run, since their spread is "
        "the noise of sessions that close together; save in separate sessions over time (each "
        "main-branch CI run)"
    ]


def _kept_text(counts: list[int]) -> str:
    """``; 3 runs kept per benchmark`` (or ``2-3 runs``): how deep the history now is."""
    if not counts:
        return ""
    low, high = min(counts), max(counts)
    span = f"{low}" if low == high else f"{low}-{high}"
    return f"; {span} run{'s' if high > 1 else ''} kept per benchmark"


def _alternating_note(config: pytest.Config) -> str:
    """What a run saved during --compare-ref is good for (a trial's ini compare_ref made every
    later plain --compare call its saved runs incompatible, unexplained)."""
    where = "" if config.getoption("compare_ref") else " (ini compare_ref)"
    return (
        f"  these rounds took turns with a base process (--compare-ref{where}) and are kept as "
        "their own history: a plain --compare calls them incompatible (rounds differs). To track "
        "over time, save in runs without --compare-ref (-o compare_ref= overrides the ini)"
    )
