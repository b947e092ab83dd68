"""CIFAR-10 ResNet epoch: ResNet-20 v1, per-replica batch 128 (8 x 128 on 8 TPU cores)."""

from __future__ import annotations

import pytest

from pytest_tpu import device_utilisation
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import ResnetEpochs, default_jit_compile
from pytest_tpu.workloads.sizes import RESNET_BATCHES


@pytest.mark.parametrize("batch_size", RESNET_BATCHES)
def test_resnet_epoch(
    benchmark, accelerator, tpu_strategy, sizes, cifar10_data, record, progress, batch_size
):
    jit = default_jit_compile(accelerator.kind, "resnet", accelerator.replicas)
    label = f"resnet batch {batch_size}"
    epochs = ResnetEpochs(cifar10_data, batch_size, tpu_strategy, jit, progress, label)
    runner = SyncedRounds(epochs, accelerator.sync)
    runner()  # the first epoch compiles (and shards the optimizer): first_epoch_s, never a round
    benchmark.pedantic(runner, rounds=sizes.resnet.rounds, warmup_rounds=0)

    epoch_s = median(runner.steady(sizes.resnet.rounds))
    figures = epochs.figures(epoch_s)
    flops = device_utilisation(epochs.step_flops(), epoch_s / epochs.steps, accelerator)
    record(
        metric="epoch_s",
        unit="s",
        higher_is_better=False,
        model="resnet20_v1",
        batch_size=epochs.global_batch,
        per_replica_batch_size=batch_size,
        samples=epochs.samples,
        steps=epochs.steps,
        first_epoch_s=runner.cold_s,
        jit_compile=jit,
        **figures,
        **flops.extra_info(),
    )
