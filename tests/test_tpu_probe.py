"""The TPU probe: where it looks, and that a TPU that errors or hangs never stalls a session."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

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


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers: a hung TPU worker."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


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
    result = pytester.runpytest_subprocess("--tpu-timeout=20", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"*tpu: none (no TPU: grpc://127.0.0.1:{port} cannot be reached (*refused*"]
    )
