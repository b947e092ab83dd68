"""Option parsing: every bad value is a usage error (exit 4) that names the valid values."""

from __future__ import annotations

import argparse

import pytest

from pytest_tpu import options, parsers


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--accelerator=foo"], "*unknown accelerator kind foo; valid: cpu, gpu, tpu*auto, all*"),
        (["--accelerator=cpu,npu"], "*unknown accelerator kind npu*"),
        (["--tpu-timeout=0"], "*--tpu-timeout*not a positive number of seconds*"),
        (["--tpu-timeout=soon"], "*--tpu-timeout*not a positive number*"),
        (["--tpu-virtual-cpus=0"], "*--tpu-virtual-cpus*not a whole number of at least 1*"),
        (["--tpu-workload-size=huge"], "*--tpu-workload-size*choose one of: smoke, default, full*"),
        (["--tpu-workload-data=web"], "*--tpu-workload-data*choose one of: synthetic, real*"),
        (
            ["--fail-on-regression=abc"],
            "*--fail-on-regression*'abc' is not a percentage*; or one per metric, such as time:5%*",
        ),
        (["--fail-on-regression=150%"], "*--fail-on-regression*'150%' is out of range*"),
        (["--fail-on-regression=0"], "*'0' is out of range; expected a percentage above 0 and*"),
        (
            # Trial 39: a fraction was taken as a percentage, a gate 100 times stricter.
            ["--fail-on-regression=0.05"],
            "*--fail-on-regression*'0.05' is ambiguous*such as 5% or 0.05%",
        ),
        (["--tpu-speedup-reference=npu"], "*--tpu-speedup-reference*choose one of: cpu, gpu, tpu*"),
        (["--tpu-workers=-2"], "*--tpu-workers*not a whole number of at least 1*"),
        (["--save-baseline=../up"], "*--save-baseline*not a valid baseline name*"),
        (["--compare=/etc/passwd"], "*--compare*not a valid baseline name*"),
        (["--save-baseline=abc\n"], "*--save-baseline*not a valid baseline name*"),
        (["--virtual-cpus=100000"], "*--virtual-cpus*more than 256: set-up grows with the square*"),
        (
            ["--tpu-workers=1000"],
            "*--tpu-workers*more than 64: each worker is a whole TensorFlow process*",
        ),
        (["--tpu-timeout=1e300"], "*--tpu-timeout*more than 86400 seconds (a day)*"),
        (
            ["--tpu-compare-ref-rounds=17"],
            "*--tpu-compare-ref-rounds*more than 16: a re-measurement that long is a run of its*",
        ),
        (["--tpu-compare-ref-rounds=0"], "*--tpu-compare-ref-rounds*not a whole number*"),
    ],
)
def test_bad_option_value_is_a_usage_error(pytester: pytest.Pytester, args, message):
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_tpu_timeout_at_its_bound_is_accepted():
    assert parsers.parse_tpu_timeout("86400") == 86400.0
    assert parsers.parse_workers("64") == 64 and parsers.parse_virtual_cpus("256") == 256


def test_environment_value_is_validated_and_named(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_ACCELERATOR", "quantum")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment PYTEST_ACCELERATOR*unknown accelerator kind*"])


def test_ini_value_is_validated_and_named(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\ntpu_workload_size = enormous\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option tpu_workload_size*smoke, default, full*"])


def test_help_lists_every_option_with_its_ini_twin(pytester: pytest.Pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "*pytest-tpu*",
            "*--accelerator=KINDS*",
            "*--tpu-timeout=SECONDS*",
            "*--tpu-virtual-cpus=N*",
            "*--save-baseline*",
            "*--fail-on-regression=PCT*",
        ]
    )
    result.stdout.fnmatch_lines(["*accelerator (string)*", "*tpu_virtual_cpus (string)*"])


def test_precedence_cli_over_environment_over_ini(pytester: pytest.Pytester, monkeypatch):
    pytester.makeini("[pytest]\naccelerator = gpu\ntpu_timeout = 7\n")
    monkeypatch.setenv("PYTEST_ACCELERATOR", "tpu")
    config = pytester.parseconfigure("--accelerator=cpu")
    settings = options.resolve_settings(config)
    assert settings.accelerator.kinds == ("cpu",)
    assert settings.tpu_timeout == 7.0
    monkeypatch.delenv("PYTEST_ACCELERATOR")
    assert options.resolve_settings(pytester.parseconfigure()).accelerator.kinds == ("gpu",)


@pytest.mark.parametrize(
    ("text", "mode", "kinds"),
    [
        ("auto", "auto", ("cpu", "gpu", "tpu")),
        ("ALL", "all", ("cpu", "gpu", "tpu")),
        ("tpu, cpu,tpu", "explicit", ("tpu", "cpu")),
    ],
)
def test_accelerator_selection(text, mode, kinds):
    selection = parsers.parse_accelerator(text)
    assert (selection.mode, selection.kinds) == (mode, kinds)


@pytest.mark.parametrize("name", ["a/b", "..", "x..y", "/abs", "tab\tname", ".hidden", "", "é"])
def test_unsafe_baseline_names_are_refused(name):
    with pytest.raises(argparse.ArgumentTypeError, match="not a valid baseline name"):
        parsers.parse_baseline_name(name)


@pytest.mark.parametrize("text", ["5%", "5", " 2.5% ", "0.5%"])
def test_percentages(text):
    assert parsers.parse_percent(text) in (5.0, 2.5, 0.5)


def test_a_path_after_a_bare_baseline_option_is_not_taken_silently(pytester: pytest.Pytester):
    pytester.mkdir("benchmarks")
    result = pytester.runpytest("--save-baseline", "benchmarks")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'benchmarks' is a path*write --save-baseline=NAME*"])
