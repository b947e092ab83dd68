"""The pure report builders on hand-made results: no pytest run, no TensorFlow."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest

from pytest_tpu import report, units
from pytest_tpu.gate.stats import TAIL
from pytest_tpu.report import ComparisonRow
from pytest_tpu.report.notes import progress_lines
from pytest_tpu.results import BenchResult
from pytest_tpu.roundtimes import RoundTime


def result(fn, kind, extra, *, ids="", samples=(1.0, 1.02, 0.98), outcome="passed", error=None):
    node = f"benchmarks/test_{fn}.py::test_{fn}[{kind}{'-' + ids if ids else ''}]"
    return BenchResult(
        nodeid=node,
        name=node.split("::")[1],
        group=None,
        params={"accelerator": kind},
        extra_info={"accelerator": kind, **extra},
        samples=samples,
        outcome=outcome,
        error=error,
    )


def matmul(kind, tflops, n=2048, cold=2.0):
    extra = {"metric": "tflops", "unit": "TFLOP/s", "higher_is_better": True, "tflops": tflops}
    return result("matmul", kind, {**extra, "n": n, "dtype": "float32", "cold_s": cold}, ids=str(n))


def cnn(kind, batch, epoch, step_ms):
    extra = {"metric": "epoch_s", "unit": "s", "epoch_s": epoch, "step_ms": step_ms}
    extra |= {"batch_size": batch, "first_epoch_s": epoch * 3}
    return result("cnn", kind, extra, ids=str(batch))


def comparison(name, verdict, change=None, low=None, high=None, note="", regression=False):
    base = 1.0 if verdict != "new" else None
    current = None if verdict == "missing" else 1.0 + (change or 0) / 100
    return ComparisonRow(
        f"benchmarks/test_x.py::{name}", "cpu", "epoch_s", "s", False, base, current,
        change, low, high, verdict, note, regression=regression,
    )  # fmt: skip


# ---------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.85, "s", "850 ms"),
        (0.000042, "s", "42.0 µs"),
        (125.0, "s", "125 s"),
        (0.53, "TFLOP/s", "530 GFLOP/s"),
        (1.57e13, "FLOP/s", "15.7 TFLOP/s"),
        (80.2, "ms", "80.2 ms"),
        (3.0, "samples", "3.00 samples"),
    ],
)
def test_quantities_are_scaled_to_a_readable_unit(value, unit, shown):
    assert units.format_quantity(value, unit) == shown


def test_digits_stop_at_the_spread():
    assert units.format_number(0.2134, 0.0064) == "0.213"
    assert units.format_number(20.31, 4.0) == "20"
    # A leading 1 in the spread keeps one more digit: 0.14 says more than 0.1.
    assert units.format_number(6.031, 0.14) == "6.03"
    assert units.format_number(6.031) == "6.03"


def test_a_smallest_detectable_change_past_1000_percent_is_said_as_such():
    # Seen: "catches ... 16812571.9%" for a first-call time compared with two saved runs.
    assert units.format_detectable(16812571.9) == "over 1,000%"
    assert units.format_detectable(38.04) == "38.0%"
    assert units.format_detectable(float("inf")) == "no estimate"


def test_speedups_spreads_and_changes_read_like_the_published_figures():
    assert units.format_speedup(29.4) == "29x"
    assert units.format_speedup(1.0) == "1.0x"
    assert units.format_spread(0.034) == "±3%"
    assert units.format_spread(0.004) == "±0.4%"
    assert units.format_change(-3.8, -5.0, -2.6) == "-3.8% [-5.0, -2.6]"
    assert units.format_change(-18.0, -41.0, 5.0) == "-18% [-41, +5]"
    # Past a hundredfold an interval's digits say nothing (seen: "[-100, +363232167]").
    assert units.format_change(9.0, -100.0, 3.6e8) == "+9% [-100, >+10,000]"
    # Trial 16: "-0% [-10, +11]" for an unchanged 435 ms; a bound keeps the side it lies on.
    assert units.format_change(-0.3, -10.0, 11.0) == "0% [-10, +11]"
    # A bound that rounds to zero keeps its side of zero, in up to two decimals (trial 38).
    assert units.format_change(-1.5, -2.9, -0.04) == "-1.5% [-2.9, -0.04]"
    assert units.format_change(14.0, 0.1, 31.0) == "+14% [+0.1, +31]"
    assert units.format_change(-1.5, -2.9, -0.004) == "-1.5% [-2.9, -0.00]"
    assert units.format_change(18.0, 0.0, 31.0) == "+18% [+0, +31]"


# ---------------------------------------------------------------- speedup tables


def test_one_table_per_workload_with_speedups_against_the_cpu():
    results = [matmul("cpu", 0.53), matmul("gpu", 15.7), cnn("cpu", 256, 60.0, 900.0)]
    results.append(cnn("gpu", 256, 6.0, 94.0))
    matmul_table, cnn_table = report.build_tables(results)
    assert [t.workload for t in (matmul_table, cnn_table)] == ["test_matmul", "test_cnn"]
    assert matmul_table.rows[0].label == "N=2048 float32"
    assert matmul_table.rows[0].cells["gpu"].speedup == pytest.approx(15.7 / 0.53)
    # Time: lower is better, so the speedup is the reference's time over this device's.
    assert cnn_table.rows[0].cells["gpu"].speedup == pytest.approx(10.0)
    text = report.speedup_table(matmul_table)
    assert "N=2048 float32" in text
    assert "30x" in text
    assert "gpu/cpu" in text.splitlines()[0]
    assert "2.00 s" in text  # the cold start, scaled


def test_reference_falls_back_to_the_first_device_present():
    (table,) = report.build_tables([cnn("tpu", 256, 3.0, 50.0), cnn("gpu", 256, 6.0, 94.0)])
    assert table.reference == "gpu"
    assert "speedup vs gpu" in table.title
    assert table.rows[0].cells["tpu"].speedup == pytest.approx(2.0)


def test_speedup_reference_can_be_chosen():
    results = [matmul("cpu", 0.5), matmul("gpu", 10.0), matmul("tpu", 100.0)]
    (table,) = report.build_tables(results, reference="gpu")
    header = report.speedup_table(table).splitlines()[0]
    assert "cpu/gpu" in header
    assert "tpu/gpu" in header
    assert table.rows[0].cells["tpu"].speedup == pytest.approx(10.0)


def test_failures_are_named_under_the_table_and_missing_devices_once_per_report():
    failed = cnn("gpu", 1024, 0, 0)
    failed = BenchResult(**{**failed.to_json(), "outcome": "failed", "error": "OOM", "samples": ()})
    tables = report.build_tables([cnn("cpu", 1024, 20.0, 300.0), failed, matmul("cpu", 0.5)])
    notes = report.table_notes(tables[0])
    assert notes == ["failed: batch 1024 on gpu: OOM"]
    assert "failed" in report.speedup_table(tables[0])
    assert report.missing_line({"tpu": "none"}) == "not measured: tpu: none"
    markdown = report.to_markdown(tables, missing={"tpu": "no TPU: none"})
    assert markdown.count("no TPU: none") == 1
    assert report.to_json(tables, missing={"tpu": "x"})["missing_devices"] == {"tpu": "x"}


def test_tables_fit_100_columns_even_with_long_names():
    long_id = "a-very-long-parameter-id-that-nobody-would-want-to-read-in-full-" * 2
    results = [
        result("matmul", kind, {"metric": "tflops", "unit": "TFLOP/s", "tflops": 1.5, "cold_s": 1},
               ids=long_id)
        for kind in ("cpu", "gpu", "tpu")
    ]  # fmt: skip
    results = [BenchResult(**{**r.to_json(), "params": {"accelerator": r.kind, "variant": long_id}})
               for r in results]  # fmt: skip
    (table,) = report.build_tables(results)
    text = report.speedup_table(table)
    assert max(len(line) for line in text.splitlines()) <= report.MAX_WIDTH
    assert "variant=a-very-long" in text


def test_cross_table_shows_each_batch_size_per_device_in_order():
    results = [cnn(k, b, e, s) for b in (1024, 256) for k, e, s in (("gpu", 4, 79), ("tpu", 2, 37))]
    results += [cnn(k, 512, e, s) for k, e, s in (("gpu", 5, 82), ("tpu", 3, 58))]
    (table,) = report.build_tables(results)
    lines = report.cross_table(table).splitlines()
    assert lines[0].split() == [
        "batch",
        *["gpu", "epoch", "s", "tpu", "epoch", "s", "gpu", "step", "ms", "tpu", "step", "ms"],
    ]
    assert [line.split()[0] for line in lines[2:]] == ["256", "512", "1024"]
    assert lines[4].split()[1:] == ["4.00", "2.00", "79.0", "37.0"]


def test_no_cross_table_when_nothing_varies():
    (table,) = report.build_tables([matmul("cpu", 0.5), matmul("gpu", 10.0)])
    assert report.cross_table(table) is None


# ---------------------------------------------------------------- comparison


ROWS = [
    comparison("test_a", "unchanged", 0.3, -1.0, 1.6),
    comparison("test_b", "faster", -12.0, -14.0, -10.0),
    comparison("test_c", "slower", 8.0, 5.5, 10.5, regression=True),
    comparison("test_d", "new"),
    comparison("test_e", "missing", note="not run this time"),
    comparison("test_f", "inconclusive", 4.0, -1.0, 9.0),
]


def test_comparison_puts_regressions_first_and_marks_them():
    lines = report.comparison_table(ROWS).splitlines()
    assert lines[2].startswith("test_c")
    assert lines[2].split()[-1] == "SLOWER"
    assert "+8.0% [+5.5, +10.5]" in lines[2]
    assert [line.split()[0] for line in lines[3:]] == [
        "test_f", "test_b", "test_a", "test_d", "test_e",
    ]  # fmt: skip
    assert report.comparison_notes(ROWS) == ["test_e on cpu: not run this time"]


def test_a_calibrated_change_says_so_beside_the_raw_times_it_disagrees_with():
    row = replace(comparison("test_k", "inconclusive", 12.0, -28.0, 75.0), mode="calibrated")
    row = replace(row, baseline=0.052, current=0.071, machine_pct=17.2)  # raw: +37 %
    line = report.comparison_table([row]).splitlines()[2]
    assert "+12% [-28, +75] (raw +37%)" in line
    assert "(raw" not in report.comparison_table(ROWS)  # raw and paired rows: as they are


def test_long_names_that_share_a_start_stay_apart_and_no_empty_device_column_takes_room():
    # Seen before: "test_train_loop" and "test_train_loo..." for test_train_loop_pedantic, beside
    # an empty device column, where a calibrated change cell made the table wide.
    names = ["test_train_loop_in_a_custom_loop", "test_train_loop_in_a_custom_loop_pedantic"]
    rows = [
        replace(comparison(name, "inconclusive", 2.0, -42.0, 79.0), kind="", mode="calibrated")
        for name in names
    ]
    text = report.comparison_table([replace(r, machine_pct=1.9) for r in rows])
    assert "device" not in text.splitlines()[0]
    shown = [line.split()[0] for line in text.splitlines()[2:]]
    assert len(set(shown)) == 2 and all(name.endswith(("loop", "pedantic")) for name in shown)
    assert max(len(line) for line in text.splitlines()) <= report.MAX_WIDTH
    assert "device" in report.comparison_table(ROWS).splitlines()[0]  # rows on a device


def test_the_comparison_follows_the_terminal_width_and_never_cuts_names_to_nothing():
    # Seen before: 100 columns whatever the terminal, names cut to "test_a…mory)".
    names = [f"TestGroup::test_a_long_benchmark_name[cpu-{n}]" for n in (64, 512)]
    rows = [replace(comparison(name, "unchanged", 0.4, -1.2, 2.0), kind="cpu") for name in names]
    memory = replace(rows[0], name=f"{rows[0].name} (memory)", metric="memory", verdict="faster")
    rows.append(memory)
    shown = [f"{names[0]} (memory)", names[1], names[0]]  # the table's order: changes first
    wide = report.comparison_table(rows, width=200).splitlines()
    assert [line.split("  ")[0].strip() for line in wide[2:]] == shown
    assert wide[2].split()[-1] == "smaller"  # less memory is not "faster"
    head, blocks = report.comparison_blocks(rows, width=60)
    assert all(len(line) <= 60 for line in head + [block[1] for block in blocks])
    assert [block[0] for block in blocks] == shown  # whole names, each above its figures
    assert head[0] == "benchmark" and "baseline" in head[1]  # and their heading above theirs


def test_a_slowdown_within_the_threshold_is_said_not_shouted():
    tolerated = comparison("test_h", "slower", 3.0, 2.6, 3.5)  # sure, but below the threshold
    line = report.comparison_table([tolerated]).splitlines()[2]
    assert line.split()[-1] == "slower"
    assert "⚠️" not in report.comparison_table([tolerated], "github")


def test_a_row_judged_against_a_threshold_of_its_own_says_it_beside_its_verdict():
    # Trial 33: +7 % "unchanged" under a 5 % gate, its marker's 10 % said nowhere in the table.
    rows = [
        replace(comparison(name, "unchanged", change, -1.0, 8.0), threshold_pct=pct)
        for name, change, pct in (("test_a", 1.0, 5.0), ("test_b", 2.0, 5.0), ("test_c", 7.0, 10.0))
    ]
    for fmt in ("simple", "github"):
        lines = report.comparison_table(rows, fmt).splitlines()[2:]
        marked = [line for line in lines if "(gate " in line]
        assert len(marked) == 1 and "test_c" in marked[0] and "unchanged (gate 10%)" in marked[0]
    # Two thresholds as common as each other: neither is "the" gate's, so each row says its own.
    tie = report.comparison_table(rows[1:]).splitlines()[2:]
    assert sorted(line.split("(gate ")[1] for line in tie) == ["10%)", "5%)"]
    # One threshold for every row (the session's): nothing to mark.
    assert "(gate " not in report.comparison_table(rows[:2])


def test_comparison_summary_counts_every_verdict():
    assert report.comparison_summary(ROWS) == (
        "1 slower, 1 faster, 1 unchanged, 1 inconclusive, 1 new, 1 missing"
    )
    with_incompatible = [*ROWS, comparison("test_g", "incompatible", note="dtype differs")]
    assert report.comparison_summary(with_incompatible).endswith(", 1 incompatible")


def test_the_counts_lines_and_the_gate_count_the_same_rows():
    from pytest_tpu.gate.compare import Row
    from pytest_tpu.gate.lines import comparison_lines, gate_lines
    from pytest_tpu.summary import from_gate_row

    # Trial 22: "7 inconclusive, 2 unchanged, 1 faster" above the table, "1 faster, 0 unchanged,
    # 7 inconclusive; memory: 2 unchanged" below it, and "5 inconclusive" in the gate line: the
    # memory rows counted with time above, the first calls with time below.
    def row(metric: str, verdict: str) -> Row:
        return Row("t.py::test_a", "compared", metric=metric, verdict=verdict, change=0.0)

    rows = [row("time", "inconclusive"), row("time", "faster"), row("compile", "inconclusive")]
    rows.append(row("memory", "unchanged"))
    [opening] = comparison_lines("base.json", rows)
    assert opening == (
        "compared with baseline base.json: 1 faster, 1 inconclusive; compile: 1 inconclusive; "
        "memory: 1 unchanged (table below)"
    )
    # The same counts in the same order, whatever order the rows came in (new-user trial 69).
    assert comparison_lines("base.json", rows[::-1]) == [opening]
    closing = report.comparison_summary([from_gate_row(r) for r in rows])
    assert closing == (
        "0 slower, 1 faster, 0 unchanged, 1 inconclusive, 0 new, 0 missing; compile: 1 "
        "inconclusive; memory: 1 unchanged"
    )
    [gate] = gate_lines(rows[:2], 5.0, "base")
    assert "; 1 inconclusive" in gate
    # The JSON counts as the terminal does (trial 34: its counts lumped the first call in).
    data = report.to_json([], [from_gate_row(r) for r in rows], "base")["comparison"]
    assert (data["counts"]["inconclusive"], data["counts"]["faster"]) == (1, 1)
    assert data["metric_counts"]["compile"]["inconclusive"] == 1
    assert data["metric_counts"]["memory"]["unchanged"] == 1
    assert sum(data["counts"].values()) == 2


# ---------------------------------------------------------------- files


def test_markdown_has_a_github_table_per_workload_and_the_comparison():
    tables = report.build_tables([matmul("cpu", 0.53), matmul("gpu", 15.7)])
    text = report.to_markdown(tables, ROWS, "main")
    assert text.startswith("## pytest-tpu benchmarks\n")
    assert "### test_matmul: FLOP/s in TFLOP/s (higher is better), speedup vs cpu" in text
    assert "| N=2048 float32 | 0.530 ±2% |" in text
    assert "## Comparison with baseline `main`" in text
    assert "⚠️ **SLOWER**" in text
    assert "Head:" not in text  # a stored baseline's comparison names no commit it was not told
    # --compare-ref names both commits (trial 35: the head's was nowhere in the report).
    head = "1a2b3c4d5e6f with uncommitted changes"
    text = report.to_markdown(tables, ROWS, "HEAD~1 (0f9e8d7c6b5a, same job)", head=head)
    assert "## Comparison with baseline `HEAD~1 (0f9e8d7c6b5a, same job)`\n\nHead: `1a2b" in text
    # Its round times say why they can differ from the comparison's current column.
    plain = [RoundTime("test_sort", "passed", 30, 1, 0.026, 0.025, 0.027)]
    turns = report.to_markdown([], ROWS, "HEAD~1", plain=plain, head=head)
    assert "taken in turns with the base's process; the comparison below times" in turns
    assert "taken in turns" not in report.to_markdown([], ROWS, "main", plain=plain)


def test_markdown_explains_intervals_under_the_comparison_not_the_round_times():
    # Trial 75: "[a, b]: 95% intervals of a change", printed under the round times' table above
    # the comparison's heading, read as a legend of the round times' own intervals.
    plain = [RoundTime("test_sort", "passed", 30, 1, 0.026, 0.025, 0.027)]
    text = report.to_markdown([], ROWS, "HEAD~1", plain=plain, head="1a2b3c4d5e6f")
    heading = text.index("## Comparison with baseline")
    assert text.index("[a, b]: 95% intervals of a change") > heading
    assert text.index("### Round times") < heading
    tables = report.build_tables([matmul("cpu", 0.53), matmul("gpu", 15.7)])
    text = report.to_markdown(tables, ROWS, "main")
    spread = text.index("±: the rounds' spread")
    assert spread < text.index("## Comparison with baseline") < text.index("[a, b]: 95%")


def test_markdown_says_so_when_nothing_ran():
    assert "No benchmark ran." in report.to_markdown([])


def test_markdown_of_a_comparison_without_speedup_tables_does_not_say_nothing_ran():
    # benchmark(fn) tests without the accelerator fixture make no speedup table, but they ran
    text = report.to_markdown([], ROWS, "main")
    assert "No benchmark ran" not in text
    assert "## Comparison with baseline `main`" in text


def test_a_long_note_is_shown_whole_and_says_nothing_twice():
    why = (
        "cannot resolve a 5.0% change here: the smallest slowdown this comparison catches 4 "
        "times in 5 is 37.5% (noise: 3 saved runs; machine drift -1.1% allowed for)"
    )
    row = dataclasses.replace(
        comparison("test_g", "inconclusive", 18.0, 1.0, 38.0, note=why),
        mode="raw",
        noise_source="3 saved runs; machine drift -1.1% allowed for",
        detectable_pct=37.5,
    )
    (note,) = report.comparison_notes([row])
    assert note == f"test_g on cpu: {why}; raw"  # whole: the detectable change is at its end
    assert note.count("3 saved runs") == 1 and note.count("37.5%") == 1


def test_a_terminal_prints_a_note_a_clause_a_line_and_only_where_the_table_needs_one():
    # Trial 69: notes of 600-900 characters on one line, one for every row, most of them
    # unchanged rows saying how they were measured.
    why = (
        "measured again with 4x the rounds in a new pair of processes (the session's first pair "
        "read -1.0% [-24.4%, +29.6%]); cannot resolve a 5.0% change here: the smallest slowdown "
        'this comparison catches 4 times in 5 is 9.0% (noise: 120 paired rounds; "a; b"); about '
        "375 paired rounds would resolve 5.0%"
    )
    open_row = comparison("test_g", "inconclusive", 0.3, -4.7, 5.6, note=why)
    same = measured(comparison("test_s", "unchanged", 0.1, -1.0, 1.2), "paired", "one pair", 2.4)
    assert report.terminal_notes([open_row, same], every=False) == [
        "test_g on cpu:",
        "    measured again with 4x the rounds in a new pair of processes (the session's first "
        "pair read -1.0% [-24.4%, +29.6%])",
        "    cannot resolve a 5.0% change here: the smallest slowdown this comparison catches 4 "
        'times in 5 is 9.0% (noise: 120 paired rounds; "a; b")',
        "    about 375 paired rounds would resolve 5.0%",
        "(1 note(s) on unchanged rows not shown: -v prints them)",
    ]
    every = report.terminal_notes([open_row, same], every=True)
    assert every[-1] == "test_s on cpu: paired, noise: one pair, detects 2.4%"
    assert "".join(every).count("not shown") == 0
    # Two clauses read as one sentence, on one line.
    base = comparison("test_b", "base failed", note="failed on the base side (x; y); z stands")
    assert report.terminal_notes([base], every=False) == [f"test_b on cpu: {base.note}"]
    # Whole and on one line in the files, whatever the terminal prints.
    assert report.comparison_notes([open_row])[0] == f"test_g on cpu: {why}"


def test_a_long_line_on_new_pairs_prints_its_outcome_first_and_the_rest_a_clause_a_line():
    # Trial 69 read this as one line, its outcome at the end.
    line = (
        "re-measured 1 regression(s) in a new pair of processes (regressions: 1 confirmed, 0 "
        "withdrawn); 1 measured by a third pair; 1 that three pairs left open measured by 2 more "
        "[32 s]"
    )
    assert progress_lines(line) == [
        "re-measured 1 regression(s) in a new pair of processes (regressions: 1 confirmed, 0 "
        "withdrawn) [32 s]",
        "    1 measured by a third pair",
        "    1 that three pairs left open measured by 2 more",
    ]
    # Two clauses read as one sentence; a line without seconds keeps what it has.
    short = "re-measured 1 regression(s) in a new pair of processes (x; y); 1 more [5 s]"
    assert progress_lines(short) == [short]
    assert progress_lines("a; b; c (d; e)") == ["a", "    b", "    c (d; e)"]


def test_an_unchanged_row_of_the_tail_statistic_keeps_its_note_at_any_verbosity():
    # Its figures are not what the other rows' are: the table alone reads them wrong.
    row = comparison("test_t", "unchanged", 0.2, -1.0, 1.4)
    (note,) = report.terminal_notes([dataclasses.replace(row, statistic=TAIL)], every=False)
    assert note.startswith(f"test_t on cpu: baseline, current and change: the {TAIL}")


def test_a_same_job_note_does_not_end_in_a_dangling_mode():
    why = (
        "cannot resolve a 5.0% change here: the smallest slowdown this comparison catches 4 "
        "times in 5 is 6.1% (noise: 196 paired rounds in this job, one pair of processes)"
    )
    row = dataclasses.replace(
        comparison("test_p", "inconclusive", 2.5, -1.1, 6.2, note=why),
        mode="paired",
        noise_source="196 paired rounds in this job, one pair of processes",
        detectable_pct=6.1,
    )
    (note,) = report.comparison_notes([row])
    assert note == f"test_p on cpu: {why}"  # the reason names the paired rounds already


def measured(row: ComparisonRow, mode: str, noise: str, detectable: float) -> ComparisonRow:
    """``row`` with how it was measured, at a 5 % threshold."""
    return dataclasses.replace(
        row, mode=mode, noise_source=noise, detectable_pct=detectable, threshold_pct=5.0
    )


def test_an_unchanged_row_says_what_it_rests_on_beside_a_detectable_past_the_threshold():
    # Trial 29: "-0.4% [-4.1, +3.4] unchanged" beside "detects 6.6%" at 5 % read as a
    # contradiction; the interval rules the threshold out, "detects" is what fails 4 times in 5.
    row = measured(comparison("test_py", "unchanged", -0.4, -4.1, 3.4), "raw", "5 saved runs", 6.6)
    (note,) = report.comparison_notes([row])
    assert note == (
        "test_py on cpu: raw, noise: 5 saved runs, detects 6.6% 4 times in 5; unchanged: its 95% "
        "interval stays within the threshold"
    )
    # Under the threshold there is nothing to reconcile, and nothing more is said.
    (note,) = report.comparison_notes([dataclasses.replace(row, detectable_pct=2.2)])
    assert note == "test_py on cpu: raw, noise: 5 saved runs, detects 2.2%"
    # Trial 38: an inconclusive row (an improvement left open) beside a gate line counting it
    # as "ruling a slowdown of its threshold out".
    open_faster = measured(
        comparison("test_py", "inconclusive", -0.5, -5.4, 4.6), "paired", "5 pairs", 9.6
    )
    (note,) = report.comparison_notes([open_faster])
    assert note.endswith(
        "detects 9.6% 4 times in 5; its 95% interval rules a slowdown of the threshold out, not "
        "a speed-up of it (-5.4%)"
    )
    # Trial 44: without those last words, "inconclusive" had no reason beside it.
    within = dataclasses.replace(open_faster, ci_low=-4.9)
    (note,) = report.comparison_notes([within])
    assert note.endswith("its 95% interval rules a slowdown of the threshold out")
    # One pair of processes must rule out more than its interval does: its note says so.
    one_pair = dataclasses.replace(
        open_faster, noise_source="80 paired rounds, one pair of processes"
    )
    (note,) = report.comparison_notes([one_pair])
    assert note.endswith("detects 9.6%")
    # One whose interval reaches the threshold says only what it detects.
    (note,) = report.comparison_notes([dataclasses.replace(open_faster, ci_high=5.2)])
    assert note.endswith("detects 9.6%")


def test_an_inconclusive_row_gives_its_detectable_change_whatever_its_interval_reads():
    # Trial 33: -0.3% [-3.2%, +2.6%] inconclusive, with a detectable 2.6 %, gave no "detects":
    # the interval's "+2.6%" was taken for the figure already said.
    note = "-0.3% [-3.2%, +2.6%] in one pair of processes: a slowdown of its threshold (5.0%) ..."
    row = measured(
        comparison("test_mm", "inconclusive", -0.3, -3.2, 2.6, note),
        "paired",
        "307 paired rounds in this job, one pair of processes",
        2.6,
    )
    (said,) = report.comparison_notes([row])
    assert said.endswith(", detects 2.6%"), said
    # ... nor the threshold's figure, where they happen to be equal.
    (said,) = report.comparison_notes([dataclasses.replace(row, detectable_pct=5.0)])
    assert said.endswith(", detects 5.0%"), said
    # A note that gives it ("they catch 5.8% 4 times in 5") is not repeated.
    coarse = "+0.1% [-4.5%, +4.9%] in one pair of processes, whose rounds ... (they catch 5.8% 4"
    row = dataclasses.replace(row, note=coarse + " times in 5): ...", detectable_pct=5.8)
    (said,) = report.comparison_notes([row])
    assert "detects" not in said and said.count("5.8%") == 1, said


def test_json_keeps_raw_numbers_and_counts():
    tables = report.build_tables([matmul("cpu", 0.53), matmul("gpu", 15.7)])
    data = json.loads(json.dumps(report.to_json(tables, ROWS, "main")))
    workload = data["workloads"][0]
    assert workload["workload"] == "test_matmul"
    assert workload["unit"] == "TFLOP/s"
    gpu = workload["rows"][0]["devices"]["gpu"]
    assert gpu["value"] == 15.7
    assert gpu["speedup"] == pytest.approx(15.7 / 0.53)
    assert gpu["cold"] == 2.0
    assert data["comparison"]["counts"]["slower"] == 1
    assert data["comparison"]["rows"][0]["verdict"] == "slower"
    assert data["comparison"]["interval_pct"] == 95  # what ci_low..ci_high bound, in the file


# ---------------------------------------------------------------- plot


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<?xml")])
@pytest.mark.usefixtures("matplotlib_path")
def test_plot_writes_a_picture(tmp_path, suffix, magic):
    from pytest_tpu import plot

    tables = report.build_tables([matmul("cpu", 0.53), matmul("gpu", 15.7), cnn("cpu", 64, 9, 3)])
    path = tmp_path / f"report{suffix}"
    plot.draw(path, tables, ROWS)
    assert path.read_bytes().startswith(magic)


@pytest.mark.usefixtures("matplotlib_path")
def test_plot_of_an_empty_session_is_still_a_picture(tmp_path):
    from pytest_tpu import plot

    plot.draw(tmp_path / "empty.svg", [], None)
    assert "No benchmark ran" in (tmp_path / "empty.svg").read_text()


def inference(kind, batch, rate, p50):
    extra = {"metric": "samples_per_s", "unit": "samples/s", "higher_is_better": True}
    extra |= {"samples_per_s": rate, "latency_p50_ms": p50, "latency_p90_ms": p50 * 1.2}
    extra |= {"batch_size": batch, "cold_s": 2.0}
    return result("inference", kind, extra, ids=str(batch), samples=(0.1, 0.1, 0.1))


def test_inference_tables_show_throughput_and_latency():
    results = [inference("cpu", b, r, p) for b, r, p in ((1, 125.0, 8.0), (64, 900.0, 68.0))]
    results += [
        inference("tpu", b, r * 20, p / 10) for b, r, p in ((1, 125.0, 8.0), (64, 900.0, 68.0))
    ]
    (table,) = report.build_tables(results)
    assert table.title.startswith("test_inference: throughput in samples/s (higher is better)")
    text = report.speedup_table(table)
    assert "tpu/cpu" in text and " 20x " in text and "cpu cold" in text
    cross = report.cross_table(table)
    assert cross is not None
    header = cross.splitlines()[0].split()
    assert header.count("samples/s") == 2  # once per device, never doubled with its unit
    assert "p50" in header and "ms" in header


@pytest.mark.parametrize(
    ("low", "where"),
    [(0.165, "lies beyond"), (0.045, "reaches past")],
)
def test_a_regression_s_note_says_whether_its_whole_interval_is_past_the_threshold(low, where):
    from pytest_tpu.gate.compare import Row
    from pytest_tpu.summary import from_gate_row

    row = Row(
        nodeid="test_a.py::test_mlp",
        status="compared",
        verdict="slower",
        change=0.19,
        low=low,
        high=0.21,
        confidence=0.9999,
        regression=True,
        threshold=0.05,
    )
    # Seen: "regression (99.9% sure it is slower, not shown within the threshold)" on +19 %.
    note = f"regression (99.9% sure it is slower; its interval {where} the threshold)"
    assert from_gate_row(row).note.startswith(note)


def test_a_table_timed_with_another_clock_than_the_wall_s_names_it():
    # Trial 15: --benchmark-timer=time.process_time tables read as wall-clock times (an XLA call
    # of 23 ms showed 45 ms, the CPU time of both its threads).
    wall, cpu = (
        replace(matmul("cpu", 0.5), options={"timer": timer})
        for timer in ("perf_counter", "process_time")
    )
    (table,) = report.build_tables([wall])
    assert "timer" not in table.title
    (table,) = report.build_tables([cpu])
    assert table.title.endswith(", timer process_time")


def test_unchanged_beside_an_interval_that_excludes_zero_says_it_is_not_no_change():
    # New-user trial 70: a real slowdown of about 5 % read "+4.7% [+0.7, +8.9] unchanged" at a
    # 10 % gate, and unchanged code "-4.6% [-7.9, -1.2] unchanged", both read as "no change".
    slower = comparison("test_train", "unchanged", 4.7, 0.7, 8.9)
    faster = comparison("test_infer", "unchanged", -4.6, -7.9, -1.2)
    around = comparison("test_numpy", "unchanged", 0.2, -1.9, 2.3)
    lines = report.terminal_notes([slower, around], every=False)
    assert (
        "unchanged: within the threshold either way, not no change (the interval of test_train "
        "on cpu excludes zero)"
    ) in lines
    both = report.terminal_notes([slower, faster, around], every=True)
    assert (
        "unchanged: within the threshold either way, not no change (the intervals of test_infer "
        "on cpu and test_train on cpu exclude zero)"
    ) in both
    # An interval around zero, or a verdict other than unchanged, needs no such line.
    assert not [line for line in report.terminal_notes([around], every=False) if "zero" in line]
    slow = comparison("test_s", "inconclusive", 4.7, 0.7, 8.9)
    assert not [line for line in report.terminal_notes([slow], every=False) if "zero" in line]
    # The Markdown report (a pull-request comment, $GITHUB_STEP_SUMMARY) says it too.
    markdown = report.to_markdown([], [slower, around], "HEAD~1 (same job)")
    assert (
        "- unchanged: within the threshold either way, not no change (the interval of "
        "test_train on cpu excludes zero)"
    ) in markdown.splitlines()
    assert "not no change" not in report.to_markdown([], [around], "HEAD~1 (same job)")
