"""Local worker processes for ``--tpu-workers``: loopback ports, TF_CONFIG, start, wait and end.

Everything here is process plumbing with no pytest or TensorFlow import. The rule it keeps:
every process started here is ended before the caller returns, whether the workers finish, one
of them fails, or the caller is interrupted (SIGINT, or SIGTERM turned into an interrupt).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

LOOPBACK = "127.0.0.1"  # the only address workers are told about
END_WAIT_S = 5.0  # after SIGINT, how long a worker may take before SIGKILL
GRACE_S = 60.0  # after the first worker exits normally, how long the others may take
POLL_S = 0.2
# pytest exit codes that mean "the session ran to its end": ok, tests failed, no tests collected.
NORMAL_EXITS = frozenset({0, 1, 5})


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on the loopback address, chosen by the kernel.

    The sockets stay bound until all are chosen, so the ports differ; a port could still be
    taken between here and the worker's bind, which then fails loudly (no silent hang).
    """
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def tf_config(ports: Sequence[int], index: int) -> dict[str, Any]:
    """TF_CONFIG for worker ``index`` of a loopback cluster on ``ports`` (index 0 is chief)."""
    workers = [f"{LOOPBACK}:{port}" for port in ports]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def cluster_size(config: Mapping[str, Any]) -> int:
    """Tasks that take part in training: workers plus the chief, if the cluster names one."""
    cluster = config.get("cluster", {})
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def tf_config_problem(config: Any) -> str | None:
    """What makes a parsed ``TF_CONFIG`` unusable, or None: checked before anything trusts it."""
    if not isinstance(config, dict):
        return "it is not a JSON object"
    cluster = config.get("cluster")
    if not isinstance(cluster, dict):
        return "'cluster' is not an object of job names to address lists"
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not all(_is_address(a) for a in addresses):
            return f"cluster job {job!r} is not a list of 'host:port' addresses"
    if not cluster.get("worker") and not cluster.get("chief"):
        return "it names no 'worker' or 'chief' tasks"
    return _task_problem(config.get("task"), cluster)


def _task_problem(task: Any, cluster: Mapping[str, list[str]]) -> str | None:
    if not isinstance(task, dict):
        return "'task' is not an object with 'type' and 'index'"
    kind, index = task.get("type"), task.get("index", 0)
    if kind not in ("chief", "worker") or kind not in cluster:
        # MultiWorkerMirroredStrategy runs on chief and worker tasks only (no ps, evaluator).
        return f"task type {kind!r} is not 'chief' or 'worker' of the cluster"
    if not isinstance(index, int) or isinstance(index, bool):
        return f"task index {index!r} is not a whole number"
    if not 0 <= index < len(cluster[kind]):
        return f"task index {index} is outside job {kind!r} (it has {len(cluster[kind])} tasks)"
    return None


def _is_address(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def task_addresses(config: Mapping[str, Any]) -> dict[str, str]:
    """``"worker 1" -> "host:port"`` for every task that joins the collectives (chief, worker)."""
    cluster = config.get("cluster", {})
    return {
        f"{job} {index}": str(address)
        for job in ("chief", "worker")
        for index, address in enumerate(cluster.get(job) or [])
    }


def wait_for_peers(
    config: Mapping[str, Any], timeout: float, say: Callable[[str], None] = lambda _: None
) -> dict[str, str]:
    """Wait until every other task's port takes a TCP connection; the ones that never did.

    TensorFlow's cluster set-up waits for missing peers forever, in C++, with SIGTERM caught as a
    preemption notice: a stale ``TF_CONFIG`` would hang the session unkillably. This wait is in
    Python, bounded, and interruptible. While it waits, this task's own port accepts connections,
    so peers waiting the same way see each other instead of each waiting for the other's server.
    """
    task = config.get("task", {})
    me = f"{task.get('type')} {task.get('index', 0)}"
    addresses = task_addresses(config)
    peers = {name: address for name, address in addresses.items() if name != me}
    if not peers:
        return {}
    say(f"pytest-tpu: waiting up to {timeout:g}s for {_named(peers)} (TF_CONFIG)")
    with _listening(addresses.get(me)):
        deadline = time.monotonic() + timeout
        missing = _unreachable(peers)
        while missing and time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            missing = _unreachable({name: peers[name] for name in missing})
    return missing


def _named(peers: Mapping[str, str]) -> str:
    return ", ".join(f"{name} at {address}" for name, address in peers.items())


def _unreachable(peers: Mapping[str, str]) -> dict[str, str]:
    """The peers whose port refuses or ignores a connection, each with the reason."""
    out = {}
    for name, address in peers.items():
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
                pass
        except (OSError, ValueError) as exc:
            out[name] = f"{address} ({getattr(exc, 'strerror', None) or exc})"
    return out


@contextlib.contextmanager
def _listening(address: str | None) -> Iterator[None]:
    """Listen on this task's port while waiting; closed before TensorFlow binds it."""
    port = address.rpartition(":")[2] if address else ""
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("", int(port)))
        sock.listen(16)
    except (OSError, ValueError):
        pass  # the port is taken or unnamed: TensorFlow will say so; peers just wait longer
    try:
        yield
    finally:
        sock.close()


def is_chief(config: Mapping[str, Any]) -> bool:
    """TensorFlow's rule: the ``chief`` task, or worker 0 when the cluster has no chief."""
    task = config.get("task", {})
    if task.get("type") == "chief":
        return True
    has_chief = bool(config.get("cluster", {}).get("chief"))
    return not has_chief and task.get("type") == "worker" and int(task.get("index", 0)) == 0


@dataclass
class Worker:
    """One started worker process, in its own process group, with its output in ``log``."""

    index: int
    process: subprocess.Popen[bytes]
    log: Path
    _log_file: IO[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, signum: int) -> None:
        """Signal the worker and anything it started; only while it is unreaped, so the
        group id cannot have been reused by an unrelated process."""
        if not self.running():
            return
        with contextlib.suppress(ProcessLookupError):
            if hasattr(os, "killpg"):
                os.killpg(self.process.pid, signum)
            else:  # pragma: no cover - not on POSIX
                self.process.send_signal(signum)

    def close_log(self) -> None:
        self._log_file.close()

    def tail(self, lines: int = 15) -> str:
        """The last lines of the worker's output, for failure messages."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])


def start_workers(
    commands: Sequence[Sequence[str]],
    envs: Sequence[Mapping[str, str]],
    cwd: Path,
    log_dir: Path,
) -> list[Worker]:
    """Start one process per command; if one cannot start, end those already started."""
    started: list[Worker] = []
    try:
        for index, (command, env) in enumerate(zip(commands, envs, strict=True)):
            started.append(_start(index, command, env, cwd, log_dir))
    except BaseException:
        end_workers(started)
        raise
    return started


def _start(
    index: int, command: Sequence[str], env: Mapping[str, str], cwd: Path, log_dir: Path
) -> Worker:
    log = log_dir / f"worker-{index}.log"
    log_file = log.open("wb")
    try:
        # A session of its own: the terminal's Ctrl-C reaches only the controller, which then
        # ends the workers in order instead of racing them.
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        log_file.close()
        raise
    return Worker(index, process, log, log_file)


def wait_workers(
    workers: Sequence[Worker],
    tick: Callable[[], None] = lambda: None,
    grace: float = GRACE_S,
) -> list[int | None]:
    """Wait for every worker, calling ``tick`` between polls; returns the exit codes.

    A worker that crashes (exit code outside ``NORMAL_EXITS``) ends the others at once: its
    peers would otherwise block forever in their next collective. Once one worker has exited
    normally the others get ``grace`` seconds. Every worker is ended before returning.
    """
    first_exit: float | None = None
    try:
        while True:
            tick()
            codes = [worker.process.poll() for worker in workers]
            if all(code is not None for code in codes):
                return codes
            if any(code is not None and code not in NORMAL_EXITS for code in codes):
                break
            if any(code is not None for code in codes):
                first_exit = first_exit if first_exit is not None else time.monotonic()
                if time.monotonic() - first_exit > grace:
                    break
            time.sleep(POLL_S)
    finally:
        end_workers(workers)
    tick()
    return [worker.process.poll() for worker in workers]


def end_workers(workers: Sequence[Worker], wait: float = END_WAIT_S) -> None:
    """SIGINT every live worker's group, SIGKILL what is left after ``wait`` seconds, reap.

    SIGINT, not SIGTERM: a worker with a MultiWorkerMirroredStrategy lets TensorFlow catch
    SIGTERM as a preemption notice and carries on, while pytest turns SIGINT into a clean stop
    whenever the worker is in Python code. One blocked in a collective needs the SIGKILL.
    """
    for worker in workers:
        worker.signal_group(signal.SIGINT)
    deadline = time.monotonic() + wait
    for worker in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for worker in workers:
        worker.signal_group(signal.SIGKILL)
        # SIGKILL cannot be ignored; the bound only guards against an unkillable (D-state) one.
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=wait)
        worker.close_log()


def describe_exit(code: int | None) -> str:
    """ "exit code 3", "killed by SIGKILL" or "still running" (could not be reaped)."""
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while the block runs, so ``finally`` clauses end
    the workers (Python's default SIGTERM action exits without running them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def watch_parent(parent_pid: int, interval: float = 1.0) -> threading.Thread:
    """In a worker: exit when the controller that started it is gone (even after SIGKILL,
    which gives the controller no chance to end its workers)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(70)  # the controller is gone: nobody will read this worker's results

    thread = threading.Thread(target=watch, name="pytest-tpu-parent-watch", daemon=True)
    thread.start()
    return thread


class JsonLinesTail:
    """Reads the JSON lines appended to a file since the last read (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as stream:
                stream.seek(self._offset)
                data = stream.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]
