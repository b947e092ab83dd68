"""The tf.distribute strategy that spreads work over a device's replicas."""

from __future__ import annotations

from typing import Any

from pytest_tpu.devices import Device


def make_strategy(device: Device, tpu_resolver: Any = None) -> Any:
    """TPUStrategy on a TPU, MirroredStrategy over several replicas, else OneDeviceStrategy."""
    import tensorflow as tf

    if device.kind == "tpu":
        return tf.distribute.TPUStrategy(tpu_resolver)
    if len(device.replicas) > 1:
        return tf.distribute.MirroredStrategy(devices=list(device.replicas))
    return tf.distribute.OneDeviceStrategy(device.replicas[0])
