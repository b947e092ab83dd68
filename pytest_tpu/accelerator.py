"""The ``accelerator`` fixture's object: the device under test, with placement and sync."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from pytest_tpu.devices import Device


@dataclass(frozen=True)
class Accelerator:
    """The device a test runs on.

    ``devices`` are TensorFlow device strings, one per replica; ``scope()`` places ops on the
    first replica (use ``tpu_strategy`` to spread work over all of them).
    """

    device: Device

    @property
    def kind(self) -> str:
        return self.device.kind

    @property
    def name(self) -> str:
        return self.device.name

    @property
    def devices(self) -> tuple[str, ...]:
        return self.device.replicas

    @property
    def replicas(self) -> int:
        return len(self.device.replicas)

    @property
    def peak_flops(self) -> float | None:
        """Vendor peak FLOP/s of the whole device in its fastest matrix dtype; None if unknown."""
        return self.device.peak.matrix if self.device.peak else None

    @property
    def peak_source(self) -> str | None:
        """Where the peak comes from: "vendor datasheet", or the CPU's /proc/cpuinfo figures."""
        return self.device.peak_source

    def peak_flops_for(self, dtype: str) -> float | None:
        """Peak FLOP/s for ``dtype`` ("float32", "bfloat16", "float16"); None if unknown."""
        if self.device.peak is None:
            return None
        return self.device.peak.float32 if dtype == "float32" else self.device.peak.matrix

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Place the ops created inside on this device's first replica."""
        import tensorflow as tf

        with tf.device(self.devices[0]):
            yield

    def sync(self) -> None:
        """Block until every op already dispatched to any device of this process has finished."""
        import tensorflow as tf

        try:
            tf.test.experimental.sync_devices()
        except tf.errors.OpError:
            # In a multi-worker cluster TensorFlow lists the other workers' devices too, and
            # sync_devices() sends them an op that this process's eager context cannot run
            # ("Haven't set up remote eager worker"). Their work is theirs to wait for; the
            # collectives tie the workers' steps together, and the workloads fetch a scalar
            # each round, which waits for them. Here, wait for this process's own devices.
            sync_local(self.devices)

    def memory(self) -> dict[str, int] | None:
        """Bytes in use and peak (``current``, ``peak``) on the first replica.

        None on the CPU: TensorFlow's CPU allocator keeps no statistics and reports zeros,
        which would read as "uses no memory".
        """
        if self.kind == "cpu":
            return None
        import tensorflow as tf

        try:
            info = tf.config.experimental.get_memory_info(self.devices[0])
        except (ValueError, RuntimeError):
            return None
        return {"current": int(info["current"]), "peak": int(info["peak"])}

    @property
    def memory_in_use(self) -> int | None:
        info = self.memory()
        return info["current"] if info else None

    @property
    def memory_peak(self) -> int | None:
        info = self.memory()
        return info["peak"] if info else None

    def reset_memory_peak(self) -> None:
        """Start a new peak-memory measurement where TensorFlow supports it."""
        if self.kind == "cpu":
            return
        import tensorflow as tf

        with suppress(ValueError, RuntimeError):
            tf.config.experimental.reset_memory_stats(self.devices[0])

    def __str__(self) -> str:
        return f"{self.kind}: {self.device.describe()}"


def sync_local(devices: tuple[str, ...]) -> None:
    """What ``sync_devices()`` does, for ``devices`` only: a SyncDevice op on each, then wait
    for the eager queue (which holds the ops under asynchronous execution)."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    for name in devices:
        with tf.device(name):
            tf.raw_ops.SyncDevice()
    context.async_wait()
