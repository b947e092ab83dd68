"""The base side's finder (``sameref.imports.Redirect``), on specs other finders return."""

from __future__ import annotations

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
