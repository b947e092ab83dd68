"""pytest-tpu: performance-regression testing of TensorFlow work on CPU, GPU and TPU.

Importing this package never imports TensorFlow.
"""

from __future__ import annotations

from pytest_tpu.accelerator import Accelerator
from pytest_tpu.devices import Device, Inventory
from pytest_tpu.flops import (
    Utilisation,
    count_flops,
    cpu_peak,
    device_utilisation,
    train_step_flops,
    utilisation,
)

__version__ = "0.1.0"
__all__ = [
    "Accelerator",
    "Device",
    "Inventory",
    "Utilisation",
    "__version__",
    "count_flops",
    "cpu_peak",
    "device_utilisation",
    "train_step_flops",
    "utilisation",
]
