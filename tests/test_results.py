"""What a benchmark leaves behind: its device fields in pytest-benchmark's JSON, and nothing
invented when measuring is switched off."""

from __future__ import annotations

import json

import pytest
from processes import NOT_REWRITTEN

DEVICE_BENCH = """
def test_sum(benchmark, accelerator):
    import tensorflow as tf

    with accelerator.scope():
        ones = tf.ones((64, 64))
    benchmark.pedantic(lambda: float(tf.reduce_sum(ones)), rounds=3)
"""


def test_device_fields_reach_pytest_benchmark_json(
    pytester: pytest.Pytester, tensorflow_in_process
):
    pytester.makepyfile(DEVICE_BENCH)
    result = pytester.runpytest("--benchmark-json=out.json", "--accelerator=cpu")
    result.assert_outcomes(passed=1)
    (entry,) = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    assert entry["extra_info"]["accelerator"] == "cpu"
    assert entry["extra_info"]["replicas"] == 1
    assert entry["extra_info"]["device"]


def test_disabled_benchmarks_are_not_reported_as_failures(pytester: pytest.Pytester):
    pytester.makepyfile(
        """
        def test_quick(benchmark):
            benchmark.extra_info.update(metric="time", unit="s")
            benchmark(sum, range(100))
        """
    )
    result = pytester.runpytest("--benchmark-disable", "--tpu-report=out.json")
    result.assert_outcomes(passed=1)
    assert "failed" not in result.stdout.str()
    assert json.loads((pytester.path / "out.json").read_text()).get("failed", []) == []


def test_a_benchmark_passed_on_rerun_counts_once_as_passed(pytester: pytest.Pytester):
    """pytest-rerunfailures logs the failed attempt as "rerun": not the test's outcome."""
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(
        """
        import pathlib

        def test_flaky(benchmark):
            benchmark(sum, range(100))
            marker = pathlib.Path("attempted")
            if not marker.exists():
                marker.touch()
                raise AssertionError("first attempt fails")
        """
    )
    # A short --benchmark-max-time: saving times the calibration kernel before each of a
    # microsecond call's many rounds, and this test is about the outcome, not the rounds.
    args = ("--reruns=1", "--save-baseline=main", "--benchmark-max-time=0.05")
    result = pytester.runpytest(*args, "-p", "no:cacheprovider", *NOT_REWRITTEN)
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    result.stdout.no_fnmatch_line("*left out*")
    result.stdout.fnmatch_lines(["saved baseline 'main': 1 benchmark in *"])


NOT_PLAIN_EXTRA_INFO = """
import numpy as np

def test_values(benchmark, accelerator):
    benchmark.extra_info["loss"] = np.float32(0.5)  # what tensor.numpy() returns
    benchmark.extra_info["steps"] = [np.int64(3), "x"]
    benchmark.extra_info["nan"] = float("nan")
    benchmark.extra_info["thing"] = object()
    benchmark.pedantic(sum, (range(10),), rounds=3)
"""


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_extra_info_that_is_not_json_is_converted_or_left_out(pytester: pytest.Pytester, xdist):
    pytester.makepyfile(test_values=NOT_PLAIN_EXTRA_INFO)
    args = ["-p", "no:cacheprovider", "--accelerator=cpu", "--save-baseline=main"]
    args.append("--tpu-report=out.json")
    result = pytester.runpytest_subprocess(*args, *(["-n", "2"] if xdist else []), timeout=300)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    output = result.stdout.str()
    assert (
        "pytest-tpu: test_values.py::test_values[cpu]: "
        "extra_info['nan'] is left out of the results: nan is not a JSON number"
    ) in output
    assert "extra_info['thing'] is left out of the results: a object is not JSON data" in output
    saved = json.loads((pytester.path / ".pytest-tpu/baselines/main.json").read_text())
    (entry,) = saved["benchmarks"]
    assert entry["extra_info"]["loss"] == 0.5
    assert entry["extra_info"]["steps"] == [3, "x"]
    assert "nan" not in entry["extra_info"] and "thing" not in entry["extra_info"]
    assert (pytester.path / "out.json").exists()
