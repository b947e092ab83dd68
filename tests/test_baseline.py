"""Baseline files: format, atomic saves, strict loading, names, environment."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_tpu.gate import baseline as store
from pytest_tpu.options import parse_baseline_name
from pytest_tpu.results import BenchResult

ENV = {"python": "3.11.7", "cpu_model": "AMD EPYC", "commit": "abc", "dirty": False}


def result(nodeid="test_x.py::test_a[cpu]", samples=(0.01, 0.011, 0.012), **extra):
    info = {"accelerator": "cpu", "dtype": "float32", "metric": "time", "unit": "s", **extra}
    info[store.CALIBRATION_KEY] = [0.001, 0.0011]
    return BenchResult(
        nodeid=nodeid,
        name="test_a[cpu]",
        group=None,
        params={"accelerator": "cpu"},
        extra_info=info,
        samples=tuple(samples),
    )


def saved(tmp_path: Path) -> Path:
    return store.save(tmp_path, "main", [result()], ENV, left_out=["test_x.py::test_b"])


def test_round_trip(tmp_path):
    loaded = store.load(saved(tmp_path))
    side = loaded.sides["test_x.py::test_a[cpu]"]
    assert side.samples == (0.01, 0.011, 0.012)
    assert side.calibration == (0.001, 0.0011)
    assert not side.interleaved  # two timings for three rounds: before/after, not per round
    assert side.environment["dtype"] == "float32" and side.environment["commit"] == "abc"
    assert loaded.left_out == ["test_x.py::test_b"]
    assert store.list_names(tmp_path) == ["main"]


def test_file_is_pytest_benchmark_format(tmp_path):
    document = json.loads(saved(tmp_path).read_text())
    bench = document["benchmarks"][0]
    assert {"machine_info", "commit_info", "datetime", "version"} <= set(document)
    assert bench["stats"]["data"] == [0.01, 0.011, 0.012]
    assert bench["stats"]["median"] == 0.011
    assert store.CALIBRATION_KEY not in bench["extra_info"]
    assert document["pytest_tpu"]["schema"] == store.SCHEMA


def test_pytest_benchmark_compare_reads_it(tmp_path):
    path = saved(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "test_a[cpu]" in done.stdout


def interleaved_result(samples=(0.01, 0.011, 0.012), calibration=(0.008, 0.0081, 0.0079)):
    info = {"accelerator": "cpu", "metric": "time"}
    info[store.CALIBRATION_KEY] = list(calibration)
    info[store.INTERLEAVED_KEY] = True
    return BenchResult("test_x.py::test_a[cpu]", "test_a[cpu]", None, {}, info, tuple(samples))


def test_per_round_calibration_round_trips(tmp_path):
    path = store.save(tmp_path, "main", [interleaved_result()], ENV)
    bench = json.loads(path.read_text())["benchmarks"][0]
    assert bench["pytest_tpu"]["interleaved"] is True
    assert store.INTERLEAVED_KEY not in bench["extra_info"]
    side = store.load(path).sides["test_x.py::test_a[cpu]"]
    assert side.interleaved and side.calibration == (0.008, 0.0081, 0.0079)


def test_misaligned_calibration_is_not_called_per_round(tmp_path):
    side = store.side_of(interleaved_result(calibration=(0.008, 0.008)), ENV)
    assert not side.interleaved


def test_schema_1_files_still_load_without_per_round_calibration(tmp_path):
    path = store.save(tmp_path, "main", [interleaved_result()], ENV)
    document = json.loads(path.read_text())
    document["pytest_tpu"]["schema"] = 1
    del document["benchmarks"][0]["pytest_tpu"]["interleaved"]
    path.write_text(json.dumps(document))
    side = store.load(path).sides["test_x.py::test_a[cpu]"]
    assert not side.interleaved and side.calibration == (0.008, 0.0081, 0.0079)


@pytest.mark.parametrize(
    ("interleaved", "calibration", "problem"),
    [("yes", [0.008] * 3, "'interleaved' is not true or false"), (True, [0.008], "1 per-round")],
)
def test_bad_per_round_calibration_is_refused(tmp_path, interleaved, calibration, problem):
    path = store.save(tmp_path, "main", [interleaved_result()], ENV)
    document = json.loads(path.read_text())
    document["benchmarks"][0]["pytest_tpu"].update(interleaved=interleaved, calibration=calibration)
    path.write_text(json.dumps(document))
    with pytest.raises(store.BaselineError, match=problem):
        store.load(path)


def write(tmp_path, content) -> Path:
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def good_document(tmp_path) -> dict:
    return json.loads(saved(tmp_path).read_text())


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "empty"),
        ('{"benchmarks": [', "not valid JSON"),
        ("\x00\x01garbage", "not valid JSON"),
        ("[1, 2]", "top level is not a JSON object"),
        ('{"hello": 1}', "not a pytest-tpu baseline"),
        ('{"machine_info": {}, "benchmarks": []}', "pytest-benchmark file without"),
        ('{"pytest_tpu": {"schema": 99}, "benchmarks": []}', r"newer pytest-tpu \(schema 99\)"),
        ('{"pytest_tpu": {"schema": "x"}, "benchmarks": []}', "unknown schema"),
        ('{"pytest_tpu": {"schema": 1}, "benchmarks": {}}', "'benchmarks' is not a list"),
        ('{"pytest_tpu": {"schema": 1}, "benchmarks": [NaN]}', "NaN"),
    ],
)
def test_bad_files_are_refused_by_name_and_left_alone(tmp_path, content, problem):
    path = write(tmp_path, content)
    before = path.read_bytes()
    with pytest.raises(store.BaselineError, match=problem) as info:
        store.load(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == before


def nested(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def mutate(tmp_path, change) -> Path:
    document = good_document(tmp_path)
    change(document)
    return write(tmp_path, json.dumps(document))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d["benchmarks"][0]["stats"].update(data=[0.01, -1]), "positive durations"),
        (lambda d: d["benchmarks"][0]["stats"].update(data=[]), "no samples"),
        (lambda d: d["benchmarks"][0]["stats"].update(data="x"), "not a list"),
        (lambda d: d["benchmarks"].append(d["benchmarks"][0]), "appears twice"),
        (lambda d: d["benchmarks"][0].pop("fullname"), "no valid 'fullname'"),
        (lambda d: d["benchmarks"][0].update(extra_info={"a": nested(20)}), "nested deeper"),
    ],
)
def test_bad_structures_are_refused(tmp_path, change, problem):
    with pytest.raises(store.BaselineError, match=problem):
        store.load(mutate(tmp_path, change))


def test_absurd_sizes_are_refused(tmp_path, monkeypatch):
    path = saved(tmp_path)
    monkeypatch.setattr(store, "MAX_SAMPLES", 2)
    with pytest.raises(store.BaselineError, match="more than 2"):
        store.load(path)
    monkeypatch.setattr(store, "MAX_FILE_BYTES", 100)
    with pytest.raises(store.BaselineError, match="100-byte limit"):
        store.load(path)


def test_very_deep_json_is_refused_not_crashing(tmp_path):
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(store.BaselineError, match=r"nested too deeply|top level"):
        store.load(path)


@pytest.mark.parametrize(
    "name",
    ["../evil", "/etc/passwd", "a/b", "a\\b", "..", ".hidden", "x\x00", "tab\tname", "a" * 101, ""],
)
def test_unsafe_names_are_refused_and_nothing_is_written(tmp_path, name):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_baseline_name(name)
    inside = tmp_path / "dir"
    with pytest.raises(store.BaselineError):
        store.save(inside, name, [result()], ENV)
    assert not any(tmp_path.rglob("*.json"))


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = saved(tmp_path)
    before = path.read_bytes()

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(tmp_path, "main", [result(samples=(1.0, 2.0))], ENV)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.json"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_tpu.gate import baseline
    from pytest_tpu.results import BenchResult
    tag = sys.argv[2]
    samples = tuple([float(len(tag))] * 20000)
    r = BenchResult(nodeid="t::" + tag, name=tag, group=None, params={}, extra_info={},
                    samples=samples)
    for _ in range(15):
        baseline.save(Path(sys.argv[1]), "main", [r], {"writer": tag})
    """
)


def test_two_processes_saving_at_once_never_tear_the_file(tmp_path):
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag]) for tag in ("a", "bb")
    ]
    seen = set()
    while any(w.poll() is None for w in writers):
        path = tmp_path / "main.json"
        if path.exists():
            seen.add(tuple(store.load(path).sides))  # raises on a torn file
    assert all(w.wait(timeout=60) == 0 for w in writers)
    final = store.load(tmp_path / "main.json")
    assert list(final.sides) in (["t::a"], ["t::bb"])
    assert seen <= {("t::a",), ("t::bb",)}
    assert [p.name for p in tmp_path.iterdir()] == ["main.json"]


def test_unwritable_directory_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    problem = store.check_writable(blocker / "baselines")
    assert problem is not None and "not writable" in problem
    assert store.check_writable(tmp_path / "ok") is None


def test_environment_never_imports_tensorflow(tmp_path):
    code = (
        "import sys; from pathlib import Path; from pytest_tpu.gate import baseline; "
        "env = baseline.session_environment(Path('.')); "
        "assert 'tensorflow' not in sys.modules and 'numpy' not in sys.modules, sys.modules; "
        "print(sorted(env))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr
    assert "cpu_model" in done.stdout and "commit" in done.stdout


def test_git_outside_a_checkout_gives_nothing(tmp_path):
    assert store.git_info(tmp_path) == {}
