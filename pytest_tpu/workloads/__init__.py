"""The reference workloads as plain code: use them in your own benchmarks.

Importing this package imports neither TensorFlow nor numpy; the workloads do when built.

```python
from pytest_tpu.workloads import MatmulChain

def test_matmul(benchmark, tpu_strategy):
    chain = MatmulChain(2048, "float32", steps=8, strategy=tpu_strategy)
    chain()  # first call: trace and compile, kept out of the rounds
    benchmark.pedantic(chain, rounds=5, warmup_rounds=1)
```
"""

from __future__ import annotations

from pytest_tpu.workloads.cnn import CnnEpochs, build_cnn
from pytest_tpu.workloads.data import (
    Arrays,
    DataNotFound,
    cifar10,
    imdb,
    keras_cache_dir,
    mnist,
    weather,
)
from pytest_tpu.workloads.inference import (
    PredictBatches,
    inference_figures,
    padded_batch,
    padding_note,
)
from pytest_tpu.workloads.lstm import LstmSteps, build_lstm, step_figures
from pytest_tpu.workloads.matmul import MatmulChain, chain_steps, flops, tflops
from pytest_tpu.workloads.resnet import ResnetEpochs, build_resnet
from pytest_tpu.workloads.sizes import SIZES, WorkloadSizes, sizes_for
from pytest_tpu.workloads.timeseries import TimeseriesSteps, build_gru, sequence_figures
from pytest_tpu.workloads.training import (
    TrainingRounds,
    default_jit_compile,
    epoch_figures,
    global_batch,
)

__all__ = [
    "SIZES",
    "Arrays",
    "CnnEpochs",
    "DataNotFound",
    "LstmSteps",
    "MatmulChain",
    "PredictBatches",
    "ResnetEpochs",
    "TimeseriesSteps",
    "TrainingRounds",
    "WorkloadSizes",
    "build_cnn",
    "build_gru",
    "build_lstm",
    "build_resnet",
    "chain_steps",
    "cifar10",
    "default_jit_compile",
    "epoch_figures",
    "flops",
    "global_batch",
    "imdb",
    "inference_figures",
    "keras_cache_dir",
    "mnist",
    "padded_batch",
    "padding_note",
    "sequence_figures",
    "sizes_for",
    "step_figures",
    "tflops",
    "weather",
]
