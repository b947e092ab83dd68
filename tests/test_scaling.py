"""The scaling table: pure builder, and replicas on virtual CPUs through the plugin."""

from __future__ import annotations

import pytest

from pytest_tpu import scaling
from pytest_tpu.scaling import Point


def _point(scale: int, throughput: float, axis: str = "workers") -> Point:
    return Point("cnn[batch_size=256]", "cpu", axis, scale, throughput, "samples/s")


def test_efficiency_is_relative_to_the_smallest_scale():
    rows = scaling.build([_point(4, 300.0), _point(1, 100.0), _point(2, 180.0)])
    assert [row.scale for row in rows] == [1, 2, 4]
    assert [round(row.speedup, 2) for row in rows] == [1.0, 1.8, 3.0]
    assert [round(row.efficiency) for row in rows] == [100, 90, 75]


def test_base_need_not_be_one():
    rows = scaling.build([_point(2, 200.0), _point(8, 400.0)])
    assert [round(row.efficiency) for row in rows] == [100, 50]


def test_single_scale_series_and_bad_points_are_left_out():
    points = [_point(2, 10.0), _point(1, 0.0), Point("lstm", "cpu", "replicas", 1, 5.0, "x")]
    assert scaling.build(points) == []


def test_series_are_kept_apart_by_workload_device_and_axis():
    points = [
        _point(1, 1.0),
        _point(2, 2.0),
        _point(1, 1.0, "replicas"),
        _point(2, 1.0, "replicas"),
    ]
    rows = scaling.build(points)
    assert [(row.axis, row.scale, round(row.efficiency)) for row in rows] == [
        ("replicas", 1, 100),
        ("replicas", 2, 50),
        ("workers", 1, 100),
        ("workers", 2, 100),
    ]


@pytest.mark.parametrize(
    ("extra", "samples", "expected"),
    [
        ({"samples_per_s": 500.0, "tflops": 1.0}, (), (500.0, "samples/s")),
        ({"tflops": 0.2}, (), (0.2, "TFLOP/s")),
        ({"us_per_sample": 250.0}, (), (4000.0, "samples/s")),
        ({}, (0.5, 0.25, 1.0), (2.0, "rounds/s")),
        ({}, (), None),
    ],
)
def test_throughput_prefers_recorded_rates(extra, samples, expected):
    assert scaling.throughput_of(extra, samples) == expected


def test_markdown_and_dicts_for_the_report():
    rows = scaling.build([_point(1, 100.0), _point(2, 150.0)])
    text = scaling.to_markdown(rows)
    assert text.startswith("## Scaling")
    assert "| cnn[batch_size=256] | cpu      | 2 workers |" in text
    assert "75%" in text
    assert scaling.to_dicts(rows)[1]["efficiency"] == pytest.approx(75.0)
    assert scaling.to_markdown([]) == ""


REPLICAS_TEST = """
import pytest
import tensorflow as tf

def test_strategy_has_two_replicas(tpu_strategy, accelerator):
    assert accelerator.replicas == 2
    assert tpu_strategy.num_replicas_in_sync == 2

@pytest.mark.parametrize("replicas", [1, 2])
def test_step(accelerator, benchmark, replicas):
    strategy = tf.distribute.MirroredStrategy(devices=list(accelerator.devices[:replicas]))
    per_replica = 64

    @tf.function
    def step():
        def replica():
            x = tf.ones((per_replica, 64))
            return tf.reduce_sum(tf.matmul(x, x, transpose_b=True))
        return strategy.reduce("sum", strategy.run(replica), axis=None)

    benchmark.pedantic(step, rounds=3, warmup_rounds=1)
    batch = per_replica * strategy.num_replicas_in_sync
    benchmark.extra_info["replicas"] = strategy.num_replicas_in_sync
    benchmark.extra_info["samples_per_s"] = batch / benchmark.stats.stats.median
"""


def test_replicas_on_virtual_cpus_give_a_scaling_table(pytester: pytest.Pytester):
    pytester.makepyfile(test_replicas=REPLICAS_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "pytest_tpu.cluster", "-p", "no:cacheprovider", "--tpu-virtual-cpus=2", timeout=180
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*pytest-tpu scaling*",
            "workload*device*scale*throughput*unit*speedup*efficiency",
            "test_step*cpu*1 replica *samples/s*1.00x*100%",
            "test_step*cpu*2 replicas *samples/s*x*%",
        ]
    )
