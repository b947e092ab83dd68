"""Other processes' use of the CPUs while a benchmark ran, and what the gate makes of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pytest_tpu.gate import contention
from pytest_tpu.gate.compare import Measured, decide
from pytest_tpu.gate.stats import Change

needs_proc = pytest.mark.skipif(
    contention.Meter.start().machine is None, reason="no /proc/stat on this system"
)


@needs_proc
def test_a_spinning_neighbour_is_seen_as_cores_other_processes_took():
    # It stops by itself too: a test run killed here would otherwise leave it spinning.
    spin = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.5)  # started and spinning
        meter = contention.Meter.start()
        time.sleep(1.0)  # this process idle: the spinner has a core to itself
        used = meter.use()
    finally:
        spinner.kill()
        spinner.wait()
    assert used is not None and used.others >= 0.5
    busy = used.others
    mine = contention.Meter.start()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # this process's own work is not a neighbour's
        pass
    own = mine.use()
    assert own is not None and own.others < busy and own.own >= 0.5


@pytest.mark.untimed  # no /proc, or microseconds against a 0.2 s floor
def test_nothing_is_measured_without_proc_or_over_a_moment(monkeypatch, tmp_path):
    assert contention.Meter.start().use() is None  # a few clock ticks tell nothing
    monkeypatch.setattr(contention, "STAT", str(tmp_path / "absent"))
    meter = contention.Meter.start()
    assert meter.machine is None and meter.use() is None


Q = (0.01, 1.9)  # a saved run on a quiet machine (others, own cores)
ONE = (0.01, 1.0)  # a single-threaded benchmark's saved run


@pytest.mark.untimed  # the rule on given figures
@pytest.mark.parametrize(
    ("saved", "now", "slower", "explained"),
    [
        ((Q, Q, Q), (1.0, 1.1), True, True),  # a neighbour took a core
        ((Q, Q, Q), (0.1, 1.9), True, False),  # background: hundredths of a core
        (((0.6, 1.5), (0.9, 1.2), (0.8, 1.3)), (1.0, 1.1), True, False),  # as busy as typical
        ((ONE, ONE), (1.0, 1.0), True, True),  # what it uses itself does not decide (g43)
        # g43: one saved run beside a neighbour (0.73) does not hide one now.
        (((0.73, 1.0), Q, Q, Q, Q), (0.92, 1.0), True, True),
        (((0.9, 1.0), (1.0, 1.0)), (0.0, 1.9), False, True),  # faster on a quieter machine
        (((0.9, 1.0), (1.0, 1.0)), (0.0, 1.9), True, False),  # slower on a quieter machine
        ((Q, (None, None)), (1.0, 1.1), True, False),  # a run saved before this was measured
        ((Q, Q), (None, None), True, False),  # not measured now (no /proc)
    ],
)
def test_a_change_beside_busier_or_quieter_neighbours_than_the_saved_runs_is_explained(
    saved, now, slower, explained
):
    # What the benchmark uses itself (each pair's second figure) does not decide (g43).
    why = contention.explains([others for others, _ in saved], now[0], slower, cpus=2)
    assert bool(why) is explained
    if explained:
        assert f"other processes took {now[0]:.2f} of 2 CPU cores" in why and "--compare-ref" in why


def change(estimate: float) -> Change:
    low, high = estimate - 0.1, estimate + 0.1
    return Change(
        estimate, low, high, 0.9999 if estimate > 0 else 0.0001, 0.2, 0.05, 4, "5 saved runs", True
    )


@pytest.mark.untimed  # the rule on given figures
def test_the_gate_does_not_blame_the_code_for_a_neighbour_a_kernel_cannot_see():
    # Trial 18: +85.5 % [+57.7, +118.1], "99.9 % sure", beside a neighbour spinning on one of
    # two cores, with the calibration kernel at -6.6 %.
    quiet = (0.01, 0.03, 0.02, 0.01, 0.02)
    busy = Measured(change(0.855), "calibrated", None, 5, quiet, 1.0)
    decision = decide(busy, 0.03)
    assert (decision.verdict, decision.regression) == ("inconclusive", False)
    assert "other processes took 1.00 of" in decision.reason
    alike = Measured(change(0.855), "calibrated", None, 5, quiet, 0.2)
    assert decide(alike, 0.03).regression  # the same change on a machine as quiet: the code
    older = Measured(change(0.855), "raw", None, 5, (None,) * 5, 1.0)
    assert decide(older, 0.03).regression  # saved before this was recorded: nothing to go on
    faster = Measured(change(-0.3), "raw", None, 5, (0.9, 1.0), 0.0)
    assert decide(faster, 0.03).verdict == "inconclusive"


@pytest.mark.untimed  # the rule on given figures
def test_a_row_short_of_the_gates_confidence_names_the_neighbour_too():
    # Trial 19: unchanged code beside a spinning neighbour read +42 %, 98.6 % sure, and its
    # `inconclusive` said nothing of the neighbour.
    quiet = (0.01, 0.03, 0.02, 0.01, 0.02)
    near = Change(0.42, -0.02, 0.95, 0.986, 0.9, 0.2, 4, "5 saved runs", True)
    busy = decide(Measured(near, "raw", None, 5, quiet, 1.0), 0.05)
    assert busy.verdict == "inconclusive"
    assert "cannot resolve a 5.0% change" in busy.reason
    assert "also, other processes took 1.00 of" in busy.reason
    calm = decide(Measured(near, "raw", None, 5, quiet, 0.02), 0.05)
    assert calm.verdict == "inconclusive" and "other processes" not in calm.reason


@needs_proc
def test_each_saved_run_keeps_the_cores_other_processes_took(pytester):
    pytester.makepyfile(
        """
        def test_sum(benchmark):
            benchmark(sum, range(20000))
        """
    )
    args = ("-p", "no:cacheprovider", "--benchmark-max-time=0.5", "--save-baseline=main")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    document = json.loads((pytester.path / ".pytest-tpu" / "baselines" / "main.json").read_text())
    (run,) = document["benchmarks"][0]["pytest_tpu"]["history"]
    assert 0 <= run["others"] <= (os.cpu_count() or 1)
    assert 0.5 <= run["own"] <= (os.cpu_count() or 1)  # its calls kept at least one core busy
