"""MNIST- and IMDB-shaped training data: synthetic by default, real from Keras' cache if present.

A step's speed does not depend on pixel values or word choice, only on shapes and dtypes, so
synthetic arrays of the exact shapes measure the same thing without a download. Real data is
read from a copy already on disk and is never fetched: benchmark machines often reach no dataset
host, and a download inside a timed session would be both slow and flaky.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCES: tuple[str, ...] = ("synthetic", "real")
MNIST_SHAPE = (28, 28, 1)
MNIST_CLASSES = 10
IMDB_VOCAB = 15_000
IMDB_LENGTH = 250
# The encoding keras.datasets.imdb.load_data applies by default, so real reviews match it.
_IMDB_START, _IMDB_OOV, _IMDB_INDEX_FROM = 1, 2, 3


class DataNotFound(FileNotFoundError):
    """``--tpu-workload-data=real`` without a local copy of the dataset."""


@dataclass(frozen=True)
class Arrays:
    """Inputs and labels of one training set, as numpy arrays."""

    x: Any  # numpy.ndarray
    y: Any  # numpy.ndarray

    def __len__(self) -> int:
        return int(self.x.shape[0])


def keras_cache_dir() -> Path:
    """Where Keras keeps datasets: ``$KERAS_HOME/datasets``, else ``~/.keras/datasets``."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return Path(home) / "datasets"


def _cached_file(name: str) -> Path:
    path = keras_cache_dir() / name
    if not path.is_file():
        raise DataNotFound(
            f"--tpu-workload-data=real needs a local copy of {name}; looked for {path} "
            f"(set KERAS_HOME to use another Keras cache). Nothing is downloaded during a run: "
            f"copy the file there, or use --tpu-workload-data=synthetic."
        )
    return path


def mnist(samples: int, source: str = "synthetic", seed: int = 0) -> Arrays:
    """``samples`` images, float32 in [0, 1], shape (samples, 28, 28, 1); one-hot labels."""
    _check_source(source)
    if source == "real":
        return _real_mnist(samples)
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((samples, *MNIST_SHAPE), dtype=np.float32)
    labels = rng.integers(0, MNIST_CLASSES, samples)
    return Arrays(x, _one_hot(labels))


def _real_mnist(samples: int) -> Arrays:
    import numpy as np

    with np.load(_cached_file("mnist.npz")) as archive:
        images, labels = archive["x_train"][:samples], archive["y_train"][:samples]
    x = (images.astype(np.float32) / 255.0).reshape((-1, *MNIST_SHAPE))
    return Arrays(x, _one_hot(labels))


def _one_hot(labels: Any) -> Any:
    import numpy as np

    return np.eye(MNIST_CLASSES, dtype=np.float32)[labels.astype(np.int64)]


def imdb(samples: int, source: str = "synthetic", seed: int = 0) -> Arrays:
    """``samples`` reviews as int32 word indices (samples, 250); float32 labels (samples, 1)."""
    _check_source(source)
    if source == "real":
        return _real_imdb(samples)
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.integers(_IMDB_INDEX_FROM, IMDB_VOCAB, (samples, IMDB_LENGTH), dtype=np.int32)
    y = rng.integers(0, 2, (samples, 1)).astype(np.float32)
    return Arrays(x, y)


def _real_imdb(samples: int) -> Arrays:
    import numpy as np

    with np.load(_cached_file("imdb.npz"), allow_pickle=True) as archive:
        reviews, labels = archive["x_train"][:samples], archive["y_train"][:samples]
    x = np.stack([_encode_review(review) for review in reviews])
    return Arrays(x, labels.astype(np.float32).reshape(-1, 1))


def _encode_review(review: Any) -> Any:
    """One review as Keras encodes it (start mark, shifted indices, rare words as OOV), then
    pre-padded / pre-truncated to the fixed length, as ``pad_sequences`` does by default."""
    import numpy as np

    words = np.asarray(review, dtype=np.int64) + _IMDB_INDEX_FROM
    words = np.where(words < IMDB_VOCAB, words, _IMDB_OOV)
    words = np.concatenate(([_IMDB_START], words))[-IMDB_LENGTH:]
    padded = np.zeros(IMDB_LENGTH, dtype=np.int32)
    padded[IMDB_LENGTH - len(words) :] = words
    return padded


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise ValueError(f"unknown data source {source!r}; valid: {', '.join(SOURCES)}")
