"""``--tpu-workers``: local MultiWorkerMirroredStrategy clusters, joining TF_CONFIG, and cleanup.

A cluster session checks what a user of ``pytest benchmarks --tpu-workers=2`` relies on: tests
pass, the chief's results come back with the cluster size, the scaling table is printed, a
failure in the workers is one line, and no worker outlives the session.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from processes import alive, announced_pids, interruptible
from test_keras_rules import IDIOMS, PER_REPLICA_MISTAKE

from pytest_tpu import cluster, workers
from pytest_tpu.devices import local_devices
from pytest_tpu.keras_rules import KERAS_ISSUE

PLUGIN = ("-p", "pytest_tpu.cluster", "-p", "no:cacheprovider", "--accelerator=cpu")

ALLREDUCE_TEST = """
import os

import tensorflow as tf

def test_allreduce(tpu_strategy, benchmark):
    @tf.function
    def step():
        def replica():
            return tf.distribute.get_replica_context().all_reduce("sum", tf.ones((32, 32)))
        return tpu_strategy.run(replica)

    # Every worker must call the collective the same number of times: fixed rounds.
    mwms = tf.distribute.MultiWorkerMirroredStrategy
    benchmark.extra_info["mwms"] = isinstance(tpu_strategy, mwms)
    benchmark.extra_info["in_sync"] = in_sync = tpu_strategy.num_replicas_in_sync
    benchmark.extra_info["growth"] = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    value = benchmark.pedantic(step, rounds=4, warmup_rounds=1)
    assert float(tpu_strategy.experimental_local_results(value)[0][0, 0]) == in_sync
"""

# The suite's own workloads at tiny sizes, driven the way benchmarks/ drives them.
SUITE_TEST = """
import pytest
from pytest_tpu.timing import SyncedRounds
from pytest_tpu.workloads import CnnEpochs, LstmSteps, MatmulChain, imdb, mnist

def _run(benchmark, accelerator, workload):
    # accelerator.sync after every call, as the suite does: it must work in a cluster.
    runner = SyncedRounds(workload, accelerator.sync)
    runner()  # the first call, apart
    benchmark.pedantic(runner, rounds=2, warmup_rounds=1)
    benchmark.extra_info.update(replicas=workload.replicas, devices=accelerator.replicas)

def test_matmul_bf16(benchmark, accelerator, tpu_strategy):
    chain = MatmulChain(64, "bfloat16", 4, strategy=tpu_strategy)
    _run(benchmark, accelerator, chain)

def test_cnn(benchmark, accelerator, tpu_strategy):
    epochs = CnnEpochs(mnist(256, "synthetic"), 32, tpu_strategy)
    _run(benchmark, accelerator, epochs)

def test_lstm(benchmark, accelerator, tpu_strategy):
    steps = LstmSteps(imdb(128, "synthetic"), 16, 2, tpu_strategy)
    _run(benchmark, accelerator, steps)
"""

PRINT_RESULTS = """
def pytest_terminal_summary(terminalreporter, config):
    from pytest_tpu.results import results_key
    for r in config.stash[results_key].results:
        info = r.extra_info
        terminalreporter.write_line(
            f"RESULT {r.nodeid} {r.outcome} workers={info.get('workers')} "
            f"in_sync={info.get('in_sync')} mwms={info.get('mwms')} "
            f"replicas={info.get('replicas')} devices={info.get('devices')} "
            f"rounds={len(r.samples)} growth={info.get('growth')}"
        )
"""


def test_worker_args_drop_controller_only_options():
    args = [
        "benchmarks",
        "--tpu-workers=2",
        "--junitxml",
        "out.xml",
        "--compare",
        "-v",
        "--save-baseline",
        "nightly",
        "--benchmark-json=b.json",
        "--tpu-virtual-cpus=2",
        "--basetemp=/tmp/x",
    ]
    assert cluster.worker_args(args, chief=True) == [
        "benchmarks",
        "-v",
        "--benchmark-json=b.json",
        "--tpu-virtual-cpus=2",
    ]
    assert cluster.worker_args(args, chief=False) == ["benchmarks", "-v", "--tpu-virtual-cpus=2"]


def test_scales_double_up_to_the_worker_count():
    assert cluster.scales(1) == [1]
    assert cluster.scales(2) == [1, 2]
    assert cluster.scales(6) == [1, 2, 4, 6]


def test_tf_config_is_loopback_and_names_the_chief():
    ports = workers.free_ports(3)
    assert len(set(ports)) == 3
    configs = [workers.tf_config(ports, index) for index in range(3)]
    assert configs[1]["cluster"]["worker"] == [f"127.0.0.1:{port}" for port in ports]
    assert [workers.is_chief(config) for config in configs] == [True, False, False]
    assert workers.cluster_size(configs[0]) == 3
    with_chief = {"cluster": {"chief": ["h:1"], "worker": ["h:2"]}, "task": {"type": "worker"}}
    assert not workers.is_chief(with_chief)
    assert workers.cluster_size(with_chief) == 2


def test_modules_do_not_import_tensorflow(pytester: pytest.Pytester):
    code = (
        "import sys, pytest_tpu.cluster, pytest_tpu.workers, pytest_tpu.scaling, "
        "pytest_tpu.profiling; print('tf' if 'tensorflow' in sys.modules else 'no tf')"
    )
    result = pytester.run(sys.executable, "-c", code)
    result.stdout.fnmatch_lines(["no tf"])


SKIPPED_TEST = """
import pytest

def test_skipped(accelerator):
    pytest.skip("nothing to measure here")
"""


def test_two_workers_end_to_end(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    # One session for all a user of --tpu-workers=2 relies on: a cluster costs four TensorFlow
    # processes (two workers, then one for the scaling table, beside the controller), so one
    # session runs a collective, a skip, the suite's workloads, plain Keras idioms and a Keras
    # mistake whose failure must become one line (three sessions took 139 s, session 81).
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    pytester.makepyfile(
        test_mw=ALLREDUCE_TEST,
        test_sk=SKIPPED_TEST,
        test_suite=SUITE_TEST,
        test_idioms=IDIOMS,
        test_mistake=PER_REPLICA_MISTAKE,
    )
    pytester.makeconftest(PRINT_RESULTS)
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", "-v", "-rs", timeout=600)
    result.assert_outcomes(passed=6, skipped=1, failed=1)
    result.stdout.fnmatch_lines(["SKIPPED * nothing to measure here"])
    result.stdout.fnmatch_lines(
        [
            "pytest-tpu: 2 worker(s) on 127.0.0.1:*, 127.0.0.1:* (pids *)",
            "test_mw.py::test_allreduce*cpu* PASSED*",
            "pytest-tpu: 1 worker(s) on 127.0.0.1:* (pids *)",
            "*pytest-tpu scaling*",
        ]
    )
    for row in (
        "test_allreduce*cpu*1 worker *rounds/s*1.00x*100%",
        "test_allreduce*cpu*2 workers *",
        "test_cnn*cpu*1 worker *",
        "test_cnn*cpu*2 workers *",
    ):
        result.stdout.fnmatch_lines(["*pytest-tpu scaling*", row])
    # Gathered from the chief. The workers share the machine's GPUs: memory growth on
    # (devices.share_gpus).
    result.stdout.fnmatch_lines(
        [
            "RESULT test_mw.py::test_allreduce*cpu* passed workers=2 in_sync=2 mwms=True *"
            " rounds=4 growth=true"
        ]
    )
    for name in ("test_matmul_bf16", "test_cnn", "test_lstm"):
        # 2 replicas over the cluster, 1 local device per worker.
        result.stdout.fnmatch_lines(
            [
                f"RESULT test_suite.py::{name}*cpu* passed workers=2 *"
                " replicas=2 devices=1 rounds=2 *"
            ]
        )
    # A per-replica failure in the workers: one line, with the rule that explains it.
    result.stdout.fnmatch_lines(
        [
            "test_mistake.py:*: ValueError: Attempt to convert a value … [per-replica values cut"
            f"*rule: under MultiWorkerMirroredStrategy (--tpu-workers)*({KERAS_ISSUE})"
        ]
    )
    assert not [line for line in result.outlines if "tf.Tensor" in line or "0: <" in line]
    pids = announced_pids(result.outlines)
    assert len(pids) == 3
    assert not [pid for pid in pids if alive(pid)]


def test_a_worker_keeps_only_its_own_devices() -> None:
    names = [f"/job:worker/replica:0/task:{task}/device:CPU:0" for task in (0, 1)]
    config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    assert local_devices(names, config) == (names[1],)
    assert local_devices(names, "") == tuple(names)
    assert local_devices(["/device:CPU:0"], config) == ("/device:CPU:0",)


CRASH_TEST = """
import json, os, time

def test_crash():
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        os._exit(3)
    time.sleep(600)
"""


def test_crashed_worker_ends_the_others(pytester: pytest.Pytester):
    pytester.makepyfile(test_crash=CRASH_TEST)
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the 2-worker cluster ended before this test finished: "
            "worker 0 (pid *): *; worker 1 (pid *): exit code 3*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    pids = announced_pids(result.outlines)
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)]


SLEEP_TEST = """
import json, os, time

def test_sleep():
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    open(f"started-{index}", "w").close()
    time.sleep(600)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_controller_ends_its_workers(pytester: pytest.Pytester, signum):
    pytester.makepyfile(test_sleep=SLEEP_TEST)
    basetemp = pytester.path / "basetemp"
    command = [sys.executable, "-m", "pytest", *PLUGIN, "--tpu-workers=2", f"--basetemp={basetemp}"]
    controller = pytester.popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=interruptible,
    )
    lines: list[str] = []
    try:
        assert controller.stdout is not None
        for raw in controller.stdout:
            lines.append(raw.decode(errors="replace"))
            if announced_pids(lines[-1:]):
                break
        # Interrupt once both workers are inside the test, as a user's Ctrl-C would.
        started = [pytester.path / f"started-{index}" for index in range(2)]
        for _ in range(600):
            if all(path.exists() for path in started):
                break
            time.sleep(0.1)
        assert all(path.exists() for path in started), "the workers never reached the test"
        controller.send_signal(signum)
        rest, _ = controller.communicate(timeout=60)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    output = "".join(lines) + rest.decode(errors="replace")
    assert controller.returncode == pytest.ExitCode.INTERRUPTED, output
    pids = announced_pids(lines)
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)], output


JOIN_TEST = """
import tensorflow as tf

def test_joined(tpu_strategy):
    assert isinstance(tpu_strategy, tf.distribute.MultiWorkerMirroredStrategy)
    assert tpu_strategy.num_replicas_in_sync == 1
"""


def test_user_defined_cluster_is_joined_not_started(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    monkeypatch.delenv(cluster.PARENT_ENV, raising=False)
    pytester.makepyfile(test_join=JOIN_TEST)
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pytest-tpu cluster: worker 0 (chief) of 1"])
    result.stdout.no_fnmatch_line("*worker(s) on*")


def test_malformed_tf_config_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*TF_CONFIG is not valid JSON*"])


def test_workers_cannot_combine_with_xdist(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tpu-workers cannot be combined with pytest-xdist's -n*"])


def test_no_worker_process_outlives_the_tests():
    # Guard for the tests above: this process started no worker of its own.
    assert cluster.PARENT_ENV not in os.environ


def test_a_pod_slice_name_reaches_the_tpu_resolver_unchanged():
    # As far as this machine can go: the slice name becomes TPUClusterResolver(tpu=<name>).
    # Resolving it needs the Cloud TPU API, which these machines cannot (and must not) reach.
    from pytest_tpu import tpu

    target = tpu.find_target({"TPU_NAME": "my-pod-v4-32"})
    assert isinstance(target, tpu.TpuTarget)
    assert (target.tpu, target.source) == ("my-pod-v4-32", "TPU_NAME")
    assert tpu.accelerator_type({"TPU_ACCELERATOR_TYPE": "v4-32"}) == "v4-32"


NON_CHIEF_FAILURES = """
import json, os

def index():
    return json.loads(os.environ["TF_CONFIG"])["task"]["index"]

def test_passes_everywhere():
    pass

def test_fails_on_worker_1():
    assert index() != 1

def test_crashes_worker_1():
    if index() == 1:
        os._exit(1)
"""


def test_failures_on_non_chief_workers_count(pytester: pytest.Pytester):
    pytester.makepyfile(test_nc=NON_CHIEF_FAILURES)
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", "-rf", timeout=300)
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*failed on worker 1 of 2; the chief (worker 0) passed*",
            "pytest-tpu: worker 1 of 2 ended (exit code 1) before finishing this test; *",
            "FAILED test_nc.py::test_fails_on_worker_1 - assert 1 != 1*",
            "FAILED test_nc.py::test_crashes_worker_1 - pytest-tpu: worker 1 of 2 ended*",
        ]
    )
    assert not [pid for pid in announced_pids(result.outlines) if alive(pid)]


def test_merger_waits_for_every_worker_and_keeps_the_chief_order():
    from pytest_tpu.merge import ReportMerger

    def report(nodeid: str, when: str, outcome: str = "passed") -> dict[str, object]:
        return {"nodeid": nodeid, "when": when, "outcome": outcome, "longrepr": None}

    merger = ReportMerger(2)
    for when in ("setup", "call", "teardown"):
        merger.add(0, report("t::a", when))
    assert merger.release() == []  # worker 1 has not finished t::a yet
    merger.add(1, report("t::a", "setup", "failed"))
    merger.add(1, report("t::a", "teardown"))
    released = merger.release()
    assert [(r["when"], r["outcome"]) for r in released] == [
        ("setup", "failed"),
        ("teardown", "passed"),
    ]


@pytest.mark.parametrize(
    "tf_config",
    [
        '{"cluster": []}',
        '{"cluster": {"worker": null}, "task": {"type": "worker", "index": 0}}',
        '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}',
        '{"cluster": {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}, '
        '"task": {"type": "ps", "index": 0}}',
        '{"cluster": {"worker": ["no-port"]}, "task": {"type": "worker", "index": 0}}',
        "[1]",
    ],
    ids=["cluster-list", "worker-null", "index-outside", "ps-task", "no-port", "not-object"],
)
def test_unusable_tf_config_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tf_config: str
):
    monkeypatch.setenv("TF_CONFIG", tf_config)
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: TF_CONFIG cannot be used: *"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_tensorflow_refusing_the_cluster_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    config = {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    monkeypatch.delenv(cluster.PARENT_ENV, raising=False)
    # Stands in for TensorFlow's own objections to a TF_CONFIG that looks valid.
    pytester.makeconftest(
        """
        import tensorflow as tf

        def refuse(*args, **kwargs):
            raise ValueError("There is no id for task_type 'worker'\\nmore detail")

        tf.distribute.MultiWorkerMirroredStrategy = refuse
        """
    )
    pytester.makepyfile(test_x="def test_x(accelerator): pass\ndef test_y(accelerator): pass")
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: TF_CONFIG: TensorFlow cannot join this cluster: "
            "ValueError: There is no id for task_type 'worker'"
        ]
    )
    assert "error during collection" not in result.stdout.str()


def stale_tf_config() -> str:
    """Two workers, this one the chief; the other's port has nothing listening."""
    ports = workers.free_ports(2)
    addresses = [f"127.0.0.1:{port}" for port in ports]
    return json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": 0}})


DEVICE_TEST = "def test_on_device(accelerator):\n    pass\n"


def test_a_stale_tf_config_ends_the_session_instead_of_hanging(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TF_CONFIG", stale_tf_config())
    monkeypatch.setenv(cluster.PEER_TIMEOUT_ENV, "3")
    monkeypatch.delenv(cluster.PARENT_ENV, raising=False)
    pytester.makepyfile(test_dev=DEVICE_TEST)
    # Without the bounded wait this run never ends: the timeout only detects that hang.
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=240)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["pytest-tpu: waiting up to 3s for worker 1 at 127.0.0.1:*"])
    result.stderr.fnmatch_lines(
        ["ERROR: TF_CONFIG names a cluster whose other tasks did not answer within 3s: worker 1*"]
    )


def test_sigterm_ends_the_wait_for_a_stale_cluster(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TF_CONFIG", stale_tf_config())
    monkeypatch.setenv(cluster.PEER_TIMEOUT_ENV, "600")
    monkeypatch.delenv(cluster.PARENT_ENV, raising=False)
    pytester.makepyfile(test_dev=DEVICE_TEST)
    command = [sys.executable, "-m", "pytest", *PLUGIN, f"--basetemp={pytester.path / 'bt'}"]
    session = pytester.popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    lines: list[str] = []
    try:
        assert session.stdout is not None
        for raw in session.stdout:
            lines.append(raw.decode(errors="replace"))
            if "waiting up to" in lines[-1]:
                break
        session.send_signal(signal.SIGTERM)
        rest, _ = session.communicate(timeout=120)  # detects a hang; asserts no duration
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
    output = "".join(lines) + rest.decode(errors="replace")
    assert session.returncode == pytest.ExitCode.INTERRUPTED, output
