"""MNIST-, IMDB-, CIFAR-10- and weather-shaped training data: synthetic by default, real from
Keras' cache if present.

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
CIFAR10_SHAPE = (32, 32, 3)
CIFAR10_CLASSES = 10
# The weather run: 20 input signals of several cities, 3 targets (temperature, pressure, wind
# speed), sequences of 1344 hourly steps (8 weeks), as the published TPU run fed them.
WEATHER_SIGNALS = 20
WEATHER_TARGETS = 3
WEATHER_STEPS = 1344
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


def _one_hot(labels: Any, classes: int = MNIST_CLASSES) -> Any:
    import numpy as np

    return np.eye(classes, dtype=np.float32)[np.asarray(labels).astype(np.int64).reshape(-1)]


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


def cifar10(samples: int, source: str = "synthetic", seed: int = 0) -> Arrays:
    """``samples`` colour images, float32 in [0, 1], shape (samples, 32, 32, 3); one-hot labels."""
    _check_source(source)
    if source == "real":
        return _real_cifar10(samples)
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((samples, *CIFAR10_SHAPE), dtype=np.float32)
    return Arrays(x, _one_hot(rng.integers(0, CIFAR10_CLASSES, samples), CIFAR10_CLASSES))


# Where Keras keeps the extracted CIFAR-10 batches: Keras 3 extracts into "...-target".
_CIFAR_DIRS = ("cifar-10-batches-py-target/cifar-10-batches-py", "cifar-10-batches-py")


def _real_cifar10(samples: int) -> Arrays:
    import numpy as np

    found = [keras_cache_dir() / d for d in _CIFAR_DIRS if (keras_cache_dir() / d).is_dir()]
    folder = found[0] if found else _cached_file(_CIFAR_DIRS[-1] + "/data_batch_1").parent
    images: list[Any] = []
    labels: list[int] = []
    for index in range(1, 6):
        if len(labels) >= samples:
            break
        batch = _unpickle(folder / f"data_batch_{index}")
        images.append(np.asarray(batch[b"data"]).reshape(-1, 3, 32, 32))
        labels.extend(batch[b"labels"])
    x = np.concatenate(images)[:samples].transpose(0, 2, 3, 1).astype(np.float32) / 255.0
    return Arrays(x, _one_hot(np.asarray(labels[:samples]), CIFAR10_CLASSES))


def _unpickle(path: Path) -> dict[bytes, Any]:
    """A CIFAR batch, unpickled with only numpy's array classes allowed (it is a pickle)."""
    import pickle

    allowed = {("numpy", "ndarray"), ("numpy", "dtype")}
    allowed |= {(m, "_reconstruct") for m in ("numpy.core.multiarray", "numpy._core.multiarray")}

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) not in allowed:
                raise pickle.UnpicklingError(f"{path}: {module}.{name} is not allowed")
            return super().find_class(module, name)

    with path.open("rb") as stream:
        data: dict[bytes, Any] = Restricted(stream, encoding="bytes").load()
    return data


def weather(
    sequences: int, source: str = "synthetic", seed: int = 0, steps: int = WEATHER_STEPS
) -> Arrays:
    """``sequences`` windows of ``steps`` hours: inputs (n, steps, signals), targets (n, steps, 3).

    Synthetic: 20 signals and 3 targets in [0, 1] (the tutorial min-max scales both). Real: the
    Jena climate record from Keras' cache (``jena_climate_2009_2016.csv``, the keras-io weather
    example's data), taken hourly, its 14 signals as inputs and temperature, pressure and wind
    speed 24 hours later as targets; it has 14 signals, not the published run's 20.
    """
    _check_source(source)
    if source == "real":
        return _real_weather(sequences, steps, seed)
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((sequences, steps, WEATHER_SIGNALS), dtype=np.float32)
    y = rng.random((sequences, steps, WEATHER_TARGETS), dtype=np.float32)
    return Arrays(x, y)


_JENA = "jena_climate_2009_2016.csv"
_JENA_TARGETS = ("T (degC)", "p (mbar)", "wv (m/s)")
_SHIFT_HOURS = 24  # the tutorial predicts the targets a day ahead


def _real_weather(sequences: int, steps: int, seed: int) -> Arrays:
    import numpy as np

    path = keras_cache_dir() / _JENA
    table = _read_jena(path if path.is_file() else _cached_file(_JENA + ".zip"))
    names, values = table
    hourly = values[::6]  # one row every 10 minutes
    scaled = (hourly - hourly.min(0)) / np.maximum(np.ptp(hourly, 0), 1e-9)
    targets = scaled[:, [names.index(name) for name in _JENA_TARGETS]]
    last = len(hourly) - steps - _SHIFT_HOURS
    if last < 1:
        raise ValueError(f"{_JENA} has {len(hourly)} hours, fewer than one window of {steps}")
    starts = np.random.default_rng(seed).integers(0, last, sequences)
    x = np.stack([scaled[s : s + steps] for s in starts]).astype(np.float32)
    shifted = [targets[s + _SHIFT_HOURS : s + _SHIFT_HOURS + steps] for s in starts]
    return Arrays(x, np.stack(shifted).astype(np.float32))


def _read_jena(path: Path) -> tuple[list[str], Any]:
    """Column names (without the date) and the numeric values of the Jena climate CSV."""
    import io
    import zipfile

    import numpy as np

    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            text = archive.read(_JENA).decode("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    header, _, body = text.partition("\n")
    names = [name.strip('"') for name in header.strip().split(",")][1:]
    values = np.loadtxt(io.StringIO(body), delimiter=",", usecols=range(1, len(names) + 1))
    return names, values.astype(np.float32)
