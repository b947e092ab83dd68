"""pytest-xdist: device benchmarks never overlap on one device, every worker's results arrive,
and pytest-benchmark keeps its own behaviour (off under xdist) for every other benchmark."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("xdist")

BENCHES = """
import os, time, pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")

@pytest.mark.parametrize("i", range(4))
def test_bench(benchmark, accelerator, i):
    def work():
        with open("spans.log", "a") as log:
            log.write(f"{WORKER} start {time.monotonic()}\\n")
        sum(range(200_000))
        with open("spans.log", "a") as log:
            log.write(f"{WORKER} end {time.monotonic()}\\n")
    benchmark.extra_info.update(metric="time", unit="s")
    benchmark.pedantic(work, rounds=5)
"""


def _spans(text: str) -> list[tuple[str, str]]:
    return [tuple(line.split()[:2]) for line in text.splitlines()]  # type: ignore[misc]


def test_two_workers_take_turns_and_all_results_are_gathered(pytester: pytest.Pytester):
    pytester.makepyfile(BENCHES)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--junitxml=junit.xml", "-p", "xdist", "--accelerator=cpu", "--benchmark-json=j"
    )
    result.assert_outcomes(passed=4)
    spans = _spans((pytester.path / "spans.log").read_text())
    assert len({worker for worker, _ in spans}) == 2, "both workers should have run benchmarks"
    # Every round ends before the next one starts, whichever worker runs it.
    assert [event for _, event in spans] == ["start", "end"] * 20
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    measured = [case for case in cases if case.find("properties/property") is not None]
    assert len(measured) == 4
    # The figures reach the controller on the reports; no worker writes a partial file.
    assert not (pytester.path / "j").exists()


PLAIN = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_plain(benchmark, i):
    benchmark(sum, range(1000))
"""


def _outputs(pytester: pytest.Pytester, *plugin: str) -> tuple[list[str], list[str]]:
    """The files pytest-benchmark leaves after ``-n 2`` with its file options, and its lines."""
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "xdist", *plugin, "--benchmark-json=b.json", "--benchmark-autosave"
    )
    result.assert_outcomes(passed=6)
    files = sorted(str(p.relative_to(pytester.path)) for p in pytester.path.rglob("*.json"))
    lines = [line for line in result.outlines + result.errlines if "benchmark" in line.lower()]
    return files, [line for line in lines if "plugins:" not in line and "rootdir" not in line]


def test_plain_benchmarks_under_xdist_behave_as_without_the_plugin(pytester: pytest.Pytester):
    pytester.makepyfile(PLAIN)
    without = _outputs(pytester, "-p", "no:tpu")
    with_plugin = _outputs(pytester)
    assert with_plugin == without
    assert not (pytester.path / "b.json").exists()


def test_device_benchmark_json_is_complete_without_xdist(pytester: pytest.Pytester):
    pytester.makepyfile(BENCHES)
    result = pytester.runpytest_subprocess("--accelerator=cpu", "--benchmark-json=b.json")
    result.assert_outcomes(passed=4)
    data = json.loads((pytester.path / "b.json").read_text())
    assert len(data["benchmarks"]) == 4


def test_a_file_where_the_lock_directory_goes_breaks_nothing_and_no_lock_file_stays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    temp = pytester.path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    (temp / f"pytest-tpu-locks-{os.getuid()}").write_text("in the way")
    pytester.makepyfile(
        test_locked="""
        def test_one(benchmark, accelerator):
            benchmark.pedantic(sum, (range(10),), rounds=2)

        def test_two(benchmark, accelerator):
            benchmark.pedantic(sum, (range(10),), rounds=2)
        """
    )
    args = ("-n", "2", "-p", "no:cacheprovider", "--accelerator=cpu", "--testrunuid=run13")
    result = pytester.runpytest_subprocess(*args, timeout=300)
    result.assert_outcomes(passed=2)
    used = temp / f"pytest-tpu-locks-{os.getuid()}-1"
    assert used.is_dir()
    # The run's lock file is gone with the run (seen before: one per run and kind piled up).
    assert not list(used.glob("*.lock"))


GROWTH = """
import os

def _write():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open("growth.log", "a") as log:
        log.write(f"{worker} {os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH')}\\n")

def test_plain():
    _write()

def test_device(accelerator):
    _write()
"""


def _growth(pytester: pytest.Pytester, passed: int, *args: str) -> set[str]:
    """What the tests of one session saw of TF_FORCE_GPU_ALLOW_GROWTH."""
    (pytester.path / "growth.log").unlink(missing_ok=True)
    result = pytester.runpytest_subprocess("--accelerator=cpu", *args)
    result.assert_outcomes(passed=passed)
    return {line.split()[1] for line in (pytester.path / "growth.log").read_text().splitlines()}


@pytest.mark.parametrize("given", [None, "false"])
def test_workers_that_use_a_device_take_gpu_memory_as_they_need_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, given: str | None
):
    # Workers take turns timing a device, but each holds the GPU memory it took for its whole
    # life, and TensorFlow's default takes nearly all of it (devices.share_gpus).
    module = pytester.makepyfile(GROWTH).name
    if given is None:
        monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    else:
        monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", given)
    device = f"{module}::test_device"
    assert _growth(pytester, 1, "-n", "2", "-p", "xdist", device) == {given or "true"}
    if given is None:
        # Without workers the environment is the user's; so it is for workers that use no
        # device of this plugin's.
        assert _growth(pytester, 2, "-p", "no:xdist") == {"None"}
        assert _growth(pytester, 1, "-n", "2", "-p", "xdist", f"{module}::test_plain") == {"None"}
