"""``--tpu-profile-regressions=DIR``: re-run regressed benchmarks once under TensorFlow's profiler.

The gate calls :func:`profile_regressions` with the node ids it found slower. They re-run in a
child pytest process, so the profiler's overhead never touches this session's timings and the
child's results are never read back: only its trace files are. Each test's trace lands in
``DIR/<test>/plugins/profile/<run>/<host>.xplane.pb``, which ``tensorboard --logdir DIR/<test>``
opens (Profile tab, with the ``tensorboard-plugin-profile`` package).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.options import Settings, resolve_settings

PROFILE_ENV = "PYTEST_TPU_PROFILE_DIR"  # set in the child: profile each test into this DIR
PROFILE_PLUGIN_NAME = "pytest-tpu-profile"
PROFILE_TIMEOUT_S = 1800.0  # one re-run of the regressed tests, however slow the suite
TRACE_GLOB = "plugins/profile/*/*.xplane.pb"

# Trace directory of each profiled test, for the report and the terminal summary.
profiles_key = pytest.StashKey[dict[str, Path]]()


def trace_dir(root: Path, nodeid: str) -> Path:
    """The TensorBoard log directory of one test: readable, unique, safe as a file name."""
    readable = re.sub(r"[^\w.\-]+", "_", nodeid).strip("_")[:80]
    digest = hashlib.sha1(nodeid.encode()).hexdigest()[:8]
    return root / f"{readable}-{digest}"


def traces(root: Path, nodeid: str) -> list[Path]:
    """The ``*.xplane.pb`` trace files written for ``nodeid`` under ``root``."""
    return sorted(trace_dir(root, nodeid).glob(TRACE_GLOB))


def child_args(config: pytest.Config, settings: Settings) -> list[str]:
    """The options that decide what a benchmark runs on and how big it is, as resolved here.

    Taken from the resolved settings rather than the command line, so gate, report and worker
    options (and test paths) never reach the child.
    """
    args = [
        f"--rootdir={config.rootpath}",
        f"--accelerator={settings.accelerator}",
        f"--tpu-timeout={settings.tpu_timeout:g}",
        f"--tpu-workload-size={settings.workload_size}",
        f"--tpu-workload-data={settings.workload_data}",
    ]
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    if settings.virtual_cpus:
        args.append(f"--tpu-virtual-cpus={settings.virtual_cpus}")
    return args + _plugin_args(config.invocation_params.args)


def _plugin_args(args: Sequence[str]) -> list[str]:
    """``-p NAME`` options of the original command line (plugins the tests may rely on)."""
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "-p" and index + 1 < len(args):
            out += ["-p", args[index + 1]]
        elif arg.startswith("-p") and len(arg) > 2:
            out.append(arg)
    return out


def profile_tests(
    config: pytest.Config, nodeids: Sequence[str], out_dir: Path
) -> dict[str, list[Path]]:
    """Re-run ``nodeids`` once in a child pytest under the profiler; their trace files.

    The child inherits the environment except ``TF_CONFIG`` (a profile is one process) and
    is bounded by ``PROFILE_TIMEOUT_S``. A test whose run wrote no trace maps to ``[]``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = resolve_settings(config)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "pytest_tpu.profiling"]
    command += ["-p", "no:cacheprovider", *child_args(config, settings), "--", *nodeids]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env[PROFILE_ENV] = str(out_dir)
    # On timeout subprocess.run kills the child; whatever traces it wrote still count.
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            command,
            cwd=config.rootpath,  # node ids are relative to the rootdir
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROFILE_TIMEOUT_S,
            check=False,
        )
    return {nodeid: traces(out_dir, nodeid) for nodeid in nodeids}


def profile_regressions(config: pytest.Config, nodeids: Sequence[str]) -> dict[str, Path]:
    """The gate's one call: profile the regressed ``nodeids`` when ``--tpu-profile-regressions``
    is set; returns the trace directory (``tensorboard --logdir``) of each test that got one.

    Also kept on ``config.stash[profiles_key]`` and listed in the terminal summary.
    """
    out_dir = resolve_settings(config).profile_regressions
    if out_dir is None or not nodeids:
        return {}
    found = profile_tests(config, list(dict.fromkeys(nodeids)), out_dir)
    dirs = {nodeid: trace_dir(out_dir, nodeid) for nodeid, files in found.items() if files}
    config.stash.setdefault(profiles_key, {}).update(dirs)
    if not config.pluginmanager.has_plugin(PROFILE_PLUGIN_NAME):
        config.pluginmanager.register(ProfileSummary(config, nodeids), PROFILE_PLUGIN_NAME)
    return dirs


class ProfileSummary:
    """Points to the profiles in the terminal summary (and says which tests got none)."""

    def __init__(self, config: pytest.Config, nodeids: Sequence[str]) -> None:
        self.config = config
        self.nodeids = list(nodeids)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        profiles = self.config.stash.get(profiles_key, {})
        terminalreporter.write_sep("-", "pytest-tpu profiles of regressions")
        for nodeid in self.nodeids:
            where = profiles.get(nodeid)
            text = f"tensorboard --logdir {where}" if where else "no trace was written"
            terminalreporter.write_line(f"{nodeid}: {text}")


class ProfilePlugin:
    """In the child: each test's call phase runs under the TensorFlow profiler."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        with _profiler(trace_dir(self.root, item.nodeid)):
            return (yield)


class _profiler:
    """``tf.profiler.experimental.start/stop`` as a context manager (stopped on failure too)."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir

    def __enter__(self) -> None:
        import tensorflow as tf

        tf.profiler.experimental.start(str(self.logdir))

    def __exit__(self, *exc: Any) -> None:
        import tensorflow as tf

        tf.profiler.experimental.stop()


def pytest_configure(config: pytest.Config) -> None:
    """Module-level hook for the child (``-p pytest_tpu.profiling``): profile when asked."""
    root = os.environ.get(PROFILE_ENV)
    if root and not config.pluginmanager.has_plugin("pytest-tpu-profiler"):
        config.pluginmanager.register(ProfilePlugin(Path(root)), "pytest-tpu-profiler")
