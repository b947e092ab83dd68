"""Peak memory, the first call and progress of device benchmarks (``pytest_tpu.measure``).

The instrumentation keys on the ``accelerator`` fixture's name, as it does for users' own
benchmarks; the sessions discover the real CPU.
"""

from __future__ import annotations

import json
import sys

import pytest

from pytest_tpu import flops, memory, progress
from pytest_tpu.devices import Device, Inventory
from pytest_tpu.progress import Progress

BENCHMARKS = """
def work():
    block = bytearray(8 * 1024 * 1024)  # touched: it becomes resident
    for i in range(0, len(block), 4096):
        block[i] = 1
    return len(block)


def test_pedantic(benchmark, accelerator):
    benchmark.pedantic(work, rounds=4, warmup_rounds=1)


def test_call(benchmark, accelerator):
    benchmark(work)


def test_not_a_device_benchmark(benchmark):
    benchmark.pedantic(work, rounds=2)
"""

KEYS = {"first_call_s", "peak_memory_bytes", "peak_memory_increase_bytes", "peak_memory_source"}


def _cpu_only(*settings: object) -> Inventory:
    cpu = Device("cpu", "test cpu", ("/device:CPU:0",))
    return Inventory({"cpu": cpu}, {"gpu": "no GPU: test", "tpu": "no TPU: test"})


@pytest.fixture
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # Real discovery: in a child process, or in this one where TensorFlow was imported once
    # before pytester's snapshot (``tensorflow_in_process``): it cannot be imported twice.
    pytester.makepyfile(test_user=BENCHMARKS)
    return pytester


def _extra_info(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    data = json.loads((pytester.path / "out.json").read_text())
    return {b["name"]: b["extra_info"] for b in data["benchmarks"]}


@pytest.mark.skipif(sys.platform != "linux", reason="peak RSS needs Linux's clear_refs")
def test_device_benchmarks_record_first_call_and_peak_memory(
    bench: pytest.Pytester, tensorflow_in_process: object
) -> None:
    bench.runpytest(
        "--accelerator=cpu", "-p", "no:cacheprovider", "--benchmark-json=out.json"
    ).assert_outcomes(passed=3)
    info = _extra_info(bench)
    for name in ("test_pedantic[cpu]", "test_call[cpu]"):
        assert set(info[name]) >= KEYS, info[name]
        assert info[name]["peak_memory_source"] == "rss"
        assert isinstance(info[name]["first_call_s"], float)
        assert int(info[name]["peak_memory_bytes"]) > 8 * 1024 * 1024  # type: ignore[call-overload]
    assert not KEYS & set(info["test_not_a_device_benchmark"])


def test_memory_shows_in_the_summary_table(
    bench: pytest.Pytester, tensorflow_in_process: object
) -> None:
    result = bench.runpytest("--accelerator=cpu", "-p", "no:cacheprovider", "-k", "pedantic")
    result.stdout.fnmatch_lines(["*benchmark*cpu*peak mem*", "test_pedantic*MiB*"])
    assert "(default)" not in result.stdout.str()


def test_progress_lines_at_default_verbosity_and_none_under_quiet(bench: pytest.Pytester) -> None:
    # Lines from the first second on, none rate-limited away, in the child session.
    bench.makeconftest(
        "import pytest_tpu.progress as _progress\n"
        "_progress.SHOW_AFTER = 0.0\n_progress.LOG_INTERVAL = 0.0\n"
    )
    result = bench.runpytest_subprocess(
        "--accelerator=cpu", "-p", "no:cacheprovider", "-k", "pedantic"
    )
    result.stdout.fnmatch_lines(
        ["*test_pedantic*: warm-up 1/1 done*", "*round 1/4 done*left*", "*4 rounds + 1 warm-up*"]
    )
    quiet = bench.runpytest_subprocess(
        "--accelerator=cpu", "-p", "no:cacheprovider", "-k", "pedantic", "-q"
    )
    assert "round 1/4" not in quiet.stdout.str()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _progress(tty: bool, rounds: int | None = 10) -> tuple[Progress, Clock, list[str]]:
    lines: list[str] = []
    clock = Clock()

    def write(text: str, *, in_place: bool, final: bool) -> None:
        lines.append(("final " if final else "") + text)

    return Progress("t", write, rounds=rounds, warmup=2, tty=tty, now=clock), clock, lines


def test_progress_is_silent_for_short_benchmarks() -> None:
    bar, clock, lines = _progress(tty=False)
    bar.start()
    for _ in range(11):
        clock.now += 0.1
        bar.step()
    bar.finish()
    assert lines == []


def test_progress_in_logs_is_rate_limited_and_estimates_time_left() -> None:
    bar, clock, lines = _progress(tty=False, rounds=100)
    bar.start()
    for _ in range(101):
        clock.now += 1.0
        bar.step()
    bar.finish()
    # 101 s of rounds, a line at most every LOG_INTERVAL seconds after SHOW_AFTER
    assert 5 <= len(lines) <= 101 / progress.LOG_INTERVAL + 2
    assert lines[0] == "t: round 1/100 done, 3 s, about 1 min 39 s left"
    assert lines[-1] == "final t: 100 rounds + 2 warm-up in 1 min 41 s"


def test_progress_without_a_known_round_count_counts_calls() -> None:
    bar, clock, lines = _progress(tty=True, rounds=None)
    bar.start()
    clock.now = 5.0
    bar.step()
    assert lines == ["t: call 1, 5 s"]


def test_format_seconds() -> None:
    assert progress.format_seconds(8.4) == "8 s"
    assert progress.format_seconds(125) == "2 min 05 s"
    assert progress.format_seconds(3720) == "1 h 02 min"


def test_allocator_peak_without_tensorflow_loaded_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    peak = memory.tracker("gpu", "/device:GPU:0")
    peak.mark()
    peak.start()
    assert peak.stop() is None


def test_tpu_threads_sizes_tensorflows_pools_before_first_use(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_threads(accelerator):
            import tensorflow as tf

            assert tf.config.threading.get_intra_op_parallelism_threads() == 1
            assert tf.config.threading.get_inter_op_parallelism_threads() == 1
        """
    )
    pytester.makeini("[pytest]\ntpu_threads = 1\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--accelerator=cpu")
    result.assert_outcomes(passed=1)


def test_tpu_threads_sizes_the_pools_of_a_model_built_at_import(pytester: pytest.Pytester) -> None:
    # Trial 36: a module that ran TensorFlow when imported ended --tpu-threads=1 in an
    # INTERNALERROR; the environment sizes the pools before any test module is imported.
    pytester.makepyfile(
        """
        import os
        import tensorflow as tf

        WEIGHTS = tf.random.normal((64, 64))  # TensorFlow starts at collection

        def test_threads(accelerator):
            (WEIGHTS @ WEIGHTS).numpy()
            # Read by TensorFlow as it made its pools, at this module's import.
            assert os.environ["TF_NUM_INTRAOP_THREADS"] == "1"
            assert os.environ["TF_NUM_INTEROP_THREADS"] == "1"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tpu-threads=1")
    result.assert_outcomes(passed=1)
    # Where a conftest started TensorFlow before the plugin was configured, a usage error says
    # what to do, not a traceback.
    pytester.makeconftest("import tensorflow as tf\ntf.constant(1.0) + 1.0\n")
    late = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tpu-threads=1")
    assert late.ret == pytest.ExitCode.USAGE_ERROR, late.stdout.str()
    late.stderr.fnmatch_lines(["ERROR: --tpu-threads=1: TensorFlow was initialised before*"])
    assert "INTERNALERROR" not in late.stdout.str() + late.stderr.str()


# ---------------------------------------------------------------- FLOPs and peaks

CPUINFO = "processor\t: 0\ncpu MHz\t\t: 2500.000\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n"


def test_cpu_peak_from_cpuinfo_names_its_source() -> None:
    peak = flops.cpu_peak(CPUINFO, cores=2)
    assert peak is not None
    assert peak.flops == pytest.approx(2 * 2.5e9 * 64)  # 16 lanes x FMA (2) x 2 units
    assert peak.source.startswith("cpuinfo: 2 cores x 2.50 GHz x 64 FLOP/cycle (avx512f, fma)")
    assert flops.flops_per_cycle({"avx2", "fma"}) == 32
    assert flops.cpu_peak("no flags here", cores=1) is None


def test_a_result_above_the_peak_is_flagged_not_reported() -> None:
    fine = flops.utilisation(1e12, 10.0, peak=1e12, peak_source="test")
    assert fine.achieved_tflops == pytest.approx(0.1)
    assert fine.pct_peak == pytest.approx(10.0)
    impossible = flops.utilisation(1e12, 0.1, peak=1e12, peak_source="test").extra_info()
    assert impossible["achieved_tflops"] is None and impossible["pct_peak"] is None
    assert "impossible" in str(impossible["flops_warning"])


def test_count_flops_of_a_function_and_refusal_of_loops() -> None:
    tf = pytest.importorskip("tensorflow")
    x = tf.zeros((64, 64))
    assert flops.count_flops(lambda a: tf.matmul(a, a), x) == 2 * 64**3

    def looped(a: object) -> object:
        for _ in tf.range(3):
            a = tf.matmul(a, a)
        return a

    with pytest.raises(ValueError, match="loop"):
        flops.count_flops(tf.function(looped), x)
