"""The command line of the base session ``--compare-ref`` starts: the same selection and the
same measuring as this session's."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tpu.childargs import measuring_args, pytest_command, session_args
from pytest_tpu.options import Settings
from pytest_tpu.sameref.worktree import twin_arg, twin_of


def _in_tree(arg: str, root: Path, tree: Path) -> str:
    """A test path of the head's command line, pointing into the base's worktree instead."""
    return twin_arg(arg, lambda path: twin_of(path, root, tree))


def child_args(config: pytest.Config, settings: Settings, root: Path, tree: Path) -> list[str]:
    """The base session's command line: same selection, same measuring options."""
    # A module that does not import in REF fails its own rows, not the whole base session.
    args = [*pytest_command(), "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    args.append("--continue-on-collection-errors")
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        # Otherwise the base finds its tests itself, from its own testpaths or folder.
        args += [_in_tree(str(arg), root, tree) for arg in config.args]
    if config.option.keyword:
        args += ["-k", config.option.keyword]
    if config.option.markexpr:
        args += ["-m", config.option.markexpr]
    if config.option.inifilename and config.inipath is not None:  # -c FILE: its twin there
        args += ["-c", _in_tree(str(config.inipath), root, tree)]
    if config.option.rootdir:  # node ids are relative to it: its twin there
        args.append(f"--rootdir={_in_tree(str(config.rootpath), root, tree)}")
    return args + session_args(config) + measuring_args(config, settings)
