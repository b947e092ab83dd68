"""Baseline files: format, atomic saves, strict loading, names, environment."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_tpu.gate import baseline as store
from pytest_tpu.gate import loading
from pytest_tpu.gate.history import summarize
from pytest_tpu.parsers import parse_baseline_name
from pytest_tpu.results import BenchResult

ENV = {"python": "3.11.7", "cpu_model": "AMD EPYC", "commit": "abc", "dirty": False}


def result(nodeid="test_x.py::test_a[cpu]", samples=(0.01, 0.011, 0.012, 0.0105), **extra):
    info = {"accelerator": "cpu", "dtype": "float32", "metric": "time", "unit": "s", **extra}
    return BenchResult(
        nodeid=nodeid,
        name="test_a[cpu]",
        group=None,
        params={"accelerator": "cpu"},
        extra_info=info,
        samples=tuple(samples),
        options={"timer": "perf_counter", "min_rounds": 5},
    )


def new_run(res: BenchResult, calibration=(), kind="") -> store.NewRun:
    summary = summarize(res.samples, calibration, kind, when="2026-11-22T00:00:00+00:00")
    assert summary is not None
    return store.NewRun(res, (summary,))


def saved(tmp_path: Path, res: BenchResult | None = None, **options) -> Path:
    res = res or result()
    path = store.baseline_path(tmp_path, "main")
    previous = store.load(path) if path.exists() else None
    return store.save(
        tmp_path,
        "main",
        [new_run(res)],
        ENV,
        left_out=["test_x.py::test_b"],
        previous=previous,
        **options,
    )


def test_round_trip(tmp_path):
    loaded = store.load(saved(tmp_path))
    side = loaded.sides["test_x.py::test_a[cpu]"]
    assert len(side.runs) == 1 and side.runs[0].rounds == 4
    assert side.runs[0].raw.value == pytest.approx(0.01025)
    assert side.environment["dtype"] == "float32" and side.environment["commit"] == "abc"
    assert side.environment["timer"] == "perf_counter"
    assert loaded.left_out == ["test_x.py::test_b"]
    assert store.list_names(tmp_path) == ["main"]


def test_file_is_a_compact_pytest_benchmark_file(tmp_path):
    document = json.loads(saved(tmp_path).read_text())
    bench = document["benchmarks"][0]
    assert {"machine_info", "commit_info", "datetime", "version"} <= set(document)
    assert bench["stats"]["median"] == pytest.approx(0.01075)
    assert "data" not in bench["stats"]  # like pytest-benchmark's own saves
    assert bench["options"]["timer"] == "perf_counter"
    assert not any(key.startswith("pytest_tpu") for key in bench["extra_info"])
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


def test_saving_again_keeps_the_last_runs_and_merges_other_benchmarks(tmp_path):
    for _ in range(4):
        saved(tmp_path, keep=3)
    path = saved(tmp_path, result(nodeid="test_x.py::test_other[cpu]"), keep=3)
    loaded = store.load(path)
    assert len(loaded.sides["test_x.py::test_a[cpu]"].runs) == 3  # the last three sessions
    assert len(loaded.sides["test_x.py::test_other[cpu]"].runs) == 1  # -k subset: merged


def test_a_changed_environment_starts_a_fresh_history(tmp_path):
    saved(tmp_path)
    saved(tmp_path)
    path = saved(tmp_path, result(dtype="bfloat16"))
    assert len(store.load(path).sides["test_x.py::test_a[cpu]"].runs) == 1


def test_file_mode_is_a_normal_file_s_and_kept_on_overwrite(tmp_path):
    path = saved(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    path.chmod(0o640)
    saved(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o640


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_symlinked_baseline_is_refused(tmp_path):
    (tmp_path / "elsewhere.json").write_text("{}")
    (tmp_path / "main.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(store.BaselineError, match="symbolic link"):
        store.save(tmp_path, "main", [new_run(result())], ENV)
    assert (tmp_path / "elsewhere.json").read_text() == "{}"


def test_schema_2_files_still_load_from_their_rounds(tmp_path):
    document = json.loads(saved(tmp_path).read_text())
    document["pytest_tpu"]["schema"] = 2
    bench = document["benchmarks"][0]
    bench["stats"]["data"] = [0.01, 0.011, 0.012, 0.0105]
    bench["pytest_tpu"] = {"calibration": [0.002] * 4, "interleaved": True}
    path = write(tmp_path, json.dumps(document))
    side = store.load(path).sides["test_x.py::test_a[cpu]"]
    assert side.runs[0].raw.value == pytest.approx(0.01025)
    assert side.runs[0].calibrated is not None


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
        ('{"pytest_tpu": {"schema": 1, "schema": 2}, "benchmarks": []}', "'schema' appears twice"),
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
        (lambda d: d["benchmarks"][0]["pytest_tpu"].update(history=[]), "non-empty list"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"].update(history="x"), "non-empty list"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].update(raw=[1]), "estimate"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].update(rounds=0), "rounds"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].update(others=-1), "'others'"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].update(others="x"), "'others'"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].update(own=True), "'own'"),
        (lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0].pop("others", 0), None),
        (lambda d: d["benchmarks"].append(d["benchmarks"][0]), "appears twice"),
        (lambda d: d["benchmarks"][0].pop("fullname"), "no valid 'fullname'"),
        (lambda d: d["benchmarks"][0].update(extra_info={"a": nested(20)}), "nested deeper"),
        (lambda d: d["pytest_tpu"].update(left_out=None), "'left_out' is not a list"),
        (lambda d: d["pytest_tpu"].update(left_out="abc"), "'left_out' is not a list"),
        (lambda d: d["pytest_tpu"].update(left_out=["a\x1b[2Jb"]), "control characters"),
        (
            lambda d: d["benchmarks"][0]["pytest_tpu"]["history"][0]["raw"].__setitem__(1, 10**400),
            "too large",
        ),
        (lambda d: d["benchmarks"][0]["extra_info"].update(metric="m", m=10**400), None),
        (
            lambda d: d["benchmarks"][0]["extra_info"].update(higher_is_better="no"),
            "'higher_is_better' is not true or false",
        ),
        (lambda d: d["benchmarks"][0].update(fullname="t.py::a\x1b[31mred"), "control char"),
        (lambda d: d["benchmarks"][0].update(fullname="t.py::a\rb"), "control char"),
        (lambda d: d["benchmarks"][0].update(fullname="t.py::a\nb"), "control char"),
    ],
)
def test_bad_structures_are_refused(tmp_path, change, problem):
    if problem is None:  # not refused, and no crash either: the value is simply not used
        store.load(mutate(tmp_path, change))
        return
    with pytest.raises(store.BaselineError, match=problem):
        store.load(mutate(tmp_path, change))


def test_schema_2_samples_too_large_for_a_float_are_refused(tmp_path):
    document = {
        "pytest_tpu": {"schema": 2},
        "benchmarks": [{"fullname": "t.py::a", "stats": {"data": [10**400]}}],
    }
    with pytest.raises(store.BaselineError, match="too large"):
        store.load(write(tmp_path, json.dumps(document)))


def test_absurd_sizes_are_refused(tmp_path, monkeypatch):
    path = saved(tmp_path)
    monkeypatch.setattr(loading, "MAX_BENCHMARKS", 0)
    with pytest.raises(store.BaselineError, match="more than the limit of 0"):
        store.load(path)
    monkeypatch.setattr(loading, "MAX_FILE_BYTES", 100)
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
        store.save(inside, name, [new_run(result())], ENV)
    assert not any(tmp_path.rglob("*.json"))


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = saved(tmp_path)
    before = path.read_bytes()

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr("pytest_tpu.files.os.replace", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(tmp_path, "main", [new_run(result(samples=(1.0, 2.0)))], ENV)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.json"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_tpu.gate import baseline
    from pytest_tpu.gate.history import summarize
    from pytest_tpu.results import BenchResult
    tag = sys.argv[2]
    samples = tuple([float(len(tag))] * 20000)
    r = BenchResult(nodeid="t::" + tag, name=tag, group=None, params={}, extra_info={},
                    samples=samples)
    run = baseline.NewRun(r, (summarize(samples),))
    for _ in range(15):
        baseline.save(Path(sys.argv[1]), "main", [run], {"writer": tag})
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
