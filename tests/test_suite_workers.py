"""The suite's own workloads under ``--tpu-workers=2`` (MultiWorkerMirroredStrategy on loopback).

Each test runs a real workload at a tiny size in a 2-worker cluster and checks what a user of
``pytest benchmarks --tpu-workers=2`` relies on: it passes, the chief's results come back with the
cluster size, the scaling table is printed and no worker outlives the session.
"""

from __future__ import annotations

import pytest
from processes import alive, announced_pids

from pytest_tpu.devices import local_devices

PLUGIN = ("-p", "pytest_tpu.cluster", "-p", "no:cacheprovider", "--accelerator=cpu")

# Tiny sizes of the suite's workloads, driven the way benchmarks/ drives them.
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
            f"replicas={info.get('replicas')} devices={info.get('devices')} rounds={len(r.samples)}"
        )
"""


def test_suite_workloads_run_on_two_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE_TEST)
    pytester.makeconftest(PRINT_RESULTS)
    result = pytester.runpytest_subprocess(*PLUGIN, "--tpu-workers=2", "-v", timeout=300)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*pytest-tpu scaling*",
            "test_cnn*cpu*1 worker *",
            "test_cnn*cpu*2 workers *",
        ]
    )
    for name in ("test_matmul_bf16", "test_cnn", "test_lstm"):
        # Gathered from the chief: 2 replicas over the cluster, 1 local device per worker.
        result.stdout.fnmatch_lines(
            [f"RESULT test_suite.py::{name}*cpu* passed workers=2 replicas=2 devices=1 rounds=2"]
        )
    pids = announced_pids(result.outlines)
    assert len(pids) == 3  # 2 workers, then 1 for the table
    assert not [pid for pid in pids if alive(pid)]


def test_a_worker_keeps_only_its_own_devices() -> None:
    names = [f"/job:worker/replica:0/task:{task}/device:CPU:0" for task in (0, 1)]
    config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    assert local_devices(names, config) == (names[1],)
    assert local_devices(names, "") == tuple(names)
    assert local_devices(["/device:CPU:0"], config) == ("/device:CPU:0",)
