"""The workloads and the benchmark suite.

Pure parts (sizes, figures, data loading) are tested in this process. Anything that runs
TensorFlow runs in a fresh pytest process: the CPU can be split into virtual replicas only
before TensorFlow initialises, and this process must stay free of TensorFlow for the other tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_tpu.workloads import (
    DataNotFound,
    chain_steps,
    cifar10,
    default_jit_compile,
    epoch_figures,
    flops,
    imdb,
    inference_figures,
    mnist,
    padded_batch,
    padding_note,
    sequence_figures,
    sizes_for,
    step_figures,
    tflops,
    weather,
)
from pytest_tpu.workloads.sizes import SIZES

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


# --- figures and sizes -------------------------------------------------------------------------


def test_matmul_figures_count_two_flops_per_multiply_add():
    assert flops(1024, 3, 2) == 2 * 1024**3 * 3 * 2
    assert tflops(1024, 3, 2, 0.5) == pytest.approx(2 * 1024**3 * 3 * 2 / 0.5 / 1e12)


@pytest.mark.parametrize("n", [128, 1024, 8192])
def test_chain_length_matches_the_work_per_round(n):
    steps = chain_steps(n, 2.0**36)
    assert steps >= 2
    if flops(n, 1) < 2.0**35:  # room for at least two products: the rounding is what is left
        assert flops(n, steps) == pytest.approx(2.0**36, rel=0.5)


def test_epoch_and_step_figures_agree_with_each_other():
    epoch = epoch_figures(epoch_s=6.0, steps=50, batch=256)
    assert epoch["step_ms"] == pytest.approx(6.0 / 50 * 1e3)
    assert epoch["samples_per_s"] == pytest.approx(256 / (epoch["step_ms"] / 1e3))
    step = step_figures(round_s=0.4, steps=5, batch=64)
    assert step["step_ms"] == pytest.approx(80.0)
    assert step["us_per_sample"] == pytest.approx(step["step_ms"] * 1e3 / 64)


def test_sizes_grow_and_full_is_the_published_size():
    smoke, default, full = (sizes_for(name) for name in ("smoke", "default", "full"))
    assert smoke.cnn.samples < default.cnn.samples < full.cnn.samples == 60_000
    assert smoke.lstm.samples < default.lstm.samples < full.lstm.samples == 25_000
    assert max(smoke.matmul.ns) < max(default.matmul.ns) < max(full.matmul.ns)
    assert smoke.resnet.samples < default.resnet.samples < full.resnet.samples == 50_000
    assert smoke.timeseries.sequences < default.timeseries.sequences < full.timeseries.sequences
    assert full.timeseries.steps_per_round == 10  # a published epoch
    assert smoke.inference.samples < default.inference.samples < full.inference.samples
    assert set(SIZES) == {"smoke", "default", "full"}
    with pytest.raises(ValueError, match="smoke, default, full"):
        sizes_for("huge")


def test_jit_compile_is_explicit_per_device():
    assert default_jit_compile("tpu", "cnn", replicas=8) is True
    assert default_jit_compile("gpu", "lstm") is True
    # Keras' XLA train step cannot read variables of another replica's device.
    assert default_jit_compile("gpu", "lstm", replicas=2) is False
    assert default_jit_compile("cpu", "matmul") is False
    assert default_jit_compile("cpu", "resnet") is False
    with pytest.raises(ValueError, match="matmul, cnn, lstm, resnet, timeseries, inference"):
        default_jit_compile("cpu", "bert")


def test_inference_batches_are_padded_to_the_replicas_and_say_so():
    assert [padded_batch(b, 8) for b in (1, 8, 9, 64)] == [8, 8, 16, 64]
    assert padded_batch(5, 1) == 5
    assert padding_note(8, 8, 8) == "none: 8 is a multiple of 8 replica(s)"
    assert padding_note(1, 8, 8).startswith("padded 1 → 8 rows (a multiple of 8 replicas)")
    with pytest.raises(ValueError, match="batch >= 1"):
        padded_batch(0, 2)


def test_inference_and_sequence_figures():
    figures = inference_figures(round_s=0.5, batch=8, batches=10, latencies_s=[0.04] * 9 + [0.1])
    assert figures["samples_per_s"] == pytest.approx(160.0)
    assert figures["latency_p50_ms"] == pytest.approx(40.0)
    assert figures["latency_p90_ms"] == pytest.approx(40.0 + 0.1 * 60.0)
    step = sequence_figures(round_s=8.0, steps=2, batch=32)
    assert step["step_ms"] == pytest.approx(4000.0)
    assert step["samples_per_s"] == pytest.approx(8.0)
    assert step["epoch_s"] == pytest.approx(40.0)  # 10 steps, the published epoch


# --- data --------------------------------------------------------------------------------------


def test_synthetic_data_have_the_published_shapes():
    images = mnist(32)
    assert images.x.shape == (32, 28, 28, 1) and images.x.dtype == np.float32
    assert images.x.min() >= 0.0 and images.x.max() <= 1.0
    assert images.y.shape == (32, 10) and (images.y.sum(axis=1) == 1).all()
    reviews = imdb(16)
    assert reviews.x.shape == (16, 250) and reviews.x.dtype == np.int32
    assert reviews.x.max() < 15_000 and reviews.y.shape == (16, 1)


def test_real_data_come_from_the_keras_cache(tmp_path, monkeypatch):
    cache = tmp_path / "datasets"
    cache.mkdir()
    images = np.full((5, 28, 28), 255, dtype=np.uint8)
    np.savez(cache / "mnist.npz", x_train=images, y_train=np.arange(5, dtype=np.uint8))
    reviews = np.empty(2, dtype=object)
    reviews[:] = [[0, 1, 20_000], list(range(300))]
    np.savez(cache / "imdb.npz", x_train=reviews, y_train=np.array([1, 0]))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))

    digits = mnist(3, "real")
    assert digits.x.shape == (3, 28, 28, 1) and digits.x.max() == 1.0
    assert digits.y.argmax(axis=1).tolist() == [0, 1, 2]
    encoded = imdb(2, "real")
    # Keras' encoding: start mark 1, indices shifted by 3, rare words become 2; pre-padded.
    assert encoded.x[0, -4:].tolist() == [1, 3, 4, 2] and encoded.x[0, 0] == 0
    assert encoded.x[1, -1] == 299 + 3 and encoded.x.shape == (2, 250)
    assert encoded.y.ravel().tolist() == [1.0, 0.0]


def test_synthetic_cifar_and_weather_have_the_published_shapes():
    images = cifar10(4)
    assert images.x.shape == (4, 32, 32, 3) and images.x.dtype == np.float32
    assert images.y.shape == (4, 10) and (images.y.sum(axis=1) == 1).all()
    windows = weather(2)
    assert windows.x.shape == (2, 1344, 20) and windows.y.shape == (2, 1344, 3)
    assert windows.x.dtype == np.float32 and 0.0 <= windows.y.min() <= windows.y.max() <= 1.0


def test_real_cifar_and_weather_come_from_the_keras_cache(tmp_path, monkeypatch):
    import pickle

    folder = tmp_path / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    pixels = np.zeros((3, 3072), dtype=np.uint8)
    pixels[:, :1024] = 255  # the red plane, channel-first as CIFAR stores it
    batch = {b"data": pixels, b"labels": [7, 1, 2]}
    (folder / "data_batch_1").write_bytes(pickle.dumps(batch))
    hours = 40 * 6  # 10-minute rows
    header = '"Date Time","p (mbar)","T (degC)","wv (m/s)","rh (%)"'
    rows = [f"01.01.2009 00:{i:02d}:00,{1000 + i},{i % 7},{i % 3},{50}" for i in range(hours)]
    (tmp_path / "datasets" / "jena_climate_2009_2016.csv").write_text("\n".join([header, *rows]))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))

    images = cifar10(2, "real")
    assert images.x.shape == (2, 32, 32, 3) and images.x[..., 0].min() == 1.0
    assert images.x[..., 1:].max() == 0.0 and images.y.argmax(axis=1).tolist() == [7, 1]
    windows = weather(3, "real", steps=8)
    assert windows.x.shape == (3, 8, 4) and windows.y.shape == (3, 8, 3)
    assert windows.x.min() >= 0.0 and windows.x.max() <= 1.0


def test_real_data_missing_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(DataNotFound, match=str(tmp_path / "datasets" / "imdb.npz")):
        imdb(4, "real")


# --- TensorFlow, in fresh processes ------------------------------------------------------------

TINY_CHECKS = """
import numpy as np
import pytest
import tensorflow as tf

from pytest_tpu.timing import measure
from pytest_tpu.workloads import CnnEpochs, LstmSteps, MatmulChain, imdb, mnist, tflops

REPLICAS = @REPLICAS@


def trained_steps(model):
    # Optimizer steps so far; under a strategy the variable is mirrored over the replicas.
    return int(tf.convert_to_tensor(model.optimizer.iterations.value))


def test_matmul(accelerator, tpu_strategy):
    chain = MatmulChain(64, "float32", steps=3, strategy=tpu_strategy)
    assert chain.replicas == accelerator.replicas == REPLICAS
    result = measure(chain, rounds=2, warmup=0, sync=accelerator.sync)
    assert chain.flops == 2 * 64**3 * 3 * REPLICAS
    rate = tflops(64, 3, REPLICAS, result.samples[0])
    assert rate == pytest.approx(chain.flops / result.samples[0] / 1e12)
    # Every product consumed the previous one: sum(a @ b @ b @ b), once per replica.
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64), dtype=np.float32) / 8 for _ in range(2))
    assert chain() == pytest.approx(REPLICAS * float((a @ b @ b @ b).sum()), rel=1e-3)


def test_cnn(accelerator, tpu_strategy):
    epochs = CnnEpochs(mnist(256), 32, tpu_strategy)
    assert epochs.global_batch == 32 * REPLICAS
    assert epochs.steps == 256 // epochs.global_batch
    assert epochs.model.output_shape == (None, 10)
    result = measure(epochs, rounds=1, warmup=0, sync=accelerator.sync)
    # The first epoch and each round trained exactly one epoch of whole batches.
    assert trained_steps(epochs.model) == 2 * epochs.steps
    figures = epochs.figures(result.samples[0])
    assert figures["epoch_s"] == result.samples[0]
    assert figures["samples_per_s"] == pytest.approx(
        epochs.global_batch / (figures["step_ms"] / 1e3)
    )


def test_lstm(accelerator, tpu_strategy):
    steps = LstmSteps(imdb(128), 16, 2, tpu_strategy)
    assert steps.global_batch == 16 * REPLICAS
    assert steps.model.output_shape == (None, 1)
    result = measure(steps, rounds=2, warmup=1, sync=accelerator.sync)
    # One compile step, then three rounds (one warm-up) of two steps each.
    assert trained_steps(steps.model) == 1 + 3 * 2
    figures = steps.figures(result.samples[0])
    assert figures["step_ms"] == pytest.approx(result.samples[0] / 2 * 1e3)
    assert figures["us_per_sample"] == pytest.approx(
        figures["step_ms"] * 1e3 / steps.global_batch
    )
"""


def test_workloads_train_at_tiny_size(pytester):
    # On two replicas they run in test_keras_rules.py's virtual-CPUs session: one TensorFlow
    # process fewer for `make test`.
    pytester.makepyfile(test_tiny=TINY_CHECKS.replace("@REPLICAS@", "1"))
    result = pytester.runpytest_subprocess("--accelerator=cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def _copy_suite(pytester: pytest.Pytester, *modules: str) -> None:
    pytester.makeconftest((BENCHMARKS / "conftest.py").read_text())
    pytester.makepyfile(**{name: (BENCHMARKS / f"{name}.py").read_text() for name in modules})


def test_smoke_suite_records_the_public_fields(pytester):
    _copy_suite(pytester, "test_matmul", "test_cnn", "test_lstm")
    report = pytester.path / "bench.json"
    result = pytester.runpytest_subprocess(
        "--tpu-workload-size=smoke",
        "--accelerator=cpu",
        "-v",
        "-p",
        "no:cacheprovider",
        "-k",
        "256-cpu-float32 or cpu-1024 and cnn or cpu-64",
        f"--benchmark-json={report}",
    )
    result.assert_outcomes(passed=3)
    cnn_steps = sizes_for("smoke").cnn.samples // 1024
    result.stdout.fnmatch_lines(
        [f"*cnn batch 1024: round 2, {cnn_steps} steps in *", "*lstm batch 64: round 1, *"]
    )
    found = {entry["name"]: entry for entry in json.loads(report.read_text())["benchmarks"]}
    _check_matmul(found["test_matmul[256-cpu-float32]"])
    _check_cnn(found["test_cnn_epoch[cpu-1024]"])
    _check_lstm(found["test_lstm_step[cpu-64]"])


COMMON = {"accelerator", "device", "replicas", "metric", "unit", "higher_is_better"}
COMMON |= {"jit_compile", "intra_op_threads", "inter_op_threads", "workload_size"}


def _median_round(entry: dict) -> float:
    return float(entry["stats"]["median"])


def _check_matmul(entry: dict) -> None:
    info = entry["extra_info"]
    assert COMMON | {"n", "dtype", "tflops", "cold_s", "pct_peak"} <= set(info)
    assert (info["metric"], info["unit"], info["higher_is_better"]) == ("tflops", "TFLOP/s", True)
    assert (info["accelerator"], info["replicas"], info["n"]) == ("cpu", 1, 256)
    assert 0 < info["pct_peak"] < 100 and info["cold_s"] > 0  # of the CPU's computed peak
    expected = 2 * 256**3 * info["steps"] / _median_round(entry) / 1e12
    assert info["tflops"] == pytest.approx(expected, rel=0.05)
    assert entry["stats"]["rounds"] == sizes_for("smoke").matmul.rounds


def _check_cnn(entry: dict) -> None:
    info = entry["extra_info"]
    assert COMMON | {"batch_size", "epoch_s", "step_ms", "samples_per_s", "first_epoch_s"} <= set(
        info
    )
    assert (info["metric"], info["unit"], info["higher_is_better"]) == ("epoch_s", "s", False)
    assert info["batch_size"] == 1024 and info["steps"] == sizes_for("smoke").cnn.samples // 1024
    assert info["epoch_s"] == pytest.approx(_median_round(entry), rel=0.05)
    assert info["samples_per_s"] == pytest.approx(1024 / (info["step_ms"] / 1e3))


def _check_lstm(entry: dict) -> None:
    info = entry["extra_info"]
    assert COMMON | {"batch_size", "step_ms", "us_per_sample", "first_step_s"} <= set(info)
    assert (info["metric"], info["unit"], info["higher_is_better"]) == ("step_ms", "ms", False)
    step_s = _median_round(entry) / info["steps_per_round"]
    assert info["step_ms"] == pytest.approx(step_s * 1e3, rel=0.05)
    assert info["us_per_sample"] == pytest.approx(info["step_ms"] * 1e3 / 64)


def test_real_data_without_a_local_copy_is_a_clear_error(pytester, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(pytester.path / "empty"))
    _copy_suite(pytester, "test_cnn")
    result = pytester.runpytest_subprocess(
        "--tpu-workload-data=real", "--accelerator=cpu", "-p", "no:cacheprovider", "-k", "cpu-1024"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*needs a local copy of mnist.npz; looked for *empty*mnist.npz*"])


def test_gru_flops_count_three_gates_and_the_head():
    from pytest_tpu.workloads.timeseries import gru_train_flops

    forward = (2 * 3 * 512 * (20 + 512) + 2 * 512 * 3) * 1344 * 32
    assert gru_train_flops(32, 1344, 20) == pytest.approx(3 * forward)
