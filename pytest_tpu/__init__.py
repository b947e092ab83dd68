"""pytest-tpu: performance-regression testing of TensorFlow work on CPU, GPU and TPU.

Importing this package never imports TensorFlow. The public names are loaded on first use, so
that loading the plugin (``pytest --help``, a session without device tests) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from pytest_tpu.options import selected_workload_size

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
    "selected_workload_size",
    "train_step_flops",
    "utilisation",
]

_HOMES = {
    "Accelerator": "pytest_tpu.accelerator",
    "Device": "pytest_tpu.devices",
    "Inventory": "pytest_tpu.devices",
    "selected_workload_size": "pytest_tpu.options",
    **dict.fromkeys(
        (
            "Utilisation",
            "count_flops",
            "cpu_peak",
            "device_utilisation",
            "train_step_flops",
            "utilisation",
        ),
        "pytest_tpu.flops",
    ),
}


def __getattr__(name: str) -> Any:
    """PEP 562: import a public name's module the first time the name is used."""
    if name not in _HOMES:
        raise AttributeError(f"module 'pytest_tpu' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
