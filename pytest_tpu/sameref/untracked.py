"""Why a benchmark fails on the base side where git does not have what it needs.

The base runs in a fresh worktree of REF, which holds what git tracks and nothing else. Data a
script generated, weights saved by an earlier run, extensions compiled in place (``pip install
-e .`` or ``build_ext --inplace``), anything ``.gitignore`` names, stay in the checkout. A
benchmark that needs them fails on the base side with ``FileNotFoundError`` or
``ModuleNotFoundError``, and the row would name a temporary path the user never made.
"""

from __future__ import annotations

import os
import re
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from pytest_tpu.options import REF_HOME_ENV
from pytest_tpu.sameref.imports import own_tree

# The messages of ``FileNotFoundError`` and ``ModuleNotFoundError`` as pytest shows them.
_NO_FILE = re.compile(r"No such file or directory: '([^']+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_ONLY_TRACKED = "but not in the base's worktree, which holds only what git tracks"


def hint(error: str, cwd: Path) -> str:
    """A clause for a base-side failure over a file this worktree lacks and the checkout
    (``REF_HOME_ENV``) has, or ""."""
    home = os.environ.get(REF_HOME_ENV)
    tree = own_tree(cwd.resolve())
    if not home or tree is None:
        return ""
    return _data(error, cwd, tree, Path(home)) or _extension(error, tree, Path(home))


def _data(error: str, cwd: Path, tree: Path, home: Path) -> str:
    found = _NO_FILE.search(error)
    if found is None:
        return ""
    try:
        relative = (cwd / found.group(1)).resolve().relative_to(tree)
    except ValueError:
        return ""  # outside the worktree: the same path on both sides
    if not (home / relative).exists():
        return ""
    return (
        f"; {relative} is in this checkout {_ONLY_TRACKED}: have the benchmark make it, or read "
        "it by an absolute path"
    )


def _extension(error: str, tree: Path, home: Path) -> str:
    """The clause for a module missing here that the checkout has as a compiled extension."""
    found = _NO_MODULE.search(error)
    if found is None:
        return ""
    package, _, leaf = found.group(1).rpartition(".")
    # Its package's folders; a package whose ``__init__`` failed on it is no longer imported.
    parts = package.split(".") if package else []
    folders = getattr(sys.modules.get(package), "__path__", None) or [
        str(tree.joinpath(*parts)),
        str(tree.joinpath("src", *parts)),
    ]
    for folder in folders:
        try:
            relative = Path(folder).resolve().relative_to(tree)
        except ValueError:
            continue
        for suffix in EXTENSION_SUFFIXES:
            built = relative / f"{leaf}{suffix}"
            if (home / built).is_file():
                return (
                    f"; {built} is built in this checkout {_ONLY_TRACKED}: where REF must be "
                    "built to run, compare with a baseline saved there (--save-baseline, then "
                    "--compare)"
                )
    return ""
