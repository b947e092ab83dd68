"""The calibration kernel each benchmark gets: TensorFlow's only for TensorFlow work."""

from __future__ import annotations

import json

import pytest

from pytest_tpu.gate import baseline as store
from pytest_tpu.gate.calibration import TF_MIN_ROUND_S
from pytest_tpu.gate.history import summarize
from pytest_tpu.results import BenchResult

NUMPY_KIND = "numpy:32x2"
TF_KIND = "tf:/device:CPU:0:128x4"
ARGS = ("-p", "no:cacheprovider", "--benchmark-disable-gc", "--save-baseline=main")

# Every benchmark of a few milliseconds a round, in a session that imported TensorFlow: by size
# alone each would get TensorFlow's kernel. TensorFlow's come first, so its thread pools are
# there to wake while the others run.
MIXED = """
import numpy as np
import tensorflow as tf

X = tf.random.stateless_normal((384, 384), seed=(1, 2)) / 20
W = tf.Variable(tf.random.stateless_normal((384, 384), seed=(3, 4)) / 20)
VALUES = np.random.default_rng(0).standard_normal(2_000_000)

@tf.function
def chain(x):
    for _ in range(8):
        x = tf.tanh(tf.matmul(x, x))
    return tf.reduce_sum(x)

@tf.function
def train_step():  # returns nothing: TensorFlow's threads do the work
    with tf.GradientTape() as tape:
        x = X
        for _ in range(4):
            x = tf.tanh(tf.matmul(x, W))
        loss = tf.reduce_sum(x)
    W.assign_sub(0.001 * tape.gradient(loss, W))

def test_function(benchmark):
    benchmark.pedantic(lambda: chain(X).numpy(), rounds=5, warmup_rounds=1)

def test_train_step(benchmark):
    train_step()  # traced here: the benchmark's first call is a steady one
    benchmark.pedantic(train_step, rounds=5)

def test_predict(benchmark):
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(256)])
    data = np.ones((512, 64), "float32")
    benchmark.pedantic(model.predict, args=(data,), kwargs={"verbose": 0}, rounds=3)

def test_sort(benchmark):
    benchmark.pedantic(np.sort, args=(VALUES,), rounds=5, warmup_rounds=1)

def test_python(benchmark):
    benchmark.pedantic(lambda: sum(i * i for i in range(300_000)), rounds=5, warmup_rounds=1)
"""

SORT = """
import numpy as np
import tensorflow as tf

VALUES = np.random.default_rng(0).standard_normal(2_000_000)

def test_sort(benchmark):
    benchmark.pedantic(np.sort, args=(VALUES,), rounds=5, warmup_rounds=1)
"""


pytestmark = pytest.mark.usefixtures("private_device_lock")


def saved(pytester: pytest.Pytester) -> dict[str, dict]:
    """Each benchmark's latest saved run, by test name."""
    path = pytester.path / ".pytest-tpu" / "baselines" / "main.json"
    benchmarks = json.loads(path.read_text())["benchmarks"]
    return {b["name"]: b["pytest_tpu"]["history"][-1] for b in benchmarks}


def fastest_rounds(pytester: pytest.Pytester) -> dict[str, float]:
    """The fastest round of each benchmark (pytest-benchmark's own JSON), in seconds."""
    benchmarks = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    return {b["name"]: b["stats"]["min"] for b in benchmarks}


def test_only_tensorflow_work_gets_tensorflows_kernel(pytester):
    """New-user trial 27: a 5 ms np.sort in a TensorFlow process got TensorFlow's kernel,
    which swung 10 % between saved runs while the sort moved 2 %."""
    pytester.makepyfile(test_work=MIXED)
    result = pytester.runpytest_subprocess(*ARGS, "--benchmark-json=bench.json", timeout=300)
    result.assert_outcomes(passed=5)
    fastest = fastest_rounds(pytester)
    # Rounds of milliseconds: by size alone, each would get TensorFlow's kernel.
    assert min(fastest.values()) >= TF_MIN_ROUND_S
    kinds = {name: run["kernel_kind"] for name, run in saved(pytester).items()}
    assert kinds == {
        "test_function": TF_KIND,
        "test_train_step": TF_KIND,  # no tensor comes back: its threads tell
        "test_predict": TF_KIND,
        "test_sort": NUMPY_KIND,
        "test_python": NUMPY_KIND,
    }


@pytest.mark.untimed
def test_a_kernel_the_saved_runs_used_is_kept(pytester):
    """Baselines saved when a numpy sort got TensorFlow's kernel stay comparable: their ratios
    are to that kernel."""
    pytester.makepyfile(test_sort=SORT)
    nodeid = "test_sort.py::test_sort"
    runs = (summarize([0.01] * 5, [0.001] * 5, TF_KIND),)
    directory = pytester.path / ".pytest-tpu" / "baselines"
    store.save(
        directory,
        "main",
        [store.NewRun(BenchResult(nodeid, "test_sort", None, {}, {}, (0.01,) * 5), runs)],
        {},
    )
    result = pytester.runpytest_subprocess(*ARGS, timeout=300)
    result.assert_outcomes(passed=1)
    assert saved(pytester)["test_sort"]["kernel_kind"] == TF_KIND


@pytest.mark.untimed
def test_without_proc_a_tensorflow_process_chooses_by_size_as_before(pytester):
    """Where TensorFlow's threads cannot be seen (not Linux), a call that made no tensor may
    still be a tf.function that returns nothing: a round of milliseconds keeps TensorFlow's
    kernel, as before."""
    pytester.makepyfile(test_sort=SORT)
    pytester.makeconftest("from pytest_tpu import threads\nthreads.TASKS = '/nonexistent/task'\n")
    result = pytester.runpytest_subprocess(*ARGS, timeout=300)
    result.assert_outcomes(passed=1)
    assert saved(pytester)["test_sort"]["kernel_kind"] == TF_KIND
