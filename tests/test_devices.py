"""Device discovery, the marker, the fixtures and --accelerator, end to end through pytester.

TensorFlow's device setup (virtual CPUs, thread pools, a TPU connection) is fixed for the life of
a process, so a scenario that sets one up runs in a fresh one (``runpytest_subprocess``); one that
only discovers the CPU runs in this process, TensorFlow imported once (``tensorflow_in_process``),
which saves an import of about 5 s a session.
"""

from __future__ import annotations

import pytest

TRAIN_STEP = """
import pytest

@pytest.mark.accelerators("cpu", "gpu", "tpu")
def test_train_step(accelerator, tpu_strategy):
    assert tpu_strategy.num_replicas_in_sync == accelerator.replicas
"""


@pytest.fixture(autouse=True)
def _no_tpu_environment(monkeypatch):
    """These tests describe a CPU-only machine; a TPU address from the caller would change it."""
    for name in ("TPU_NAME", "COLAB_TPU_ADDR", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PYTEST_ACCELERATOR", raising=False)


def test_all_runs_cpu_and_skips_missing_kinds_with_reasons(
    pytester: pytest.Pytester, tensorflow_in_process
):
    pytester.makepyfile(TRAIN_STEP)
    result = pytester.runpytest("--accelerator=all", "-rs", "-v")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "accelerators: cpu: * | gpu: none (no GPU: *) | tpu: none (no TPU: *)",
            "*test_train_step?cpu? PASSED*",
            "*test_train_step?gpu? SKIPPED*",
            "*test_train_step?tpu? SKIPPED*",
            "SKIPPED*: no GPU: *CUDA*",
            "SKIPPED*: no TPU: no TPU_NAME, COLAB_TPU_ADDR*",
        ]
    )


def test_auto_runs_only_the_devices_present(pytester: pytest.Pytester, tensorflow_in_process):
    pytester.makepyfile(TRAIN_STEP)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_train_step?cpu? PASSED*"])


def test_explicit_missing_kind_is_a_usage_error_saying_why(
    pytester: pytest.Pytester, tensorflow_in_process
):
    pytester.makepyfile(TRAIN_STEP)
    result = pytester.runpytest("--accelerator=tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # Said before any test runs, as pytest says a usage error: no "_pytest.outcomes.Exit" prefix.
    result.stderr.fnmatch_lines(
        ["ERROR: --accelerator asked for devices that are not present: tpu: no TPU*"]
    )
    # The header still names what was found, above pytest's closing lines (trial 34 read the
    # error alone, after "no tests ran", with nothing to set it against).
    result.stdout.fnmatch_lines(["accelerators: cpu: * | tpu: none (no TPU*"])
    assert "outcomes.Exit" not in result.stdout.str() + result.stderr.str()


def test_virtual_cpus_give_a_mirrored_strategy_over_two_replicas(pytester: pytest.Pytester):
    pytester.makepyfile(
        """
        import tensorflow as tf

        def test_two_replicas(accelerator, tpu_strategy):
            assert accelerator.replicas == 2
            assert accelerator.devices == ("/device:CPU:0", "/device:CPU:1")
            assert tpu_strategy.num_replicas_in_sync == 2
            assert isinstance(tpu_strategy, tf.distribute.MirroredStrategy)
            replica_id = lambda: tf.distribute.get_replica_context().replica_id_in_sync_group
            per_replica = tpu_strategy.run(replica_id)
            total = tpu_strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            assert int(total) == 1  # replica ids 0 and 1 both ran

        STRATEGIES = []

        import pytest

        @pytest.mark.parametrize("round", [1, 2])
        def test_one_strategy_per_device_per_session(tpu_strategy, round):
            STRATEGIES.append(tpu_strategy)
            assert all(strategy is STRATEGIES[0] for strategy in STRATEGIES)
        """
    )
    result = pytester.runpytest_subprocess("--tpu-virtual-cpus=2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["accelerators: cpu: 2x *"])


def test_accelerator_fixture_describes_and_places_work(
    pytester: pytest.Pytester, tensorflow_in_process
):
    pytester.makepyfile(
        """
        import tensorflow as tf

        def test_fields(accelerator, tpu_strategy):
            assert accelerator.kind == "cpu"
            assert accelerator.name and accelerator.replicas == 1
            assert accelerator.memory() is None
            assert accelerator.peak_source is None or accelerator.peak_source.startswith("cpuinfo")
            assert isinstance(tpu_strategy, tf.distribute.OneDeviceStrategy)
            with accelerator.scope():
                value = tf.reduce_sum(tf.ones((64, 64)))
            accelerator.sync()
            assert value.device.endswith("CPU:0") and float(value) == 4096.0
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def test_marker_composes_with_parametrize_and_implies_the_fixture(
    pytester: pytest.Pytester, tensorflow_in_process
):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.accelerators("cpu")
        @pytest.mark.parametrize("size", [1, 2])
        def test_sized(size, accelerator):
            assert accelerator.kind == "cpu"

        @pytest.mark.accelerators("cpu", "tpu")
        def test_marker_only(request):
            assert request.node.callspec.params["accelerator"] in ("cpu", "tpu")
        """
    )
    result = pytester.runpytest("-v", "--accelerator=all")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*test_sized?cpu-1? PASSED*",
            "*test_sized?cpu-2? PASSED*",
            "*test_marker_only?cpu? PASSED*",
            "*test_marker_only?tpu? SKIPPED*",
        ]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('"npu"', "*accelerators got ?'npu'?; valid kinds: cpu, gpu, tpu*"),
        ("", "*accelerators takes one or more kinds*"),
        ('kinds="cpu"', "*accelerators takes one or more kinds*"),
    ],
)
def test_invalid_marker_arguments_are_a_collection_error(
    pytester: pytest.Pytester, marker, message
):
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.accelerators({marker})
        def test_bad(accelerator):
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([message])


def test_plain_session_and_help_never_import_tensorflow(pytester: pytest.Pytester):
    pytester.makeconftest(
        """
        import sys

        def pytest_unconfigure(config):
            print("tensorflow imported:", "tensorflow" in sys.modules)
        """
    )
    pytester.makepyfile("def test_plain(): assert 1 + 1 == 2")
    plain = pytester.runpytest_subprocess("-s", "--accelerator=all")
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["tensorflow imported: False"])
    assert "accelerators:" not in plain.stdout.str()
    helped = pytester.runpytest_subprocess("--help")
    helped.stdout.fnmatch_lines(["tensorflow imported: False"])
