"""Checking a stored-baseline regression in a fresh pytest process before the session fails.

A re-measurement in the same process shares that process's state: the cores its threads landed
on, its memory layout, what its libraries chose when they loaded. A new user's unchanged 384x384
numpy matmul failed the gate at +29.5 % (99.2 % sure), confirmed in fresh rounds of the same
process, which ran it at 767 us against 550-575 us in every other session (trial 25). So a
regression its re-measurement confirmed is measured once more, in a new pytest session of the
same tests started by this one, and the session fails only if that agrees as well. An
improvement (a ``faster`` row) is read again by the same process, for the same reason, and
stands only if it agrees too. Only a session about to fail or claiming an improvement pays for
it: one more pytest start, and one more run of this session's benchmarks up to the last one it
checks.

Those that ran before a failing one run again first, in the same order: what ran before a
benchmark in a process is part of what it measures, and the saved runs it is compared with had
it too (a numpy function measured after TensorFlow benchmarks, run in a process of its own,
read its real slowdowns at about half their size, and they were withdrawn; g32).

The child session is this one's, narrowed: those tests by node id, the options that decide
how they are measured (``childargs``), and ``--compare`` to the same baseline (so it uses the same
calibration kernel). Everything that writes files or decides an exit status is left out:
``addopts`` and ``PYTEST_ADDOPTS`` (they may hold ``--junitxml``, ``--benchmark-json``, ``-n``)
and this plugin's own report, save, gate and ``--compare-ref`` settings. It writes its
measurements to the file named by ``OUT_ENV``, whole or not at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.childargs import measuring_args, plugin_args
from pytest_tpu.files import write_text_atomic
from pytest_tpu.options import Settings

OUT_ENV = "PYTEST_TPU_FRESH_OUT"  # set for the child: where it writes its measurements
# Set for the child: when the session it checks started. It reads that session's rows again, so
# it lies as far from the saved runs as that session does (``history.beyond_reach``).
WHEN_ENV = "PYTEST_TPU_FRESH_WHEN"
# What the child must not do: write the user's reports, save a baseline, gate, start a base.
_OFF = (
    "fail_on_regression",
    "compare_ref",
    "tpu_report",
    "tpu_report_plot",
    "tpu_profile_regressions",
)
# Its own start (pytest, the plugins, TensorFlow's import) before it measures anything.
START_S = 120.0
SLACK = 10.0  # times what the tests took in this session, for the child to take them again


@dataclass(frozen=True)
class Fresh:
    """What the fresh process measured, by node id; or why it measured nothing."""

    measurements: dict[str, dict[str, Any]] = field(default_factory=dict)
    problem: str = ""


def claim_output() -> Path | None:
    """In the child: where to write its measurements. Taken out of the environment, so that
    processes the tests start do not see it."""
    value = os.environ.pop(OUT_ENV, "")
    return Path(value) if value else None


def write(path: Path, measurements: Mapping[str, Any]) -> None:
    """The child's measurements, whole or not at all (the parent reads a missing file as none)."""
    write_text_atomic(path, json.dumps(measurements))


def _test_args(root: Path, nodeids: Iterable[str]) -> list[str]:
    """Node ids as command-line arguments that work from any folder."""
    args = []
    for nodeid in nodeids:
        path, sep, rest = nodeid.partition("::")
        args.append(str(root / path) + sep + rest)
    return args


def replayed(ran: Sequence[str], failing: Collection[str]) -> list[str]:
    """What a fresh process runs: the benchmarks ``ran`` in this session, in their order, up to
    the last ``failing`` one. A 42 us numpy function that ran after TensorFlow benchmarks in every
    saved session read 2 points lower in a process of its own, and its numpy calibration kernel 4
    points slower; there its 5 % and 10 % slowdowns read -1 to +3 % and +3 to +7 % (g32)."""
    last = max((index for index, nodeid in enumerate(ran) if nodeid in failing), default=-1)
    return list(ran[: last + 1])


def command(config: pytest.Config, settings: Settings, nodeids: Sequence[str]) -> list[str]:
    """The child session's command line."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    args += [f"--rootdir={config.rootpath}"]
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    args += ["-o", "addopts="] + [arg for name in _OFF for arg in ("-o", f"{name}=")]
    for override in config.option.override_ini or ():
        if not str(override).startswith("addopts="):
            args += ["-o", str(override)]
    # addopts' -p too, which the child drops: pytest keeps them all in ``plugins``.
    args += [*plugin_args(config), f"--import-mode={config.option.importmode}"]
    args += _test_args(config.rootpath, nodeids) + measuring_args(config, settings)
    return [*args, f"--compare={settings.compare}", f"--tpu-baseline-dir={settings.baseline_dir}"]


def measure(
    config: pytest.Config, settings: Settings, nodeids: Sequence[str], spent_s: float, when: str
) -> Fresh:
    """Run ``nodeids`` in a new pytest process; never raises (a problem is a finding)."""
    timeout = START_S + SLACK * spent_s
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
    with tempfile.TemporaryDirectory(prefix="pytest-tpu-fresh-") as folder:
        out = Path(folder) / "measurements.json"
        env[OUT_ENV] = str(out)
        env[WHEN_ENV] = when
        try:
            done = subprocess.run(
                command(config, settings, nodeids),
                cwd=config.invocation_params.dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Fresh(problem=f"it did not finish in {timeout:.0f} s")
        except OSError as exc:
            return Fresh(problem=f"it did not start: {exc}")
        found = _read(out)
    if found:
        return Fresh(found)
    tail = (done.stdout.strip().splitlines() or ["no output"])[-1]
    return Fresh(problem=f"it measured nothing (exit code {done.returncode}: {tail})")


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
