"""Matmul FLOP/s: chained N x N products in one compiled function, float32 and bfloat16."""

from __future__ import annotations

import pytest

from pytest_tpu import device_utilisation, selected_workload_size
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import MatmulChain, chain_steps, default_jit_compile, sizes_for, tflops
from pytest_tpu.workloads.sizes import MATMUL_DTYPES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The sizes N depend on --tpu-workload-size, known only once options are resolved."""
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", sizes_for(selected_workload_size(metafunc.config)).matmul.ns)


@pytest.mark.parametrize("dtype", MATMUL_DTYPES)
def test_matmul(benchmark, accelerator, tpu_strategy, sizes, record, progress, n, dtype):
    spec = sizes.matmul
    jit = default_jit_compile(accelerator.kind, "matmul", accelerator.replicas)
    steps = chain_steps(n, spec.flops_per_round)
    chain = MatmulChain(n, dtype, steps, strategy=tpu_strategy, jit_compile=jit)
    runner = SyncedRounds(chain, accelerator.sync)
    runner()  # trace + compile: reported as cold_s, never a round
    benchmark.pedantic(runner, rounds=spec.rounds, warmup_rounds=spec.warmup)

    seconds = median(runner.steady(spec.rounds))
    rate = tflops(n, steps, chain.replicas, seconds)
    record(
        metric="tflops",
        unit="TFLOP/s",
        higher_is_better=True,
        n=n,
        dtype=dtype,
        steps=steps,
        tflops=rate,
        cold_s=runner.cold_s,
        jit_compile=jit,
        # flops_per_step, achieved_tflops, pct_peak, peak_tflops, peak_source (per call)
        **device_utilisation(chain.flops, seconds, accelerator, dtype).extra_info(),
    )
    progress(f"matmul n={n} {dtype}: {rate:.3f} TFLOP/s, cold {runner.cold_s:.2f} s")
