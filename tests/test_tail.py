"""Slow calls in the tail: a change that slows some calls a lot fails the gate on the mean."""

from __future__ import annotations

import json
import math

import pytest
from test_compare_ref import commit, git

from pytest_tpu.gate.stats import TAIL, paired_change, paired_mean_change
from pytest_tpu.options import REGRESSION_EXIT_CODE

# Every ``every``-th call does 3.5 times the work (a cache that misses now and then): the mean
# of all calls grows by half, while four calls in five, and so the fastest half, are unchanged.
# Calls of milliseconds: same-job mode adds no untimed call before them (``WARM_BELOW_S``).
TAILED = """
import itertools

EVERY = {every}
calls = itertools.count()


def work():
    slow = EVERY and next(calls) % EVERY == 0
    total = 0
    for i in range(140000 if slow else 40000):
        total += i % 7
    return total


def test_fn(benchmark):
    benchmark(work)


def test_ped(benchmark):
    benchmark.pedantic(work, rounds=200, warmup_rounds=2)
"""
FAST = ["-p", "no:cacheprovider", "--benchmark-max-time=0.3"]


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
    pytester.makepyfile(test_bench=TAILED.format(every=0))
    for _ in range(5):  # the default history: the mean's spread between sessions is measured
        assert pytester.runpytest_subprocess(*FAST, "--save-baseline=main").ret == 0
    report = pytester.path / "report.json"
    same = pytester.runpytest_subprocess(
        *FAST, "--compare=main", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    assert same.ret == 0, same.stdout.str()
    assert all(row["statistic"] != TAIL for row in report_rows(report).values())

    pytester.makepyfile(test_bench=TAILED.format(every=5))
    result = pytester.runpytest_subprocess(
        *FAST, "--compare=main", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    assert result.ret == REGRESSION_EXIT_CODE, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"REGRESSION test_bench.py::test_ped: time ({TAIL}) +*% vs 'main' *confirmed*"]
    )
    rows = report_rows(report)
    tailed = rows["test_bench.py::test_ped"]
    assert tailed["statistic"] == TAIL and tailed["regression"] is True
    assert 25 < tailed["change_pct"] < 100  # the mean grew by half; the interval is wide
    # Its baseline and current are the means, the statistic of its change.
    assert tailed["current"] / tailed["baseline"] == pytest.approx(1 + tailed["change_pct"] / 100)


def test_a_same_job_comparison_fails_slow_calls_in_the_tail_on_the_paired_means(pytester):
    git(pytester.path, "init", "-q")
    git(pytester.path, "config", "user.email", "t@example.com")
    git(pytester.path, "config", "user.name", "t")
    commit(pytester, "base", test_bench=TAILED.format(every=0))
    commit(pytester, "a miss every 5th call", test_bench=TAILED.format(every=5))
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        *FAST, "--compare-ref=HEAD~1", "--fail-on-regression=5%", f"--tpu-report={report}"
    )
    assert result.ret == REGRESSION_EXIT_CODE, result.stdout.str()
    result.stdout.fnmatch_lines([f"REGRESSION test_bench.py::test_ped: time ({TAIL}) +*%*"])
    tailed = report_rows(report)["test_bench.py::test_ped"]
    assert tailed["statistic"] == TAIL and tailed["confirmed"] is True
    assert 35 < tailed["change_pct"] < 65  # +50 %, paired rounds resolve it closely
