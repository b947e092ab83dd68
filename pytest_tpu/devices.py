"""Device discovery: which CPU, GPUs and TPU this process can use, found once per session.

Discovery imports TensorFlow, so it runs the first time a test needs a device, never at plugin
load. Every failure becomes a reason string ("no TPU: ..."), never an exception.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_tpu import peaks, tpu
from pytest_tpu.parsers import KINDS


@dataclass(frozen=True)
class Device:
    """One kind of device as TensorFlow sees it: its replicas and what is known of it."""

    kind: str
    name: str
    replicas: tuple[str, ...]  # TensorFlow device strings, one per replica
    details: dict[str, str] = field(default_factory=dict)
    peak: peaks.Peak | None = None
    peak_source: str | None = None  # how ``peak`` was found (a datasheet, /proc/cpuinfo)

    def describe(self) -> str:
        extra = ", ".join(f"{key} {value}" for key, value in self.details.items())
        count = f"{len(self.replicas)}x " if len(self.replicas) > 1 else ""
        return f"{count}{self.name}" + (f" ({extra})" if extra else "")


@dataclass
class Inventory:
    """The devices found and, for each kind not found, why."""

    devices: dict[str, Device] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    tpu_resolver: Any = None

    def header_line(self) -> str:
        """One line for the pytest header: every kind, found or with its reason."""
        parts = []
        for kind in KINDS:
            if kind in self.devices:
                parts.append(f"{kind}: {self.devices[kind].describe()}")
            else:
                parts.append(f"{kind}: none ({self.missing.get(kind, 'not probed')})")
        return "accelerators: " + " | ".join(parts)


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def discover(
    virtual_cpus: int | None,
    tpu_timeout: float,
    threads: int | None = None,
    shared: bool = False,
) -> Inventory:
    """Find every device; ``virtual_cpus`` splits the CPU and ``threads`` sizes the thread
    pools, both before TensorFlow initialises. ``shared``: other processes of this run (xdist
    workers) use the same GPUs, so memory growth is turned on (``share_gpus``)."""
    if shared:
        share_gpus()
    try:
        import tensorflow as tf
    except ImportError as exc:
        # Installing without a TensorFlow extra is allowed: device tests skip with this reason.
        reason = f"TensorFlow is not installed ({exc}); install one extra: cpu, gpu or tpu"
        return Inventory(missing=dict.fromkeys(KINDS, reason))
    inventory = Inventory()
    _set_threads(tf, threads)
    _split_cpu(tf, virtual_cpus)
    _find_tpu(inventory, tpu_timeout)
    _find_gpus(tf, inventory)
    _find_cpu(tf, inventory)
    return inventory


# Read by TensorFlow when it makes its GPU devices (not when it is imported): "true" makes each
# process take GPU memory as it needs it instead of nearly all of it at once.
GPU_GROWTH_ENV = "TF_FORCE_GPU_ALLOW_GROWTH"


def share_gpus() -> None:
    """Memory growth on, unless the user chose either way: pytest-xdist's workers share this
    machine's GPUs, they take turns timing their device benchmarks (``devicelock``) but each holds
    its memory for its whole life, and a worker that made its devices with TensorFlow's default
    would leave the next worker nearly none. Set when a worker first needs a device, so that
    xdist runs that use no device of this plugin's are left as they are; a test module that makes
    TensorFlow's devices when it is imported comes first, and needs the variable set by hand."""
    os.environ.setdefault(GPU_GROWTH_ENV, "true")


# Read by TensorFlow when it makes its thread pools, wherever that happens: set at configure time
# they also size the pools of a model built when a test module is imported, before any device is
# discovered (new-user trial 36: such a module ended --tpu-threads=1 in an INTERNALERROR).
THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


class ThreadsError(RuntimeError):
    """TensorFlow's thread pools were made before ``--tpu-threads`` could size them."""


# Thread counts the environment asked for before TensorFlow was imported, and so before it made
# its pools: only those pools are known to be sized (a conftest.py may start TensorFlow earlier).
_SIZED_EARLY: set[int] = set()


def size_threads_by_environment(threads: int) -> None:
    """Ask for ``threads`` threads per pool in the environment, before TensorFlow may start."""
    early = "tensorflow" not in sys.modules or all(
        os.environ.get(name) == str(threads) for name in THREAD_VARIABLES
    )
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if early:
        _SIZED_EARLY.add(threads)


def _set_threads(tf: Any, threads: int | None) -> None:
    if not threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as exc:
        if threads in _SIZED_EARLY:
            return  # started already, its pools sized by the environment
        raise ThreadsError(
            f"--tpu-threads={threads}: TensorFlow was initialised before pytest-tpu was "
            f"configured, so its thread pools can no longer be sized ({exc}); a conftest.py or "
            "plugin ran TensorFlow ops when it was imported: move them into a fixture, or set "
            f"TF_NUM_INTRAOP_THREADS={threads} and TF_NUM_INTEROP_THREADS={threads} in the "
            "environment"
        ) from exc


def _split_cpu(tf: Any, virtual_cpus: int | None) -> None:
    if not virtual_cpus or virtual_cpus < 2:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(virtual_cpus)]
        )
    except RuntimeError as exc:
        # TensorFlow was initialised before the first device was needed (for example by
        # module-level TensorFlow code): logical devices can no longer be changed.
        raise RuntimeError(
            f"--tpu-virtual-cpus={virtual_cpus}: TensorFlow was already initialised, so the CPU "
            f"can no longer be split ({exc}). Avoid running TensorFlow ops at import time."
        ) from exc


def _find_cpu(tf: Any, inventory: Inventory) -> None:
    names = local_devices(device.name for device in tf.config.list_logical_devices("CPU"))
    details = {"cores": str(cpu_cores())}
    from pytest_tpu.flops import cpu_peak

    found = cpu_peak()
    peak = peaks.Peak(found.flops * found.bfloat16_factor, found.flops) if found else None
    source = found.source if found else None
    replicas = names or ("/device:CPU:0",)
    inventory.devices["cpu"] = Device("cpu", cpu_model(), replicas, details, peak, source)


def local_devices(names: Iterable[str], tf_config: str | None = None) -> tuple[str, ...]:
    """The devices of this process: in a ``TF_CONFIG`` cluster TensorFlow also lists every
    other task's devices, which are not this worker's replicas (its strategy has its own)."""
    raw = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    task = _task_of(raw)
    if task is None:
        return tuple(names)
    prefix = f"/job:{task[0]}/replica:0/task:{task[1]}/"
    return tuple(name for name in names if "/job:" not in name or name.startswith(prefix))


def _task_of(tf_config: str) -> tuple[str, int] | None:
    """``(type, index)`` of this task in ``TF_CONFIG``; None without a usable one (the cluster
    plugin reports a malformed TF_CONFIG, discovery keeps every device)."""
    try:
        task = json.loads(tf_config).get("task", {}) if tf_config.strip() else {}
        return str(task["type"]), int(task.get("index", 0))
    except (ValueError, AttributeError, KeyError, TypeError):
        return None


def _find_gpus(tf: Any, inventory: Inventory) -> None:
    physical = tf.config.list_physical_devices("GPU")
    if not physical:
        inventory.missing["gpu"] = f"no GPU: {_why_no_gpu(tf)}"
        return
    info = tf.config.experimental.get_device_details(physical[0])
    name = str(info.get("device_name", "GPU"))
    details: dict[str, str] = {}
    if "compute_capability" in info:
        details["compute capability"] = ".".join(map(str, info["compute_capability"]))
    logical = tuple(device.name for device in tf.config.list_logical_devices("GPU"))
    peak = peaks.gpu_peak(name)
    if peak is not None:
        peak = peaks.Peak(peak.matrix * len(logical), peak.float32 * len(logical))
    inventory.devices["gpu"] = Device("gpu", name, logical, details, peak, "vendor datasheet")


def _why_no_gpu(tf: Any) -> str:
    if not tf.test.is_built_with_cuda():
        return "this TensorFlow build has no CUDA support (install the 'gpu' extra)"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return f"no GPU visible to TensorFlow (CUDA_VISIBLE_DEVICES={visible!r})"
    return "no GPU visible to TensorFlow (no CUDA device or driver found)"


def _find_tpu(inventory: Inventory, timeout: float) -> None:
    target = tpu.find_target()
    if isinstance(target, str):
        inventory.missing["tpu"] = f"no TPU: {target}"
        return
    outcome = tpu.probe(target, timeout)
    if not outcome.ok:
        inventory.missing["tpu"] = f"no TPU: {outcome.reason}"
        return
    import tensorflow as tf

    inventory.tpu_resolver = tpu.initialise(target)
    names = tuple(device.name for device in tf.config.list_logical_devices("TPU"))
    kind = outcome.accelerator_type or "TPU"
    peak = (
        peaks.tpu_peak(outcome.accelerator_type, len(names)) if outcome.accelerator_type else None
    )
    name = f"TPU {kind}" if outcome.accelerator_type else "TPU"
    inventory.devices["tpu"] = Device(
        "tpu", name, names, {"via": target.source}, peak, "vendor datasheet"
    )
