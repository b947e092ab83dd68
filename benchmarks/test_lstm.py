"""LSTM step: the published IMDB model, per-replica batches 64 and 1024."""

from __future__ import annotations

import pytest

from pytest_tpu import device_utilisation
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import LstmSteps, default_jit_compile
from pytest_tpu.workloads.sizes import LSTM_BATCHES


@pytest.mark.parametrize("batch_size", LSTM_BATCHES)
def test_lstm_step(
    benchmark, accelerator, tpu_strategy, sizes, imdb_data, record, progress, batch_size
):
    spec = sizes.lstm
    jit = default_jit_compile(accelerator.kind, "lstm", accelerator.replicas)
    label = f"lstm batch {batch_size}"
    steps = LstmSteps(
        imdb_data, batch_size, spec.steps_per_round, tpu_strategy, jit, progress, label
    )
    runner = SyncedRounds(steps, accelerator.sync)
    runner()  # one step that traces and compiles: first_step_s, never a round
    benchmark.pedantic(runner, rounds=spec.rounds, warmup_rounds=spec.warmup)

    round_s = median(runner.steady(spec.rounds))
    figures = steps.figures(round_s)
    flops = device_utilisation(steps.step_flops(), round_s / steps.steps_per_round, accelerator)
    record(
        metric="step_ms",
        unit="ms",
        higher_is_better=False,
        batch_size=steps.global_batch,
        per_replica_batch_size=batch_size,
        steps_per_round=steps.steps_per_round,
        first_step_s=runner.cold_s,
        jit_compile=jit,
        **figures,
        **flops.extra_info(),
    )
