"""Finding a TPU: where to look, a bounded probe in a child process, one initialisation.

A TPU address that does not answer makes TensorFlow's connect call hang while holding the eager
context, which freezes every later TensorFlow call in the process (seen with TF 2.21: a CPU op
waited behind a hung ``experimental_connect_to_cluster``). So the first contact happens in a child
process that is killed at ``--tpu-timeout``; only a TPU that answered there is initialised here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

# Environment variables through which users and platforms name a TPU.
TPU_ENV = ("TPU_NAME", "COLAB_TPU_ADDR", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")


@dataclass(frozen=True)
class TpuTarget:
    """What to hand ``TPUClusterResolver(tpu=...)``, and where that came from."""

    tpu: str | None  # None: let the resolver read its own environment variables
    source: str


@dataclass(frozen=True)
class TpuProbe:
    """Outcome of the child-process probe."""

    ok: bool
    reason: str = ""
    cores: int = 0
    accelerator_type: str = ""


def find_target(environ: dict[str, str] | None = None) -> TpuTarget | str:
    """The TPU to try, or the reason there is none to try."""
    env = os.environ if environ is None else environ
    if env.get("TPU_NAME"):
        return TpuTarget(env["TPU_NAME"], "TPU_NAME")
    if env.get("COLAB_TPU_ADDR"):
        # Legacy Colab runtimes give host:port of the TPU worker, without a scheme.
        return TpuTarget("grpc://" + env["COLAB_TPU_ADDR"], "COLAB_TPU_ADDR")
    if env.get("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
        return TpuTarget(None, "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")
    if _local_tpu_present():
        return TpuTarget("local", "a local TPU runtime (TPU VM)")
    return (
        "no TPU_NAME, COLAB_TPU_ADDR or KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS set and no local TPU "
        "(no /dev/accel* or /dev/vfio device with libtpu installed)"
    )


def _local_tpu_present() -> bool:
    """A TPU VM: TPU device nodes and the libtpu runtime, without importing TensorFlow."""
    devices = glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
    return bool(devices) and importlib.util.find_spec("libtpu") is not None


def accelerator_type(environ: dict[str, str] | None = None) -> str:
    """The slice type (``v3-8``) as platforms advertise it, or "" when unknown."""
    env = os.environ if environ is None else environ
    for name in ("TPU_ACCELERATOR_TYPE", "ACCELERATOR_TYPE"):
        if env.get(name):
            return env[name]
    return "v2-8" if env.get("COLAB_TPU_ADDR") else ""


def probe(target: TpuTarget, timeout: float) -> TpuProbe:
    """Connect to and initialise the TPU in a child process bounded by ``timeout`` seconds."""
    refused = _unreachable(target.tpu, timeout)
    if refused:
        return TpuProbe(False, refused)
    command = [sys.executable, "-m", "pytest_tpu.tpu", json.dumps(target.tpu), str(os.getpid())]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        where = target.tpu or target.source
        return TpuProbe(False, f"{where} did not answer within {timeout:g}s (--tpu-timeout)")
    return _parse_child(done, target)


def _unreachable(tpu_address: str | None, timeout: float) -> str:
    """Why a ``grpc://host:port`` address takes no TCP connection, or "" when it does.

    TensorFlow's gRPC client retries a refused connection until the probe's timeout, so a
    stale address (a recycled Colab runtime) would cost the whole timeout without this check.
    """
    if not tpu_address or not tpu_address.startswith("grpc://"):
        return ""
    host, _, port = tpu_address.removeprefix("grpc://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=min(timeout, 5.0)):
            return ""
    except (OSError, ValueError) as exc:
        return f"{tpu_address} cannot be reached ({getattr(exc, 'strerror', None) or exc})"


def _parse_child(done: subprocess.CompletedProcess[str], target: TpuTarget) -> TpuProbe:
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return TpuProbe(False, f"probe of {target.tpu or target.source} failed: {tail[:200]}")
    answer: dict[str, Any] = json.loads(lines[-1])
    if "error" in answer:
        return TpuProbe(False, f"{target.tpu or target.source}: {answer['error']}")
    return TpuProbe(True, cores=int(answer["cores"]), accelerator_type=accelerator_type())


_RESOLVERS: dict[str | None, Any] = {}


def initialise(target: TpuTarget) -> Any:
    """Connect and initialise the TPU system at most once per process; returns the resolver."""
    if target.tpu in _RESOLVERS:
        return _RESOLVERS[target.tpu]
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target.tpu)
    if target.tpu != "local":
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    _RESOLVERS[target.tpu] = resolver
    return resolver


def _child(tpu_json: str) -> None:
    """Entry point of the child process: print one JSON line with the outcome."""
    try:
        resolver = initialise(TpuTarget(json.loads(tpu_json), "probe"))
        import tensorflow as tf

        cores = len(tf.config.list_logical_devices("TPU"))
        del resolver
        print(json.dumps({"cores": cores} if cores else {"error": "no TPU cores found"}))
    except Exception as exc:  # any failure is a reason, never a crash of the session
        first = (str(exc).strip().splitlines() or [""])[0]
        print(json.dumps({"error": f"{type(exc).__name__}: {first[:300]}"}))


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """In the probe child: end when the pytest that started it ends, however it ends.

    A killed pytest (SIGKILL, or SIGTERM, which Python does not turn into cleanup) cannot end
    its child, and a child stuck in TensorFlow's connect would run on for ever. Linux delivers
    SIGKILL on the parent's death (``PR_SET_PDEATHSIG``); a watchdog thread covers other systems
    and a parent that died before the request was made.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(70)  # nobody is left to read the answer


def end_on_sigterm() -> None:
    """SIGTERM ends the child even while TensorFlow blocks in C++ with its own SIGTERM handler
    (a preemption notice it only logs): the signal stays blocked in every thread, so no handler
    sees it, and one thread waits for it and exits."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not on POSIX
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # inherited by later threads

    def wait() -> None:
        signal.sigwait({signal.SIGTERM})
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=wait, daemon=True).start()


if __name__ == "__main__":
    # Before TensorFlow is imported, so every thread it starts inherits the blocked SIGTERM.
    end_on_sigterm()
    die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid())
    _child(sys.argv[1])
