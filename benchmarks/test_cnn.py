"""CNN epoch: the published MNIST model, per-replica batches 256, 512 and 1024."""

from __future__ import annotations

import pytest

from pytest_tpu import device_utilisation
from pytest_tpu.timing import SyncedRounds, median
from pytest_tpu.workloads import CnnEpochs, default_jit_compile
from pytest_tpu.workloads.sizes import CNN_BATCHES


@pytest.mark.parametrize("batch_size", CNN_BATCHES)
def test_cnn_epoch(
    benchmark, accelerator, tpu_strategy, sizes, mnist_data, record, progress, batch_size
):
    jit = default_jit_compile(accelerator.kind, "cnn", accelerator.replicas)
    label = f"cnn batch {batch_size}"
    epochs = CnnEpochs(mnist_data, batch_size, tpu_strategy, jit, progress, label)
    runner = SyncedRounds(epochs, accelerator.sync)
    runner()  # the first epoch compiles and shards: first_epoch_s, never a round
    # No extra warm-up round: an epoch is long enough that the first one absorbs start-up.
    benchmark.pedantic(runner, rounds=sizes.cnn.rounds, warmup_rounds=0)

    epoch_s = median(runner.steady(sizes.cnn.rounds))
    figures = epochs.figures(epoch_s)
    flops = device_utilisation(epochs.step_flops(), epoch_s / epochs.steps, accelerator)
    record(
        metric="epoch_s",
        unit="s",
        higher_is_better=False,
        batch_size=epochs.global_batch,
        per_replica_batch_size=batch_size,
        samples=epochs.samples,
        steps=epochs.steps,
        first_epoch_s=runner.cold_s,
        jit_compile=jit,
        **figures,
        **flops.extra_info(),
    )
