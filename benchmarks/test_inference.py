"""Inference: model.predict throughput and per-batch latency of the IMDB LSTM, from a single
request up; each batch padded to a multiple of the replicas (the TPU's "multiple of 8")."""

from __future__ import annotations

import pytest

from pytest_tpu import device_utilisation
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import PredictBatches, default_jit_compile
from pytest_tpu.workloads.sizes import INFERENCE_BATCHES


@pytest.mark.parametrize("batch_size", INFERENCE_BATCHES)
def test_inference(
    benchmark, accelerator, tpu_strategy, sizes, requests_data, record, progress, batch_size
):
    spec = sizes.inference
    jit = default_jit_compile(accelerator.kind, "inference", accelerator.replicas)
    label = f"predict batch {batch_size}"
    predict = PredictBatches(
        requests_data,
        batch_size,
        spec.batches_per_round,
        tpu_strategy,
        jit,
        progress=progress,
        label=label,
    )
    runner = SyncedRounds(predict, accelerator.sync)
    runner()  # build, trace and compile: cold_s, never a round
    benchmark.pedantic(runner, rounds=spec.rounds, warmup_rounds=spec.warmup)

    round_s = median(runner.steady(spec.rounds))
    figures = predict.figures(round_s, spec.rounds)
    per_batch_s = round_s / spec.batches_per_round
    flops = device_utilisation(predict.batch_flops(), per_batch_s, accelerator)
    record(
        metric="samples_per_s",
        unit="samples/s",
        higher_is_better=True,
        model="imdb_lstm",
        batch_size=batch_size,
        padded_batch_size=predict.padded_batch,
        padding=predict.padding,
        batches_per_round=spec.batches_per_round,
        cold_s=runner.cold_s,
        jit_compile=jit,
        **figures,
        **flops.extra_info(),
    )
