"""A good neighbour: the plugin loads beside other well-known plugins, and in a session that
asks nothing of it, it prints nothing and adds nothing to other benchmarks' files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# pytest-parallel and pytest-reporter live outside the environment's site-packages (``make
# install`` puts them here): loaded in every session they would warn in every other test.
NEIGHBOURS = Path(
    os.environ.get("PYTEST_TPU_NEIGHBOURS", Path(__file__).parents[1] / ".venv/neighbours")
)

PLAIN_BENCH = """
def test_plain_bench(benchmark):
    benchmark(sum, range(100))
"""


@pytest.mark.parametrize("neighbour", ["pytest_parallel", "pytest_reporter"])
def test_loads_beside_plugins_with_plain_option_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, neighbour
):
    """pytest-parallel defines --workers (and ini workers), pytest-reporter --report: the same
    names in this plugin made argparse fail, exit 3, even for --help. Both load through their
    entry points once on the path."""
    if not (NEIGHBOURS / neighbour).is_dir():
        pytest.skip(f"{neighbour} is not installed in {NEIGHBOURS} (make install puts it there)")
    path = os.pathsep.join(filter(None, [str(NEIGHBOURS), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    pytester.makepyfile("def test_one():\n    pass\n")
    help_result = pytester.runpytest_subprocess("--help")
    assert help_result.ret == pytest.ExitCode.OK
    help_result.stdout.fnmatch_lines(["*--tpu-workers=N*"])
    help_result.stdout.fnmatch_lines(["*--tpu-report=PATH*"])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_plain_benchmarks_get_no_speedup_table(pytester: pytest.Pytester):
    pytester.makepyfile(PLAIN_BENCH)
    pytester.makeconftest(
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        "    print('loaded:', sorted(m for m in sys.modules if m.startswith('pytest_tpu.')))\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*not measured*")
    result.stdout.no_fnmatch_line("*no result for this workload*")
    # Nothing beyond the plugin's small core is imported when no feature is asked for.
    result.stdout.fnmatch_lines(
        [
            "loaded: ['pytest_tpu.options', 'pytest_tpu.parsers', 'pytest_tpu.plugin', "
            "'pytest_tpu.results', 'pytest_tpu.session']"
        ]
    )


def test_plain_session_adds_no_keys_to_benchmark_json(pytester: pytest.Pytester):
    pytester.makepyfile(PLAIN_BENCH)
    pytester.runpytest_subprocess("--benchmark-json=with.json", "-p", "no:cacheprovider")
    pytester.runpytest_subprocess(
        "--benchmark-json=without.json", "-p", "no:cacheprovider", "-p", "no:tpu"
    )
    (with_plugin,) = json.loads((pytester.path / "with.json").read_text())["benchmarks"]
    (without,) = json.loads((pytester.path / "without.json").read_text())["benchmarks"]
    assert with_plugin["extra_info"] == without["extra_info"] == {}
    assert with_plugin.keys() == without.keys()
    assert not any("pytest_tpu" in key for key in with_plugin["stats"])
