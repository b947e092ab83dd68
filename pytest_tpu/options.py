"""Command-line and ini options of pytest-tpu and one settings resolver.

Every option has an ini twin sharing its help text; the command line wins over the environment,
which wins over the ini file. Their values are checked by ``parsers``, so a bad value is a usage
error (exit code 4) that names the option and the valid values.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_tpu.parsers import (
    KINDS,
    MAX_TPU_TIMEOUT,
    MAX_VIRTUAL_CPUS,
    MAX_WORKERS,
    AcceleratorSelection,
    parse_accelerator,
    parse_baseline_name,
    parse_choice,
    parse_history,
    parse_more_rounds,
    parse_positive_int,
    parse_speedup_reference,
    parse_thresholds,
    parse_tpu_timeout,
    parse_virtual_cpus,
    parse_workers,
)

WORKLOAD_SIZES: tuple[str, ...] = ("smoke", "default", "full")
WORKLOAD_DATA: tuple[str, ...] = ("synthetic", "real")
DEFAULT_BASELINE = "default"
DEFAULT_BASELINE_DIR = ".pytest-tpu/baselines"
DEFAULT_TPU_TIMEOUT = 60.0
# The checkout a --compare-ref session started from, named to every process it starts: one
# running in another tree imports the project from that tree (``sameref.imports``).
REF_HOME_ENV = "PYTEST_TPU_REF_HOME"
# Exit status of a session whose only problem is a speed regression: distinct from pytest's own
# codes (1 tests failed, 2 interrupted, 3 internal error, 4 usage error, 5 no tests).
REGRESSION_EXIT_CODE = 6
# Exit status of a session whose --save-baseline was asked for but could not be written (a main
# branch job must not pass while its baseline goes stale).
SAVE_FAILED_EXIT_CODE = 7
# --compare-ref: how many times its rounds a row the rounds left inconclusive is measured again
# with (``sameref.resolve``), by default; at most ``parsers.MAX_MORE_ROUNDS``.
DEFAULT_MORE_ROUNDS = 4

T = TypeVar("T")


def benchmarks_disabled(config: pytest.Config) -> bool:
    """pytest-benchmark's own rule: ``--benchmark-disable`` turns measuring off, unless
    ``--benchmark-enable`` turns it back on."""
    return bool(config.getoption("benchmark_disable", False)) and not config.getoption(
        "benchmark_enable", False
    )


def measuring_off(config: pytest.Config) -> str:
    """The pytest-benchmark option under which this session measures no benchmark
    (``--benchmark-disable``, ``--benchmark-skip``), or ""."""
    if benchmarks_disabled(config):
        return "--benchmark-disable"
    return "--benchmark-skip" if config.getoption("benchmark_skip", False) else ""


def under_xdist(config: pytest.Config) -> bool:
    """Whether pytest-xdist distributes this session's tests (``-n``, ``--dist``)."""
    return bool(config.getoption("dist", "no") != "no")


def _add(
    group: pytest.OptionGroup,
    parser: pytest.Parser,
    flags: str | tuple[str, ...],
    help_text: str,
    *,
    ini: bool = True,
    ini_type: str = "string",
    **kwargs: object,
) -> None:
    """Declare ``--flag`` (and its aliases) and, when ``ini``, its ini twin with the same help.

    The destination and the ini name come from the first flag; later flags are aliases.
    """
    names = (flags,) if isinstance(flags, str) else flags
    dest = names[0].lstrip("-").replace("-", "_")
    if len(names) > 1:
        help_text += f" Alias: {', '.join(names[1:])}."
    # argparse %-formats help texts ("5%" would break --help); the ini twin shows them as is.
    group.addoption(*names, dest=dest, help=help_text.replace("%", "%%"), **kwargs)
    if ini:
        parser.addini(dest, help=help_text, type=ini_type)  # type: ignore[arg-type]


def add_options(parser: pytest.Parser) -> None:
    """Declare every option; nothing here may be slow (``pytest --help`` runs it).

    Besides the names the product is known by (``--accelerator``, ``--compare``,
    ``--save-baseline``, ``--fail-on-regression``), every option starts with ``--tpu-`` and every
    ini name with ``tpu_``: plain names such as ``--workers`` or ``--report`` belong to other
    plugins (pytest-parallel, pytest-reporter), and argparse refuses a second definition.
    """
    group = parser.getgroup("tpu", "pytest-tpu: TensorFlow benchmarks on CPU, GPU and TPU")
    _add(
        group,
        parser,
        "--accelerator",
        "Device kinds to run on: comma list of "
        "cpu, gpu, tpu; 'all' (every kind, a missing one skipped with the reason) or 'auto' "
        "(default: the kinds whose device files or TPU variables are there; the header names "
        "the missing ones and why). A missing kind named explicitly is a usage error. "
        "Environment: PYTEST_ACCELERATOR.",
        type=parse_accelerator,
        metavar="KINDS",
    )
    _add(
        group,
        parser,
        "--tpu-timeout",
        f"Seconds the whole TPU probe may take (default {DEFAULT_TPU_TIMEOUT:g}, "
        f"at most {MAX_TPU_TIMEOUT:g}).",
        type=parse_tpu_timeout,
        metavar="SECONDS",
    )
    _add(
        group,
        parser,
        ("--tpu-virtual-cpus", "--virtual-cpus"),
        "Split the CPU into N logical TensorFlow devices, so "
        f"multi-replica strategies run on a CPU-only machine (at most {MAX_VIRTUAL_CPUS}).",
        type=parse_virtual_cpus,
        metavar="N",
    )
    _add(
        group,
        parser,
        "--tpu-threads",
        "Size of TensorFlow's intra-op and inter-op thread pools, set before TensorFlow "
        "first runs (1: one thread, for CPU-time measurements on shared machines; "
        "default: TensorFlow's choice, one per core).",
        type=parse_positive_int,
        metavar="N",
    )
    _add(
        group,
        parser,
        ("--tpu-workload-size", "--workload-size"),
        "Size of the benchmark workloads: smoke, default or full (the published sizes).",
        type=parse_choice(WORKLOAD_SIZES),
        metavar="SIZE",
    )
    _add(
        group,
        parser,
        ("--tpu-workload-data", "--workload-data"),
        "Data for the workloads: synthetic (default) or "
        "real (a copy already in Keras' cache; never downloaded).",
        type=parse_choice(WORKLOAD_DATA),
        metavar="DATA",
    )
    _add_baseline_options(group, parser)
    _add_output_options(group, parser)


def _add_baseline_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    _add(
        group,
        parser,
        "--save-baseline",
        f"Save this run's results as baseline NAME (default name: {DEFAULT_BASELINE}).",
        ini=False,
        nargs="?",
        const=DEFAULT_BASELINE,
        type=parse_baseline_name,
        metavar="NAME",
    )
    _add(
        group,
        parser,
        "--tpu-baseline-history",
        "Runs of each benchmark a saved baseline keeps (default 5); the gate measures how "
        "much sessions differ from them.",
        type=parse_history,
        metavar="K",
    )
    _add(
        group,
        parser,
        "--compare",
        f"Compare this run with baseline NAME (default name: {DEFAULT_BASELINE}).",
        ini=False,
        nargs="?",
        const=DEFAULT_BASELINE,
        type=parse_baseline_name,
        metavar="NAME",
    )
    _add(
        group,
        parser,
        "--compare-ref",
        "Measure the benchmarks of git revision REF (a branch, tag or sha) in a temporary "
        "worktree in this same session, rounds alternating with this tree's, and compare.",
        metavar="REF",
    )
    _add(
        group,
        parser,
        "--tpu-compare-ref-mode",
        "How --compare-ref alternates base and head: rounds (ABBA, round by round), runs "
        "(whole runs: base, head, base; for devices one process at a time, like a TPU) or auto "
        "(default: runs when a TPU is selected, else rounds).",
        type=parse_choice(("auto", "rounds", "runs")),
        metavar="MODE",
    )
    _add(
        group,
        parser,
        "--tpu-compare-ref-rounds",
        "Under --compare-ref and --fail-on-regression, measure a benchmark its rounds left "
        "inconclusive again, in a new pair of processes, with up to N times its rounds "
        f"(default {DEFAULT_MORE_ROUNDS}; 1: never).",
        type=parse_more_rounds,
        metavar="N",
    )
    _add(
        group,
        parser,
        ("--tpu-baseline-dir", "--baseline-dir"),
        f"Directory of saved baselines (default: <rootdir>/{DEFAULT_BASELINE_DIR}).",
        metavar="DIR",
    )
    _add(
        group,
        parser,
        ("--tpu-compare-force", "--compare-force"),
        "Compare even when the environments differ "
        "(device, TensorFlow version, dtype, batch size); such rows are marked.",
        ini=False,
        action="store_true",
        default=False,
    )
    _add(
        group,
        parser,
        "--fail-on-regression",
        f"Fail the session (exit code {REGRESSION_EXIT_CODE}) "
        "when a benchmark is slower than the baseline by more than PCT, with confidence; "
        "per metric: time:5%,memory:2%,compile:25% (a plain 5% means time).",
        type=parse_thresholds,
        metavar="PCT",
    )
    _add(
        group,
        parser,
        ("--tpu-measure-noise", "--measure-noise"),
        "Repeat each benchmark in fresh rounds and report "
        "the run-to-run spread and the smallest slowdown the gate can catch here.",
        ini=False,
        action="store_true",
        default=False,
    )


def _add_output_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    _add(
        group,
        parser,
        ("--tpu-speedup-reference", "--speedup-reference"),
        "Device kind the speedup columns are relative "
        "to (default cpu; the first device present if that one is missing).",
        type=parse_speedup_reference,
        metavar="KIND",
    )
    _add(
        group,
        parser,
        "--tpu-report",
        "Write the result tables to PATH: Markdown (.md) or JSON (.json); give it again to "
        "write several files.",
        metavar="PATH",
        action="append",
    )
    _add(
        group,
        parser,
        "--tpu-report-plot",
        "Draw speedups (and, with --compare, changes) to "
        "PATH (.png or .svg); needs the 'plot' extra. Give it again to draw several files.",
        metavar="PATH",
        action="append",
    )
    _add(
        group,
        parser,
        "--tpu-workers",
        "Run the workloads under MultiWorkerMirroredStrategy across N local worker processes "
        f"(at most {MAX_WORKERS}).",
        type=parse_workers,
        metavar="N",
    )
    _add(
        group,
        parser,
        ("--tpu-profile-regressions", "--profile-regressions"),
        "Re-run each regressed benchmark once under "
        "the TensorFlow profiler and save its trace in DIR.",
        metavar="DIR",
    )


def _ini_or_env(config: pytest.Config, name: str, env: str | None = None) -> str | None:
    """The option's value from the environment, then the ini file (CLI handled by caller)."""
    if env and os.environ.get(env):
        return os.environ[env]
    value = config.getini(name)
    return str(value) if value not in (None, "", []) else None


def resolve(
    config: pytest.Config,
    name: str,
    parse: Callable[[str], T],
    default: T,
    env: str | None = None,
) -> T:
    """One option's value: CLI > environment > ini > default, validated the same way."""
    cli = config.getoption(name)
    if cli is not None:
        return cli  # type: ignore[no-any-return]
    raw = _ini_or_env(config, name, env)
    if raw is None:
        return default
    try:
        return parse(raw)
    except argparse.ArgumentTypeError as exc:
        source = f"environment {env}" if env and os.environ.get(env) else f"ini option {name}"
        raise pytest.UsageError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class Settings:
    """Every pytest-tpu setting, resolved once per session."""

    accelerator: AcceleratorSelection
    tpu_timeout: float
    virtual_cpus: int | None
    workload_size: str
    workload_data: str
    save_baseline: str | None
    baseline_history: int | None
    compare: str | None
    compare_ref: str | None
    compare_ref_mode: str
    compare_ref_rounds: int  # at most this many times a benchmark's rounds to resolve its row
    baseline_dir: Path
    compare_force: bool
    fail_on_regression: float | None  # the time threshold in %, None when time is not gated
    thresholds: dict[str, float]  # every gated metric's threshold in % (empty: no gate)
    measure_noise: bool
    speedup_reference: str
    reports: tuple[Path, ...]  # --tpu-report, each file given
    report_plots: tuple[Path, ...]  # --tpu-report-plot, each file given
    workers: int | None
    profile_regressions: Path | None
    tpu_threads: int | None = None

    @property
    def gating(self) -> bool:
        """Whether --fail-on-regression asked the session to fail on any metric."""
        return bool(self.thresholds)


def _path(config: pytest.Config, name: str) -> Path | None:
    value = resolve(config, name, str, "")
    return _from_invocation(config, value) if value else None


def _from_invocation(config: pytest.Config, value: str) -> Path:
    """A PATH option's value, relative to where pytest was started (as pytest's own are)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else config.invocation_params.dir / path


def _paths(config: pytest.Config, name: str) -> tuple[Path, ...]:
    """Every PATH of an option that may be given more than once (the ini twin names one).

    Given twice, both files are written: the second must not silently replace the first
    (new-user trial 35: ``--tpu-report=a.md --tpu-report=b.json`` wrote only b.json).
    """
    given: list[str] = config.getoption(name) or []
    values = given or [_ini_or_env(config, name) or ""]
    paths = [_from_invocation(config, value) for value in values if value]
    return tuple(dict.fromkeys(paths))  # the same file twice is written once


def _check_not_a_path(config: pytest.Config, option: str) -> str | None:
    """``--save-baseline benchmarks`` takes "benchmarks" as the NAME, not as the test path."""
    name: str | None = config.getoption(option)
    if name and (config.invocation_params.dir / name).exists():
        flag = "--" + option.replace("_", "-")
        raise pytest.UsageError(
            f"{flag} {name}: {name!r} is a path, so it was taken as the baseline name; "
            f"write {flag}=NAME, or {flag} after the paths"
        )
    return name


def resolve_settings(config: pytest.Config) -> Settings:
    """Resolve all settings; raises ``pytest.UsageError`` naming the bad option."""
    baseline_dir = _path(config, "tpu_baseline_dir") or config.rootpath / DEFAULT_BASELINE_DIR
    thresholds: dict[str, float] = resolve(config, "fail_on_regression", parse_thresholds, {})
    return Settings(
        accelerator=resolve(
            config,
            "accelerator",
            parse_accelerator,
            AcceleratorSelection("auto", KINDS),
            env="PYTEST_ACCELERATOR",
        ),
        tpu_timeout=resolve(config, "tpu_timeout", parse_tpu_timeout, DEFAULT_TPU_TIMEOUT),
        virtual_cpus=resolve(config, "tpu_virtual_cpus", parse_virtual_cpus, None),
        workload_size=selected_workload_size(config),
        workload_data=resolve(
            config, "tpu_workload_data", parse_choice(WORKLOAD_DATA), "synthetic"
        ),
        save_baseline=_check_not_a_path(config, "save_baseline"),
        baseline_history=resolve(config, "tpu_baseline_history", parse_history, None),
        compare=_check_not_a_path(config, "compare"),
        compare_ref=resolve(config, "compare_ref", str, None) or None,
        compare_ref_mode=resolve(
            config, "tpu_compare_ref_mode", parse_choice(("auto", "rounds", "runs")), "auto"
        ),
        compare_ref_rounds=resolve(
            config,
            "tpu_compare_ref_rounds",
            parse_more_rounds,
            DEFAULT_MORE_ROUNDS,
        ),
        baseline_dir=baseline_dir,
        compare_force=bool(config.getoption("tpu_compare_force")),
        fail_on_regression=thresholds.get("time"),
        thresholds=thresholds,
        measure_noise=bool(config.getoption("tpu_measure_noise")),
        speedup_reference=resolve(config, "tpu_speedup_reference", parse_speedup_reference, "cpu"),
        reports=_paths(config, "tpu_report"),
        report_plots=_paths(config, "tpu_report_plot"),
        workers=resolve(config, "tpu_workers", parse_workers, None),
        profile_regressions=_path(config, "tpu_profile_regressions"),
        tpu_threads=resolve(config, "tpu_threads", parse_positive_int, None),
    )


def selected_workload_size(config: pytest.Config) -> str:
    """``--tpu-workload-size`` as resolved (CLI > ini > default), for a suite's
    ``pytest_generate_tests``, where fixtures such as ``workload_size`` are not available."""
    return resolve(config, "tpu_workload_size", parse_choice(WORKLOAD_SIZES), "default")
