"""The options that decide how a benchmark is measured, as a child pytest session takes them.

Two kinds of child session measure the same benchmarks as the session that starts them: the base
side of ``--compare-ref`` and the fresh process that checks a stored-baseline regression
(``gate.fresh``). Both must time exactly as the parent does, so both take these from here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from pytest_tpu.options import Settings

# pytest-benchmark options that decide how a benchmark is measured: a child gets the same.
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


def measuring_args(config: pytest.Config, settings: Settings) -> list[str]:
    """The options that decide how a benchmark is measured, as a child session takes them."""
    args = [
        f"--accelerator={settings.accelerator}",
        f"--tpu-workload-size={settings.workload_size}",
        f"--tpu-workload-data={settings.workload_data}",
    ]
    if settings.virtual_cpus:
        args.append(f"--tpu-virtual-cpus={settings.virtual_cpus}")
    if settings.tpu_threads:
        args.append(f"--tpu-threads={settings.tpu_threads}")
    if settings.workers:  # a usage error under --compare-ref; a fresh process needs the same
        args.append(f"--tpu-workers={settings.workers}")
    args.append(f"--tpu-timeout={settings.tpu_timeout:g}")
    for dest, flag in BENCHMARK_OPTIONS:
        value = config.getoption(dest, None)
        if value is not None:
            args.append(f"{flag}={_option_value(value)}")
    args += [flag for dest, flag in BENCHMARK_FLAGS if config.getoption(dest, False)]
    return args


def plugin_args(config: pytest.Config) -> list[str]:
    """``-p NAME`` options, the command line's and ``addopts``': pytest keeps them all in
    ``plugins``."""
    return [arg for name in config.option.plugins or () for arg in ("-p", str(name))]


def session_args(config: pytest.Config) -> list[str]:
    """The rest of this session's command line that a session of the same tests in another
    tree needs: the plugins named with ``-p`` (a project's fixtures may live in one), the ini
    overrides and the import mode."""
    args = plugin_args(config)
    for override in config.option.override_ini or ():
        if not str(override).startswith("compare_ref="):  # the child's own role is set apart
            args += ["-o", str(override)]
    return [*args, f"--import-mode={config.option.importmode}"]


def pytest_command() -> list[str]:
    """How a session of the same tests in another process starts pytest: as this one was.

    ``python -m pytest`` puts the working folder first on ``sys.path``, the ``pytest`` script its
    own folder. Started one way while this session was started the other, a child found the
    project's flat package in its tree where this session loaded an installed copy (trial 41:
    head and base ran different code, and a copy installed from the base hid a slowdown)."""
    script = sys.argv[0] if sys.argv else ""
    name = os.path.basename(script)
    if (
        name.startswith(("pytest", "py.test"))
        and not name.endswith(".py")
        and os.path.isfile(script)
    ):
        return [sys.executable, script]
    return [sys.executable, "-m", "pytest"]
