"""The command line of a session ``--compare-ref`` starts: the base's, and a nested pair's
measuring options -- the same selection and the same measuring as this session's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.options import Settings

# pytest-benchmark options that decide how a benchmark is measured: the base gets the same.
BENCHMARK_OPTIONS = (
    ("benchmark_timer", "--benchmark-timer"),
    ("benchmark_min_rounds", "--benchmark-min-rounds"),
    ("benchmark_max_time", "--benchmark-max-time"),
    ("benchmark_min_time", "--benchmark-min-time"),
    ("benchmark_calibration_precision", "--benchmark-calibration-precision"),
    ("benchmark_warmup_iterations", "--benchmark-warmup-iterations"),
)
BENCHMARK_FLAGS = (("benchmark_disable_gc", "--benchmark-disable-gc"),)


def _option_value(value: Any) -> str:
    target = getattr(value, "target", value)
    if callable(target):
        return f"{target.__module__}.{target.__name__}"
    return str(value)


def _in_tree(arg: str, root: Path, tree: Path) -> str:
    """A test path of the head's command line, pointing into the base's worktree instead."""
    path, sep, rest = arg.partition("::")
    absolute = Path(path)
    if not absolute.is_absolute():
        return arg  # relative to the invocation folder, which has its twin in the worktree
    try:
        return str(tree / absolute.resolve().relative_to(root.resolve())) + sep + rest
    except ValueError:
        return arg  # outside the repository: the same files on both sides


def child_args(config: pytest.Config, settings: Settings, root: Path, tree: Path) -> list[str]:
    """The base session's command line: same selection, same measuring options."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        # Otherwise the base finds its tests itself, from its own testpaths or folder.
        args += [_in_tree(str(arg), root, tree) for arg in config.args]
    if config.option.keyword:
        args += ["-k", config.option.keyword]
    if config.option.markexpr:
        args += ["-m", config.option.markexpr]
    return args + measuring_args(config, settings)


def measuring_args(config: pytest.Config, settings: Settings) -> list[str]:
    """The options that decide how a benchmark is measured, as a child session takes them."""
    args = [
        f"--accelerator={settings.accelerator}",
        f"--tpu-workload-size={settings.workload_size}",
        f"--tpu-workload-data={settings.workload_data}",
    ]
    if settings.virtual_cpus:
        args.append(f"--tpu-virtual-cpus={settings.virtual_cpus}")
    for dest, flag in BENCHMARK_OPTIONS:
        value = config.getoption(dest, None)
        if value is not None:
            args.append(f"{flag}={_option_value(value)}")
    args += [flag for dest, flag in BENCHMARK_FLAGS if config.getoption(dest, False)]
    return args
