"""A benchmark that raises a real TensorFlow error fails alone: the others are measured, saved,
compared and reported, and the failure is named with its reason."""

from __future__ import annotations

import json

import pytest

BENCHES = """
import pytest
import tensorflow as tf


def test_good(benchmark, accelerator):
    with accelerator.scope():
        x = tf.ones((32, 32))
    benchmark.extra_info.update(metric="time", unit="s")
    benchmark.pedantic(lambda: float(tf.reduce_sum(tf.matmul(x, x))), rounds=5)


def test_shape_error(benchmark, accelerator):
    with accelerator.scope():
        a, b = tf.ones((4, 5)), tf.ones((4, 5))
    benchmark.extra_info.update(metric="time", unit="s")
    benchmark.pedantic(lambda: float(tf.reduce_sum(tf.matmul(a, b))), rounds=5)
"""


def test_a_failing_benchmark_leaves_the_rest_measured_saved_and_reported(
    pytester, tensorflow_in_process
):
    # In process: two sessions skip two TensorFlow imports.
    pytester.makepyfile(BENCHES)
    result = pytester.runpytest("--save-baseline=main", "--tpu-report=out.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*left out (failed): *test_shape_error*InvalidArgumentError*",
            "failed: *InvalidArgumentError*",
        ]
    )
    baseline = json.loads((pytester.path / ".pytest-tpu/baselines/main.json").read_text())
    assert [entry["name"] for entry in baseline["benchmarks"]] == ["test_good[cpu]"]
    report = json.loads((pytester.path / "out.json").read_text())
    devices = [row["devices"]["cpu"] for table in report["workloads"] for row in table["rows"]]
    assert sorted(bool(cell["error"]) for cell in devices) == [False, True]

    compared = pytester.runpytest("--compare=main")
    compared.assert_outcomes(passed=1, failed=1)
    compared.stdout.fnmatch_lines(["*test_shape_error*failed in this run*"])
    assert compared.ret == pytest.ExitCode.TESTS_FAILED
