"""The base side's finder (``sameref.imports.Redirect``), on specs other finders return."""

from __future__ import annotations

import subprocess
import sys

import six  # noqa: F401  # registers its own finder for ``six.moves``, as TensorFlow's imports do

from pytest_tpu.sameref.imports import Redirect


def test_a_package_another_finder_makes_is_left_to_it(tmp_path):
    # Seen: every TensorFlow benchmark "failed on the base side (No module named 'six.moves'
    # in <worktree>)": a loader's package with no locations was taken for a namespace package.
    redirect = Redirect(tmp_path / "checkout", tmp_path / "tree")
    sys.meta_path.insert(0, redirect)
    try:
        spec = redirect.find_spec("six.moves", [], None)
    finally:
        sys.meta_path.remove(redirect)
    assert spec is not None and spec.name == "six.moves"
    assert redirect.moved == []


def test_what_the_base_side_takes_from_its_worktree_and_what_it_leaves(tmp_path):
    # A first part the worktree lacks: the repository's where git tracks it or it is new Python
    # source (missing on the base side, as it is in REF); a folder of anything else, or one that
    # .gitignore names, is not the repository's and is left where it is (a virtual environment).
    home, tree = tmp_path / "checkout", tmp_path / "tree"
    (home / "venv" / "lib").mkdir(parents=True)
    (home / "venv" / "lib" / "site.py").write_text("")
    (home / "build").mkdir()
    (home / "build" / "gen.py").write_text("")
    (home / "newpkg").mkdir()
    (home / "newpkg" / "__init__.py").write_text("")
    (home / "helper.py").write_text("")
    (home / ".gitignore").write_text("build/\n")
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(home)], check=True)
    subprocess.run(["git", "-C", str(home), "add", ".gitignore"], check=True)
    redirect = Redirect(home, tree)
    assert redirect.twin(str(home / "helper.py")) == tree / "helper.py"
    assert redirect.twin(str(home / "newpkg" / "__init__.py")) == tree / "newpkg" / "__init__.py"
    assert redirect.twin(str(home / "venv" / "lib" / "site.py")) is None
    assert redirect.twin(str(home / "build" / "gen.py")) is None
