"""Does pinning every thread, as ``--compare-ref`` does, change the size of a change it measures?

In one process, rounds of an old and a new version of a TensorFlow op alternate, once with the
threads left where the scheduler puts them and once pinned by ``pytest_tpu.sameref.pinning``; each
line gives the median ratio of neighbouring rounds, new over old.

    python experiments/compare_ref/pin_bias.py stft matmul conv
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from pytest_tpu.sameref.pinning import Pin, shared_core

RNG = np.random.default_rng(0)
AUDIO = tf.constant(RNG.standard_normal((4, 32000)).astype(np.float32))
MATRIX = tf.constant(RNG.standard_normal((384, 384)).astype(np.float32))
IMAGES = tf.constant(RNG.standard_normal((16, 32, 32, 16)).astype(np.float32))
KERNEL_20 = tf.constant(RNG.standard_normal((3, 3, 16, 20)).astype(np.float32))
KERNEL_22 = tf.constant(RNG.standard_normal((3, 3, 16, 22)).astype(np.float32))


def _stft(step: int) -> Callable[[], object]:
    return lambda: tf.abs(tf.signal.stft(AUDIO[:, :24000], 512, step)).numpy()


def _chain(links: int) -> Callable[[], object]:
    def run() -> object:
        x = MATRIX
        for _ in range(links):
            x = tf.matmul(x, MATRIX) * 0.01
        return x.numpy()

    return run


def _conv(kernel: tf.Tensor) -> Callable[[], object]:
    return lambda: tf.nn.conv2d(IMAGES, kernel, 1, "SAME").numpy()


# name: (old, new, calls a round); stft: 16.6 % more frames, matmul: 10 % more links.
WORKLOADS = {
    "stft": (_stft(128), _stft(110), 10),
    "matmul": (_chain(10), _chain(11), 2),
    "conv": (_conv(KERNEL_20), _conv(KERNEL_22), 10),
}


def _timed(call: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - start) / inner


def trial(name: str, pin: Pin | None, rounds: int = 40) -> tuple[float, float]:
    """The old version's median round and the median new/old ratio of neighbouring rounds - 1."""
    old, new, inner = WORKLOADS[name]
    olds: list[float] = []
    news: list[float] = []
    for i in range(rounds):
        if pin is not None:
            pin.before_round()
        for first in (True, False) if i % 2 == 0 else (False, True):  # ABBA
            (olds if first else news).append(_timed(old if first else new, inner))
    if pin is not None:
        pin.release()
    ratios = [b / a for a, b in zip(olds, news, strict=True)]
    return statistics.median(olds), statistics.median(ratios) - 1


def main(names: list[str]) -> None:
    for name in names:
        old, new, _ = WORKLOADS[name]
        for call in (old, new, old, new):  # traced and warm before any round
            call()
        for _ in range(3):
            free, free_change = trial(name, None)
            pinned, pinned_change = trial(name, Pin(shared_core()))
            print(
                f"{name:7s} unpinned {free * 1e3:6.2f} ms {free_change:+.1%}   "
                f"pinned {pinned * 1e3:6.2f} ms {pinned_change:+.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:] or list(WORKLOADS))
