"""Weather time-series RNN: GRU(512) over windows of (1344 hours, 20 signals), batch 32 per
replica, as the published TPU run fed each core."""

from __future__ import annotations

from pytest_tpu import device_utilisation
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import TimeseriesSteps, default_jit_compile
from pytest_tpu.workloads.sizes import TIMESERIES_BATCH
from pytest_tpu.workloads.timeseries import PUBLISHED_EPOCH_STEPS


def test_timeseries_step(
    benchmark, accelerator, tpu_strategy, sizes, weather_data, record, progress
):
    spec = sizes.timeseries
    jit = default_jit_compile(accelerator.kind, "timeseries", accelerator.replicas)
    steps = TimeseriesSteps(
        weather_data, TIMESERIES_BATCH, spec.steps_per_round, tpu_strategy, jit, progress, "gru"
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
        per_replica_batch_size=TIMESERIES_BATCH,
        sequence_length=steps.sequence_length,
        signals=int(weather_data.x.shape[-1]),
        steps_per_round=steps.steps_per_round,
        epoch_steps=PUBLISHED_EPOCH_STEPS,  # epoch_s is the time of a 10-step published epoch
        first_step_s=runner.cold_s,
        jit_compile=jit,
        **figures,
        **flops.extra_info(),
    )
