"""pytest-xdist: benchmarks never overlap on one device, and every worker's results arrive."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("xdist")

BENCHES = """
import os, time, pytest

@pytest.mark.parametrize("i", range(4))
def test_bench(benchmark, i):
    def work():
        with open("spans.log", "a") as log:
            log.write(f"{os.environ['PYTEST_XDIST_WORKER']} start {time.monotonic()}\\n")
        sum(range(200_000))
        with open("spans.log", "a") as log:
            log.write(f"{os.environ['PYTEST_XDIST_WORKER']} end {time.monotonic()}\\n")
    benchmark.extra_info.update(metric="time", unit="s")
    benchmark.pedantic(work, rounds=5)
"""


def _spans(text: str) -> list[tuple[str, str]]:
    return [tuple(line.split()[:2]) for line in text.splitlines()]  # type: ignore[misc]


def test_two_workers_take_turns_and_all_results_are_gathered(pytester: pytest.Pytester):
    pytester.makepyfile(BENCHES)
    result = pytester.runpytest_subprocess("-n", "2", "--junitxml=junit.xml", "-p", "xdist")
    result.assert_outcomes(passed=4)
    spans = _spans((pytester.path / "spans.log").read_text())
    assert len({worker for worker, _ in spans}) == 2, "both workers should have run benchmarks"
    # Every round ends before the next one starts, whichever worker runs it.
    assert [event for _, event in spans] == ["start", "end"] * 20
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    measured = [case for case in cases if case.find("properties/property") is not None]
    assert len(measured) == 4


def test_a_file_where_the_lock_directory_goes_does_not_break_benchmarks(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    temp = pytester.path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    (temp / f"pytest-tpu-locks-{os.getuid()}").write_text("in the way")
    pytester.makepyfile(
        test_locked="""
        def test_one(benchmark):
            benchmark.pedantic(sum, (range(10),), rounds=2)

        def test_two(benchmark):
            benchmark.pedantic(sum, (range(10),), rounds=2)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=2)
    assert (temp / f"pytest-tpu-locks-{os.getuid()}-1").is_dir()
