"""How much work each ``--tpu-workload-size`` asks of each workload.

``smoke`` keeps the whole suite within two minutes on a 2-core CPU, with too few rounds for the
gate to decide (its comparisons come out inconclusive); ``default``
keeps it within ten; ``full`` is the published sizes (60,000 MNIST images, 25,000 IMDB reviews),
meant for accelerators. Batch sizes never change with the size: they are the published table's
rows, and changing them would change what a step measures.
"""

from __future__ import annotations

from dataclasses import dataclass

CNN_BATCHES: tuple[int, ...] = (256, 512, 1024)  # per replica, as in the published table
LSTM_BATCHES: tuple[int, ...] = (64, 1024)
MATMUL_DTYPES: tuple[str, ...] = ("float32", "bfloat16")


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
class WorkloadSizes:
    name: str
    matmul: MatmulSize
    cnn: CnnSize
    lstm: LstmSize


SIZES: dict[str, WorkloadSizes] = {
    "smoke": WorkloadSizes(
        "smoke",
        MatmulSize(ns=(256, 512), flops_per_round=2.0**31, rounds=5, warmup=1),
        CnnSize(samples=2048, rounds=2),
        LstmSize(samples=2048, steps_per_round=1, rounds=3, warmup=1),
    ),
    "default": WorkloadSizes(
        "default",
        MatmulSize(ns=(512, 1024, 2048), flops_per_round=2.0**36, rounds=5, warmup=1),
        CnnSize(samples=15_000, rounds=5),
        LstmSize(samples=8192, steps_per_round=4, rounds=5, warmup=1),
    ),
    "full": WorkloadSizes(
        "full",
        MatmulSize(ns=(1024, 2048, 4096, 8192), flops_per_round=2.0**40, rounds=10, warmup=2),
        CnnSize(samples=60_000, rounds=5),
        LstmSize(samples=25_000, steps_per_round=None, rounds=5, warmup=0),
    ),
}


def sizes_for(name: str) -> WorkloadSizes:
    """The sizes of ``--tpu-workload-size=name``; unknown names list the valid ones."""
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown workload size {name!r}; valid: {', '.join(SIZES)}") from None
