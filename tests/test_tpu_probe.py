"""The TPU probe: where it looks, and that a TPU that errors or hangs never stalls a session."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from processes import alive, pids, read_proc

from pytest_tpu import peaks, tpu

CPU_TEST = """
def test_on_cpu(accelerator):
    assert accelerator.kind == "cpu"
"""


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"TPU_NAME": "my-pod-slice"}, ("my-pod-slice", "TPU_NAME")),
        ({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, ("grpc://10.0.0.2:8470", "COLAB_TPU_ADDR")),
        (
            {"KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS": "grpc://h:8470"},
            (None, "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"),
        ),
        ({"TPU_NAME": "named", "COLAB_TPU_ADDR": "h:1"}, ("named", "TPU_NAME")),
    ],
)
def test_the_resolver_gets_the_tpu_the_environment_names(environ, expected):
    target = tpu.find_target(environ)
    assert isinstance(target, tpu.TpuTarget)
    assert (target.tpu, target.source) == expected


def test_no_tpu_anywhere_gives_a_reason_naming_what_was_checked():
    reason = tpu.find_target({})
    assert isinstance(reason, str)
    assert "TPU_NAME" in reason and "COLAB_TPU_ADDR" in reason and "libtpu" in reason


def test_slice_type_comes_from_the_platform_and_sets_the_peak():
    assert tpu.accelerator_type({"TPU_ACCELERATOR_TYPE": "v4-8"}) == "v4-8"
    assert tpu.accelerator_type({"COLAB_TPU_ADDR": "h:8470"}) == "v2-8"
    assert tpu.accelerator_type({}) == ""
    v3 = peaks.tpu_peak("v3-8", replicas=8)  # 4 chips, 2 cores each
    assert v3 is not None and v3.matrix == pytest.approx(4 * 123e12)
    assert peaks.tpu_peak("v9-8", replicas=8) is None


@pytest.mark.parametrize(
    ("name", "matrix"),
    [("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA A100-SXM4-40GB", 312e12), ("Tesla T4", 65e12)],
)
def test_known_gpus_have_a_peak_and_unknown_ones_none(name, matrix):
    peak = peaks.gpu_peak(name)
    assert peak is not None and peak.matrix == pytest.approx(matrix)
    assert peaks.gpu_peak("Imaginary GPU 9000") is None


class SilentServer:
    """A loopback port that accepts connections and never answers: a hung TPU worker."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port: int = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.server.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def silent_listener(silent_server: SilentServer) -> int:
    """The port of a hung TPU worker."""
    return silent_server.port


def test_a_tpu_that_never_answers_ends_at_the_timeout(pytester, monkeypatch, silent_listener):
    monkeypatch.setenv("TPU_NAME", f"grpc://127.0.0.1:{silent_listener}")
    pytester.makepyfile(CPU_TEST)
    result = pytester.runpytest_subprocess("--tpu-timeout=3", "--accelerator=all", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            f"*tpu: none (no TPU: grpc://127.0.0.1:{silent_listener} did not answer within 3s "
            "(--tpu-timeout))*",
        ]
    )


def test_a_tpu_address_that_refuses_is_reported_and_the_session_goes_on(pytester, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("COLAB_TPU_ADDR", f"127.0.0.1:{port}")
    pytester.makepyfile(CPU_TEST)
    # Generous: a refused port answers at once, but the probe imports TensorFlow first, and in a
    # full suite run on a loaded machine that took it past 20 s once.
    result = pytester.runpytest_subprocess("--tpu-timeout=90", "-v")
    # COLAB_TPU_ADDR says a TPU may be there: the TPU run is parametrized and skips, the CPU's runs.
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [f"*tpu: none (no TPU: grpc://127.0.0.1:{port} cannot be reached (*refused*"]
    )


def _probe_children(parent: int) -> list[int]:
    """Pids of the TPU probe processes whose parent is ``parent``."""
    found = []
    for pid in pids():
        cmdline, stat = read_proc(pid, "cmdline"), read_proc(pid, "stat")
        try:
            ppid = int((stat or b"").rsplit(b")", 1)[1].split()[1])
        except (ValueError, IndexError):  # gone
            continue
        if ppid == parent and b"pytest_tpu.tpu" in (cmdline or b"").split(b"\0"):
            found.append(pid)
    return found


def _wait_until(condition: Callable[[], bool], seconds: float = 120.0) -> bool:
    """Poll ``condition``; the bound only turns a hang into a failure, it is not asserted."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("victim", "signum"),
    [("pytest", signal.SIGTERM), ("pytest", signal.SIGKILL), ("probe", signal.SIGTERM)],
    ids=["pytest-SIGTERM", "pytest-SIGKILL", "probe-SIGTERM"],
)
def test_the_probe_child_dies_with_pytest_and_on_sigterm(
    pytester, monkeypatch, silent_server, victim, signum
):
    # The pre-check's own connection is the first; TensorFlow's connect makes the next ones.
    monkeypatch.setenv("TPU_NAME", f"grpc://127.0.0.1:{silent_server.port}")
    pytester.makepyfile(CPU_TEST)
    command = [sys.executable, "-m", "pytest", "--tpu-timeout=600", "-p", "no:cacheprovider"]
    session = pytester.popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    children: list[int] = []
    try:
        assert _wait_until(lambda: bool(_probe_children(session.pid)))
        children = _probe_children(session.pid)
        # Signal once the child is inside TensorFlow's connect, where it used to hang for ever.
        assert _wait_until(lambda: len(silent_server.held) >= 2)
        time.sleep(2)
        os.kill(session.pid if victim == "pytest" else children[0], signum)
        assert _wait_until(lambda: not alive(children[0])), "the probe child outlived its end"
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if session.poll() is None:
            session.kill()
        session.wait()
