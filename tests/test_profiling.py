"""``--tpu-profile-regressions``: a regressed benchmark re-run once under TensorFlow's profiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tpu import profiling

TINY_BENCH = """
import tensorflow as tf

def test_tiny(accelerator, benchmark):
    @tf.function
    def step(x):
        return tf.reduce_sum(tf.matmul(x, x))

    x = tf.ones((32, 32))
    benchmark.pedantic(step, args=(x,), rounds=3, warmup_rounds=1)
"""

# Stands in for the gate's verdict: this test "regressed", whatever its timings said.
FORCED_REGRESSION = """
def pytest_sessionfinish(session):
    from pytest_tpu.profiling import profile_regressions
    from pytest_tpu.results import results_key

    store = session.config.stash[results_key]
    before = [len(r.samples) for r in store.results]
    dirs = profile_regressions(session.config, [r.nodeid for r in store.results])
    after = [len(r.samples) for r in store.results]
    print(f"\\nPROFILED {' '.join(sorted(dirs))} rounds before={before} after={after}")
"""


def test_trace_dir_is_safe_and_unique(tmp_path: Path):
    a = profiling.trace_dir(tmp_path, "bench/test_x.py::test_a[cpu-256]")
    b = profiling.trace_dir(tmp_path, "bench/test_x.py::test_a[cpu-512]")
    assert a != b
    assert a.parent == tmp_path
    assert "/" not in a.name
    assert a.name.startswith("bench_test_x.py_test_a_cpu-256")


def test_forced_regression_leaves_a_tensorboard_trace(pytester: pytest.Pytester):
    pytester.makepyfile(test_tiny=TINY_BENCH)
    pytester.makeconftest(FORCED_REGRESSION)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--tpu-profile-regressions=prof", timeout=240
    )
    result.assert_outcomes(passed=1)
    # The profiled re-run never adds to, or replaces, this session's timings.
    result.stdout.fnmatch_lines(
        ["PROFILED test_tiny.py::test_tiny[[]cpu[]] rounds before=[[]3[]] after=[[]3[]]"]
    )
    result.stdout.fnmatch_lines(
        [
            "*pytest-tpu profiles of regressions*",
            "test_tiny.py::test_tiny[[]cpu[]]: tensorboard --logdir */prof/test_tiny.py_test_tiny_cpu-*",  # noqa: E501
        ]
    )
    traces = profiling.traces(pytester.path / "prof", "test_tiny.py::test_tiny[cpu]")
    assert len(traces) == 1
    assert traces[0].stat().st_size > 0


def test_nothing_is_profiled_without_the_option(pytester: pytest.Pytester):
    config = pytester.parseconfigure()
    assert profiling.profile_regressions(config, ["test_x.py::test_x"]) == {}
    assert not config.pluginmanager.has_plugin(profiling.PROFILE_PLUGIN_NAME)
