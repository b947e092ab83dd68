"""The tf.distribute strategy that spreads work over a device's replicas."""

from __future__ import annotations

import os
from typing import Any

from pytest_tpu.devices import Device


def make_strategy(device: Device, tpu_resolver: Any = None) -> Any:
    """TPUStrategy on a TPU; MultiWorkerMirroredStrategy when TF_CONFIG defines a cluster;
    MirroredStrategy over several replicas; else OneDeviceStrategy."""
    import tensorflow as tf

    if device.kind == "tpu":
        return tf.distribute.TPUStrategy(tpu_resolver)
    if os.environ.get("TF_CONFIG"):
        # A cluster is defined (--tpu-workers or the user's own): every worker joins it.
        from pytest_tpu.cluster import worker_strategy

        return worker_strategy()
    if len(device.replicas) > 1:
        return tf.distribute.MirroredStrategy(devices=list(device.replicas))
    return tf.distribute.OneDeviceStrategy(device.replicas[0])
