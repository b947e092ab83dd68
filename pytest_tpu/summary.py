"""Terminal tables and report files after a session that ran benchmarks.

Registered by the plugin in every session. Report paths are checked when the session starts, so
a typo fails in a second instead of after an hour of benchmarks; files are written once every
``pytest_sessionfinish`` (the gate's comparison included) has run, and nothing here raises
after the tests: a report problem is a warning line, never a traceback.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_tpu.files import write_atomic, write_text_atomic
from pytest_tpu.options import SAVE_FAILED_EXIT_CODE, Settings
from pytest_tpu.results import results_key
from pytest_tpu.session import header_shown_key, session_key

if TYPE_CHECKING:
    from pytest_tpu.gate.compare import Row
    from pytest_tpu.report import ComparisonRow, WorkloadTable
    from pytest_tpu.roundtimes import RoundTime
    from pytest_tpu.scaling import ScalingRow

REPORT_SUFFIXES = (".md", ".json")
PLOT_SUFFIXES = (".png", ".svg")
PLOT_HINT = "pip install 'pytest-tpu[plot]'"
REPORT_HINT = "use .md for Markdown or .json for JSON"

# Where compare.py leaves this run's comparison rows (one per benchmark and device), for the
# summary to render; absent when --compare was not given.
comparison_key = pytest.StashKey["list[ComparisonRow]"]()


def check_paths(reports: Sequence[Path], plots: Sequence[Path], plot_available: bool) -> None:
    """Raise ``pytest.UsageError`` for a report path this plugin cannot write."""
    given = [("--tpu-report", path, REPORT_SUFFIXES, REPORT_HINT) for path in reports]
    given += [("--tpu-report-plot", path, PLOT_SUFFIXES, "use .png or .svg") for path in plots]
    for flag, path, suffixes, hint in given:
        if path.suffix.lower() not in suffixes:
            kind = path.suffix or "(none)"
            raise pytest.UsageError(f"{flag}={path}: unknown file type {kind!r}; {hint}")
    # What was typed is checked before what is installed: the same options get the same error
    # whether or not matplotlib is there (or already imported by another plugin).
    for flag, path, _, _ in given:
        problem = unwritable(path)
        if problem is not None:
            raise pytest.UsageError(f"{flag}={path}: {problem}")
    if plots and not plot_available:
        raise pytest.UsageError(
            f"--tpu-report-plot needs matplotlib, which is not installed; run: {PLOT_HINT}"
        )


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written once the tests are done, or None when it can.

    Checked at session start so that a typo costs a second, not the report of an hour's run.
    Missing folders are fine (they are created), so the nearest existing one must be writable.
    """
    if path.is_dir():
        return "is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else "the file is not writable"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    try:  # what access() cannot see: /proc, a read-only mount, a full disk (root passes access)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return (
            f"cannot create a file in the folder {folder} (the system said: {exc.strerror or exc})"
        )
    return None


def _on_worker(config: pytest.Config) -> bool:
    """On a pytest-xdist worker the controller prints and writes for everyone."""
    return hasattr(config, "workerinput")


class GateLineLast:
    """The gate's verdict line once more, after every table: the gate's own lines come first,
    then this plugin's and pytest-benchmark's tables, so a failing CI log ended in tables and
    pytest's "6 passed" (new-user trial 28), and a passing or inconclusive one still does
    without this (trial 40: the verdict 70 lines up, under a 200-column table)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_tpu.gate.compare import gate_lines_key
        from pytest_tpu.gate.lines import verdict_line

        if _on_worker(self.config):
            return
        said: list[str] = self.config.stash.get(gate_lines_key, [])
        found = verdict_line(said)
        if found is None:
            return
        line, word = found
        colour = {"failed": "red", "inconclusive": "yellow", "passed": "green"}.get(word)
        markup = {colour: True, "bold": word == "failed"} if colour else {}
        terminalreporter.write_line(line, **markup)


class SummaryPlugin:
    """Prints speedup/comparison tables and writes --tpu-report / --tpu-report-plot files."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.written: list[str] = []  # lines for the terminal about the files written
        self.failed_writes = 0  # reports that could not be written: the session exits 7

    @property
    def _worker(self) -> bool:
        return _on_worker(self.config)

    def _settings(self) -> Settings:
        return self.config.stash[session_key].settings

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Reject a report path with an unknown suffix, or a plot without matplotlib."""
        from pytest_tpu import plot

        settings = self._settings()
        # matplotlib's import is only paid for where a plot is asked for.
        available = plot.available() if settings.report_plots else True
        check_paths(settings.reports, settings.report_plots, available)

    def _tables(self) -> list[WorkloadTable]:
        from pytest_tpu.report import build_tables

        # Device benchmarks only: a plain pytest-benchmark test has no device to compare.
        results = [result for result in self.config.stash[results_key].results if result.kind]
        return build_tables(results, self._settings().speedup_reference)

    def _round_times(self) -> list[RoundTime]:
        from pytest_tpu.roundtimes import round_times

        return round_times(self.config.stash[results_key].results)

    def _missing(self) -> dict[str, str]:
        """Devices missing from this machine, with reasons; only if discovery already ran:
        never probe for a summary."""
        state = self.config.stash[session_key]
        return dict(state.discover().missing) if state.discovered else {}

    def _comparison(self) -> list[ComparisonRow] | None:
        rows = self.config.stash.get(comparison_key, None)
        if rows is not None:
            return rows
        from pytest_tpu.gate import compare

        gate_rows = self.config.stash.get(compare.comparison_key, None)
        return None if gate_rows is None else [from_gate_row(row) for row in gate_rows]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write --tpu-report and --tpu-report-plot, after the gate has stored its comparison."""
        settings = self._settings()
        if self._worker or not (settings.reports or settings.report_plots):
            return
        tables, comparison = self._tables(), self._comparison()
        if settings.reports:
            scaling = _scaling_rows(self.config)
            missing = self._missing()
            plain = self._round_times()
            against, notes, gate = self._against(), self._against_notes(), self._gate()
            head = self._head()
            for path in settings.reports:
                self._write(
                    path,
                    lambda p: _write_report(
                        p, tables, comparison, against, scaling, missing, gate, plain, notes, head
                    ),
                )
        for path in settings.report_plots:
            self._write(path, lambda p: _write_plot(p, tables, comparison))
        if self.failed_writes and session.exitstatus == pytest.ExitCode.OK:
            # A CI step that reads the report must not find it missing after a green run.
            session.exitstatus = SAVE_FAILED_EXIT_CODE

    def _against(self) -> str | None:
        from pytest_tpu.gate.model import against_key

        # The gate stores what it compared with (a stored baseline's file and when its runs were
        # saved, or --compare-ref's commit); the baseline's name alone is the fallback.
        return self.config.stash.get(against_key, None) or self._settings().compare

    def _head(self) -> str | None:
        from pytest_tpu.gate.model import head_key

        return self.config.stash.get(head_key, None)

    def _against_notes(self) -> list[str]:
        from pytest_tpu.gate.model import against_notes_key

        return list(self.config.stash.get(against_notes_key, None) or ())

    def _gate(self) -> dict[str, Any] | None:
        """The gate's threshold and the session's verdict, when --fail-on-regression decided."""
        from pytest_tpu.gate.compare import gate_lines_key, verdict_key

        settings = self._settings()
        verdict = self.config.stash.get(verdict_key, None)
        if not settings.gating or verdict is None:
            return None
        return {
            "threshold_pct": settings.fail_on_regression,
            "thresholds_pct": dict(settings.thresholds),
            "verdict": verdict,
            "lines": self.config.stash.get(gate_lines_key, []).copy(),
        }

    def _write(self, path: Path, writer: Callable[[Path], None]) -> None:
        # Missing folders are made, as pytest's --junitxml does; the line says so, so a typo in
        # a folder's name shows (new-user trial 31: /nonexistent/dir made without a word).
        made = _missing_folder(path.parent)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            writer(path)
        except Exception as exc:  # a report must never turn a run into a traceback
            self.failed_writes += 1
            self.written.append(
                f"pytest-tpu: could not write {path}: {exc!r} (exit code {SAVE_FAILED_EXIT_CODE})"
            )
        else:
            created = f" (made the folder {made})" if made is not None else ""
            self.written.append(f"pytest-tpu: wrote {path}{created}")

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        """Speedup tables per workload, the comparison, and where the reports went."""
        if self._worker:
            return
        try:
            self._print(terminalreporter)
        except Exception as exc:  # same reason as _write: a summary never raises
            terminalreporter.write_line(f"pytest-tpu: could not draw the summary: {exc!r}")
        for line in self.written:
            terminalreporter.write_line(line, yellow="could not" in line)

    def _print(self, tr: pytest.TerminalReporter) -> None:
        from pytest_tpu import report

        tables = self._tables()
        missing = report.missing_line(self._missing())
        if tables and missing and not self.config.stash.get(header_shown_key, False):
            tr.write_line(missing, yellow=True)  # once per session, not under every table
        width = _width(tr)
        for table in tables:
            tr.write_sep("-", table.title)
            _lines(tr, report.speedup_table(table, width=width))
            for note in report.table_notes(table, width):
                tr.write_line(note, yellow=True)
            cross = report.cross_table(table, width=width)
            if cross:
                tr.write_line("")
                _lines(tr, cross)
        comparison = self._comparison()
        said = report.legend_for(bool(tables), comparison)
        if said:  # "±" and "[a, b]" are different things: said once (trial 15)
            tr.write_line(said)
        if comparison is not None:
            self._print_comparison(tr, comparison)

    def _print_comparison(self, tr: pytest.TerminalReporter, rows: list[ComparisonRow]) -> None:
        from pytest_tpu import report

        baseline = self._settings().compare
        tr.write_sep("-", f"comparison with baseline {baseline!r}" if baseline else "comparison")
        if rows:
            head, blocks = report.comparison_blocks(rows, width=_width(tr))
            ordered = report.sort_comparison(rows)
            _lines(tr, "\n".join(head))
            for block, row in zip(blocks, ordered, strict=True):
                for line in block:
                    tr.write_line(line, red=row.verdict == "slower", bold=row.verdict == "slower")
            for note in report.terminal_notes(rows, every=self.config.get_verbosity() > 0):
                tr.write_line(note)
        summary = report.comparison_summary(rows)
        tr.write_line(summary, red=any(r.verdict == "slower" for r in rows))


def kind_of(nodeid: str) -> str:
    """The device kind among a node id's parameter ids (``test_x[cpu-512]`` -> ``cpu``)."""
    ids = nodeid.rpartition("[")[2].rstrip("]").split("-") if "[" in nodeid else []
    return next((part for part in ids if part in ("cpu", "gpu", "tpu")), "")


def from_gate_row(row: Row) -> ComparisonRow:
    """The gate's row (fractions, a status) as the report's row (percent, one verdict)."""
    from pytest_tpu.gate.lines import sure
    from pytest_tpu.gate.stats import by_one_pair
    from pytest_tpu.report import ComparisonRow

    def pct(value: float | None) -> float | None:
        return None if value is None else value * 100

    verdict = row.verdict if row.status == "compared" and row.verdict else row.status
    notes = [row.reason] if row.reason else []
    if row.status == "failed":
        verdict, notes = "failed", ["failed in this run, so not compared"]
    elif row.regression:  # what confirmed it (a re-measurement, a new pair) stays readable
        # "Beyond" only where the whole interval is: a precise +4.9 % whose interval reaches 5 %
        # fails too. One wording for both, told apart by one word (trial 21: "beyond the
        # threshold" beside "not shown within the threshold" read as two kinds of regression).
        beyond = row.threshold is not None and row.low is not None and row.low >= row.threshold
        where = "lies beyond" if beyond else "reaches past"
        why = f"{sure(row.confidence)} sure it is slower; its interval {where} the threshold"
        if row.metric == "memory":  # compared with no interval: there is no "how sure"
            why = "more than the threshold above the largest saved run"
        notes = [f"regression ({why})", *notes]
    if row.status == "compared" and row.forced:
        notes.insert(0, "[forced] environments differ")
    note = "; ".join(notes)
    mode = "paired" if "paired" in row.noise_source else "calibrated" if row.calibrated else "raw"
    # One pair of processes' rounds claim no confidence for the user (``pair_confidence_pct``).
    one_pair = by_one_pair(row.noise_source)
    return ComparisonRow(
        # Memory and first-call rows sit under the benchmark's own, named by their metric.
        name=row.nodeid if row.metric == "time" else f"{row.nodeid} ({row.metric})",
        kind=kind_of(row.nodeid),
        metric=row.metric,
        unit=row.unit,
        higher_is_better=row.higher_is_better,
        baseline=row.base_value,
        current=row.current_value,
        change_pct=pct(row.change),
        ci_low=pct(row.low),
        ci_high=pct(row.high),
        verdict=verdict,
        note=note,
        mode=mode if row.status == "compared" and row.metric == "time" else "",
        machine_pct=pct(row.machine),
        memory_copy_pct=pct(row.memory_copy),
        noise_source=row.noise_source,
        detectable_pct=pct(row.detectable),
        confirmed=row.confirmed,
        regression=row.regression,
        confidence_pct=None if one_pair else pct(row.confidence),
        pair_confidence_pct=pct(row.confidence) if one_pair else None,
        threshold_pct=pct(row.threshold),
        statistic=_statistic(row, mode),
        allowance_bytes=row.allowance,
    )


STATISTICS = {
    "raw": "mean of the fastest half of rounds",
    "paired": "middle half of the paired rounds' ratios",
    "calibrated": "middle half of the rounds' ratios to the calibration kernel",
}


def _statistic(row: Row, mode: str) -> str:
    """What a compared time row's numbers measure (its ``statistic``, else its mode's)."""
    if row.status != "compared" or row.metric != "time":
        return ""
    return row.statistic or STATISTICS[mode]


def _width(tr: pytest.TerminalReporter) -> int:
    """The terminal's width, as pytest measures it (``COLUMNS``, else the terminal, else 80)."""
    return int(tr.config.get_terminal_writer().fullwidth)


def _lines(tr: pytest.TerminalReporter, text: str) -> None:
    for line in text.splitlines():
        tr.write_line(line)


def _scaling_rows(config: pytest.Config) -> list[ScalingRow]:
    """The scaling table's rows (``--tpu-workers`` sweeps, or results over several replica
    counts)."""
    from pytest_tpu.cluster import scaling_rows

    return scaling_rows(config)


def _write_report(
    path: Path,
    tables: list[WorkloadTable],
    comparison: list[ComparisonRow] | None,
    baseline: str | None,
    scaling_rows: list[ScalingRow],
    missing: dict[str, str],
    gate: dict[str, Any] | None,
    plain: list[RoundTime],
    notes: list[str],
    head: str | None = None,
) -> None:
    from pytest_tpu import report, scaling

    if path.suffix.lower() == ".json":
        data = report.to_json(tables, comparison, baseline, missing, gate, plain, notes, head)
        if scaling_rows:
            data["scaling"] = scaling.to_dicts(scaling_rows)
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    else:
        text = report.to_markdown(tables, comparison, baseline, missing, gate, plain, notes, head)
        if scaling_rows:
            text = text.rstrip("\n") + "\n\n" + scaling.to_markdown(scaling_rows)
    write_text_atomic(path, text)


def _write_plot(
    path: Path, tables: list[WorkloadTable], comparison: list[ComparisonRow] | None
) -> None:
    from pytest_tpu import plot

    write_atomic(path, lambda temporary: plot.draw(temporary, tables, comparison))


def _missing_folder(folder: Path) -> Path | None:
    """The outermost folder of ``folder`` that does not exist yet, or None where it does."""
    missing = None
    for part in (folder, *folder.parents):
        if part.exists():
            break
        missing = part
    return missing
