"""Slow calls in the tail: a change that slows some calls a lot fails the gate on the mean."""

from __future__ import annotations

import json
import math

import pytest
from test_compare_ref import commit, git

from pytest_tpu.gate.compare import Measured, Row, tail
from pytest_tpu.gate.lines import gate_lines
from pytest_tpu.gate.stats import TAIL, Change, paired_change, paired_mean_change
from pytest_tpu.options import REGRESSION_EXIT_CODE

# Every ``every``-th call does 6 times the work (a cache that misses now and then): the mean of
# all calls doubles, while four calls in five, and so the fastest half, are unchanged.
# Calls of 2 ms: same-job mode adds an untimed call before most of them (``WARM_BELOW_S``), where a
# fixed random sequence says, so the timed calls still meet the slow ones.
TEMPLATE = """
import itertools

EVERY = {every}
calls = itertools.count()


def work():
    slow = EVERY and next(calls) % EVERY == 0
    total = 0
    for i in range({slow} if slow else {normal}):
        total += i % 7
    return total


def test_fn(benchmark):
    benchmark(work)


def test_ped(benchmark):
    benchmark.pedantic(work, rounds=200, warmup_rounds=2)
"""


def tailed(every: int, normal: int = 40000, factor: int = 6) -> str:
    """The test file, every ``every``-th call ``factor`` times the work (``every=0``: none)."""
    return TEMPLATE.format(every=every, slow=factor * normal, normal=normal)


FAST = ["-p", "no:cacheprovider", "--benchmark-max-time=0.3"]


@pytest.mark.untimed  # the statistic on given rounds
def test_the_mean_of_paired_rounds_counts_slow_calls_the_middle_half_leaves_out():
    base = [1.0 + 0.01 * (i % 3) for i in range(200)]
    head = [b * (3.5 if i % 5 == 0 else 1.0) for i, b in enumerate(base)]
    pairs = list(zip(head, base, strict=True))
    located = paired_change([math.log(h / b) for h, b in pairs])
    mean = paired_mean_change(pairs)
    assert located is not None and abs(located.estimate) < 0.01
    assert mean is not None and mean.estimate == pytest.approx(0.5, abs=0.01)
    assert mean.low > 0.4 and mean.p_slower > 0.99


def report_rows(path):
    return {row["name"]: row for row in json.loads(path.read_text())["comparison"]["rows"]}


def test_a_stored_baseline_fails_slow_calls_in_the_tail_on_the_mean(pytester):
    pytester.makepyfile(test_bench=tailed(0))
    for _ in range(5):  # the default history: the mean's spread between sessions is measured
        assert pytester.runpytest_subprocess(*FAST, "--save-baseline=main").ret == 0
    report = pytester.path / "report.json"
    same = pytester.runpytest_subprocess(
        *FAST, "--compare=main", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    assert same.ret == 0, same.stdout.str()
    assert all(row["statistic"] != TAIL for row in report_rows(report).values())

    # The mean grows sevenfold: on CI the saved sessions once ran every call 1.6 times slower
    # than the compared one (medians 2.3 ms against 1.4 ms), and a doubled mean then read +30 %;
    # under heavier load the five saved sessions' means spread so widely that a tripled mean was
    # not 99 % sure (both rows inconclusive, machine -15 %, they caught 52 % and 73 %).
    pytester.makepyfile(test_bench=tailed(5, factor=31))
    result = pytester.runpytest_subprocess(
        *FAST, "--compare=main", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    if (
        result.ret == 0
        and "copied memory more slowly than in the saved runs" in result.stdout.str()
    ):
        # A host copying memory far more slowly than when the runs were saved holds a slowdown
        # back, and says so (gate.bandwidth; a CI run, twice in a row: copies +53 % and +68 %,
        # 99 % sure, both rows "held back by the machine"). The tail's mean is still what the
        # rows measured, sevenfold.
        held = [
            row for row in report_rows(report).values() if "held back by the machine" in row["note"]
        ]
        assert held and all(row["statistic"] == TAIL for row in held), held
        assert all(200 < row["change_pct"] < 1200 for row in held), held
        return
    assert result.ret == REGRESSION_EXIT_CODE, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"REGRESSION test_bench.py::test_*: time ({TAIL}) +*% vs 'main' *confirmed*"]
    )
    result.stdout.fnmatch_lines(["*+*% [[]*[]] (mean)*SLOWER*"])  # the table marks it
    # Both styles' means tripled; a benchmark whose saved sessions' means spread widely may be
    # left inconclusive (seen on CI: the pedantic one, -7 % [-30, +23]), never passed as unchanged.
    rows = report_rows(report)
    found = [rows[f"test_bench.py::{name}"] for name in ("test_fn", "test_ped")]
    assert all(row["verdict"] in ("slower", "inconclusive") for row in found), found
    for on_mean in (row for row in found if row["regression"]):
        assert on_mean["statistic"] == TAIL
        assert 200 < on_mean["change_pct"] < 1200  # the mean grew sevenfold; a wide interval
        # Its baseline and current are the means, the statistic of its change.
        ratio = on_mean["current"] / on_mean["baseline"]
        assert ratio == pytest.approx(1 + on_mean["change_pct"] / 100)


def test_a_same_job_comparison_fails_slow_calls_in_the_tail_on_the_paired_means(pytester):
    git(pytester.path, "init", "-q")
    git(pytester.path, "config", "user.email", "t@example.com")
    git(pytester.path, "config", "user.name", "t")
    commit(pytester, "base", test_bench=tailed(0))
    commit(pytester, "a miss every 5th call", test_bench=tailed(5))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        *FAST, "--compare-ref=HEAD~1", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    assert result.ret == REGRESSION_EXIT_CODE, result.stdout.str()
    result.stdout.fnmatch_lines([f"REGRESSION test_bench.py::test_ped: time ({TAIL}) +*%*"])
    on_mean = report_rows(report)["test_bench.py::test_ped"]
    assert on_mean["statistic"] == TAIL and on_mean["confirmed"] is True
    # +100 %, which paired rounds resolve closely: within 25 points quiet, +125.2 % once with
    # another timed test beside it (``make unit`` runs them two at a time).
    assert 60 < on_mean["change_pct"] < 150


def located(estimate: float, verdict: str, regression: bool = False) -> Row:
    """A compared time row on the gate's usual statistic, its interval +-2 points."""
    return Row(
        "test_x.py::test_x", "compared", verdict=verdict, regression=regression,
        change=estimate, low=estimate - 0.02, high=estimate + 0.02, threshold=0.05,
    )  # fmt: skip


def mean_change(estimate: float) -> Change:
    return Change(
        estimate, estimate - 0.1, estimate + 0.1, 0.9999, 0.2, 0.05, 7, "5 saved runs", True
    )


QUIET = (0.01, 0.02, 0.01, 0.01, 0.02)  # cores other processes took in the saved runs


@pytest.mark.untimed  # the rule on given figures
def test_a_tail_beside_a_neighbour_is_named_unresolved_with_the_mean_s_numbers():
    # Trial 19: a mean +74 % under a usual statistic of +3.9 %, beside a TensorFlow neighbour,
    # was explained but kept the +3.9 %: the gate's UNRESOLVED lines, which name rows past the
    # threshold by their change, left it out.
    busy = Measured(mean_change(0.74), "raw", None, 5, QUIET, 0.76)
    row = tail(
        located(0.039, "inconclusive"), busy, 0.05, {"base_value": 1.0, "current_value": 1.74}
    )
    assert (row.verdict, row.regression, row.statistic) == ("inconclusive", False, TAIL)
    assert row.change == pytest.approx(0.74) and "other processes took 0.76" in row.reason
    line = "\n".join(gate_lines([row], 5.0, "main"))
    assert f"UNRESOLVED test_x.py::test_x: time ({TAIL}) +74.0%" in line


@pytest.mark.untimed  # the rule on given figures
def test_the_mean_takes_over_only_where_the_usual_statistic_does_not_show_the_slowdown():
    quiet = Measured(mean_change(0.5), "raw", None, 5, QUIET, 0.01)
    values = {"base_value": 1.0, "current_value": 1.5}
    caught = tail(located(0.01, "unchanged"), quiet, 0.05, values)
    assert (caught.statistic, caught.verdict, caught.regression) == (TAIL, "slower", True)
    # Slow in every call: the usual statistic says so, and the row stays its own.
    uniform = located(0.45, "slower", regression=True)
    assert tail(uniform, quiet, 0.05, values) == uniform
    # A few percent on every call and +50 % on the mean: the mean is the size of it.
    undersold = tail(located(0.056, "slower", regression=True), quiet, 0.05, values)
    assert undersold.statistic == TAIL and undersold.change == pytest.approx(0.5)


def test_short_calls_slow_on_every_4th_call_are_not_hidden_by_the_untimed_calls(pytester):
    # Trial 19: an untimed call before every timed call under 1 ms made the timed calls every
    # other call, and a tf.function retracing every 40th call went unseen: `unchanged` on a mean
    # 57 % slower. The untimed calls now fall where a fixed random sequence says.
    git(pytester.path, "init", "-q")
    git(pytester.path, "config", "user.email", "t@example.com")
    git(pytester.path, "config", "user.name", "t")
    short = 2000  # 0.1 ms, and 0.6 ms every 4th call: same-job mode warms both
    commit(pytester, "base", test_bench=tailed(0, short))
    commit(pytester, "slow every 4th call", test_bench=tailed(4, short))
    args = ("--compare-ref=HEAD~1", "--fail-on-regression=5%", "-k", "test_fn")
    result = pytester.runpytest_subprocess(*FAST, *args)
    assert result.ret == REGRESSION_EXIT_CODE, result.stdout.str()
    result.stdout.fnmatch_lines([f"REGRESSION test_bench.py::test_fn: time ({TAIL}) +*%*"])
