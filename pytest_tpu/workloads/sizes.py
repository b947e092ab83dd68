"""How much work each ``--tpu-workload-size`` asks of each workload.

``smoke`` keeps the whole suite within two minutes on a 2-core CPU, with too few rounds for the
gate to decide (its comparisons come out inconclusive); ``default``
keeps it within ten; ``full`` is the published sizes (60,000 MNIST images, 25,000 IMDB reviews,
50,000 CIFAR-10 images, 10-step weather epochs), meant for accelerators. Sizes scale sample
counts only: models, sequence lengths and shapes are the published ones at every size. Batch
sizes never change with the size: they are the published table's
rows, and changing them would change what a step measures.
"""

from __future__ import annotations

from dataclasses import dataclass

CNN_BATCHES: tuple[int, ...] = (256, 512, 1024)  # per replica, as in the published table
LSTM_BATCHES: tuple[int, ...] = (64, 1024)
MATMUL_DTYPES: tuple[str, ...] = ("float32", "bfloat16")
# Per replica: 128 on each of 8 TPU cores was the published advice ("a batch size of 8·8ⁿ").
RESNET_BATCHES: tuple[int, ...] = (128,)
TIMESERIES_BATCH = 32  # per replica: the TPU run fed (32, 1344, 20) to each core
# Per-batch request sizes for model.predict, from a single request up; each is padded to a
# multiple of the replicas (the TPU's "multiple of 8").
INFERENCE_BATCHES: tuple[int, ...] = (1, 8, 64, 512)


@dataclass(frozen=True)
class MatmulSize:
    ns: tuple[int, ...]  # square sizes N
    flops_per_round: float  # chain length is chosen so one round does about this much work
    rounds: int
    warmup: int


@dataclass(frozen=True)
class CnnSize:
    samples: int  # training images per epoch (one round is one epoch)
    rounds: int  # steady epochs after the first (compile) epoch


@dataclass(frozen=True)
class LstmSize:
    samples: int  # reviews in the dataset, cycled as needed
    steps_per_round: int | None  # None: one round is a whole epoch over ``samples``
    rounds: int
    warmup: int


@dataclass(frozen=True)
class ResnetSize:
    samples: int  # CIFAR-10 training images per epoch (one round is one epoch)
    rounds: int  # steady epochs after the first (compile) epoch


@dataclass(frozen=True)
class TimeseriesSize:
    sequences: int  # weather windows of 1344 hours in the dataset, cycled as needed
    steps_per_round: int
    rounds: int
    warmup: int


@dataclass(frozen=True)
class InferenceSize:
    samples: int  # reviews the requests are cut from, cycled as needed
    batches_per_round: int  # predict calls per round, each timed for the latency figures
    rounds: int
    warmup: int


@dataclass(frozen=True)
class WorkloadSizes:
    name: str
    matmul: MatmulSize
    cnn: CnnSize
    lstm: LstmSize
    resnet: ResnetSize
    timeseries: TimeseriesSize
    inference: InferenceSize


SIZES: dict[str, WorkloadSizes] = {
    "smoke": WorkloadSizes(
        "smoke",
        MatmulSize(ns=(256, 512), flops_per_round=2.0**31, rounds=5, warmup=1),
        CnnSize(samples=2048, rounds=2),
        LstmSize(samples=2048, steps_per_round=1, rounds=3, warmup=1),
        ResnetSize(samples=256, rounds=2),
        TimeseriesSize(sequences=32, steps_per_round=1, rounds=1, warmup=0),
        InferenceSize(samples=1024, batches_per_round=2, rounds=2, warmup=1),
    ),
    "default": WorkloadSizes(
        "default",
        MatmulSize(ns=(512, 1024, 2048), flops_per_round=2.0**36, rounds=5, warmup=1),
        CnnSize(samples=15_000, rounds=5),
        LstmSize(samples=8192, steps_per_round=4, rounds=5, warmup=1),
        ResnetSize(samples=1536, rounds=3),
        TimeseriesSize(sequences=128, steps_per_round=1, rounds=3, warmup=0),
        InferenceSize(samples=4096, batches_per_round=5, rounds=5, warmup=1),
    ),
    "full": WorkloadSizes(
        "full",
        MatmulSize(ns=(1024, 2048, 4096, 8192), flops_per_round=2.0**40, rounds=10, warmup=2),
        CnnSize(samples=60_000, rounds=5),
        LstmSize(samples=25_000, steps_per_round=None, rounds=5, warmup=0),
        ResnetSize(samples=50_000, rounds=5),
        # 10 steps per round: the published epoch (10 steps of 8 x 32 windows).
        TimeseriesSize(sequences=2560, steps_per_round=10, rounds=5, warmup=1),
        InferenceSize(samples=25_000, batches_per_round=50, rounds=10, warmup=2),
    ),
}


def sizes_for(name: str) -> WorkloadSizes:
    """The sizes of ``--tpu-workload-size=name``; unknown names list the valid ones."""
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown workload size {name!r}; valid: {', '.join(SIZES)}") from None
