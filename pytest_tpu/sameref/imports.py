"""Each process of a same-job comparison imports the project's code from its own tree.

A project installed in development mode (``pip install -e .``: a ``.pth`` file naming ``src/``, or
a finder mapping a package to the checkout), or put on ``PYTHONPATH`` by an absolute path, is
imported from the user's checkout whatever folder a process runs in. The base side, running in
a worktree of REF, then imported the head's code under the base's tests, and a change in that
code could not show (measured: a pure-Python function in ``src/`` made 30 % slower read
``unchanged -0.2% [-1.4, +1.0]`` with ``PYTHONPATH=$PWD/src``; the gate passed).

So the session that starts a comparison names its checkout in ``REF_HOME_ENV``, which every process
it starts inherits, and a process whose own tree (the nearest folder above its working folder
that holds ``.git``) is another one puts ``Redirect`` first on ``sys.meta_path``: a top-level
module that the other finders would load from the checkout is loaded from the same place in this
process's tree instead, or is missing there, as it is in that revision; so is a submodule that a
finder maps to the checkout (most follow their package's ``__path__``, in the tree already).
Paths in the checkout whose first part the tree lacks, git does not track there and is not
new Python source (a virtual environment or other untracked folder inside it) are not the
repository's and are left alone; an uncommitted new module is the dirty tree's, missing in REF's.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

from pytest_tpu.options import REF_HOME_ENV


def own_tree(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git`` (a worktree's is a file)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def follow_own_tree(cwd: Path | None = None) -> Redirect | None:
    """Install ``Redirect`` where this process runs in another tree than ``REF_HOME_ENV`` names;
    the installed finder, or None where nothing needs redirecting."""
    home = os.environ.get(REF_HOME_ENV, "")
    tree = own_tree((cwd or Path.cwd()).resolve())
    if not home or tree is None or Path(os.path.realpath(home)) == tree:
        return None
    for finder in sys.meta_path:
        if isinstance(finder, Redirect):
            return finder
    redirect = Redirect(Path(os.path.realpath(home)), tree)
    redirect.early = loaded_from_home(redirect)
    sys.meta_path.insert(0, redirect)
    return redirect


def loaded_from_home(redirect: Redirect) -> list[str]:
    """Top-level modules of the checkout this process imported before ``redirect`` could act:
    a plugin of the project's own, named with ``-p`` or by an entry point, loads first. This
    plugin is the instrument, the same on both sides by design, and is not counted."""
    return sorted(name for name, where in _top_level_files() if redirect.twin(where) is not None)


def _top_level_files() -> list[tuple[str, str]]:
    """The top-level modules this process holds, with their files, this plugin's left out."""
    ours = __name__.partition(".")[0]
    found = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if "." not in name and name != ours and isinstance(where, str):
            found.append((name, where))
    return found


def moved() -> tuple[list[str], list[str]]:
    """The top-level modules this process loaded from its own tree instead of the checkout,
    and those it had loaded from the checkout before it could (``loaded_from_home``)."""
    for finder in sys.meta_path:
        if isinstance(finder, Redirect):
            return sorted(set(finder.moved)), finder.early
    return [], []


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def described(moved: Sequence[str], early: Sequence[str], ref: str) -> list[str]:
    """The summary's lines on the modules the base side took from its worktree, and on those
    it could only take from this checkout."""
    lines = []
    if moved:
        lines.append(
            f"the base side imported {_names(moved)} from {ref}'s worktree: this environment "
            "loads them from this checkout (an editable install or an absolute PYTHONPATH), "
            "which would have measured this tree's code on both sides"
        )
    if early:
        lines.append(
            f"the base side ran this checkout's {_names(early)}, not {ref}'s: imported before "
            "any test (a plugin named with -p or by an entry point), so its changes are not "
            "measured"
        )
    return lines


def installed_copies(root: Path) -> list[tuple[str, str]]:
    """Top-level modules this process loaded from outside ``root`` that ``root`` holds too
    (``project_names``): an installed copy (``pip install .``), which both sides load."""
    home = Path(os.path.realpath(root))
    found = [
        (name, where)
        for name, where in _top_level_files()
        if name not in sys.stdlib_module_names
        and not Path(os.path.realpath(where)).is_relative_to(home)
    ]
    if not found:
        return []
    held = project_names(home)
    return sorted(item for item in found if item[0] in held)


_NOT_THE_PROJECT = frozenset({"conftest", "setup", "test", "tests"})


def tracked(root: Path) -> list[str]:
    """The paths git tracks in ``root``'s repository, relative to ``root``; [] where git cannot
    tell."""
    return _ls_files(root)


def untracked_sources(root: Path) -> list[str]:
    """The first parts of ``root`` that hold Python source git does not track yet and does not
    ignore: a new ``helper.py`` or package not committed. A folder of anything else (a virtual
    environment that no ``.gitignore`` names) is not counted. [] where git cannot tell."""
    # --directory names an untracked folder once ("venv/"), not each of its files.
    listed = _ls_files(root, "--others", "--exclude-standard", "--directory")
    tops = {name.split("/")[0] for name in listed}
    return sorted(
        top for top in tops if top.endswith(".py") or (root / top / "__init__.py").is_file()
    )


def _ls_files(root: Path, *flags: str) -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", *flags],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return []
    return [name for name in listed.split("\0") if name]


def project_names(root: Path) -> set[str]:
    """The top-level names the repository's files hold: a package anywhere (a folder with
    ``__init__.py`` under none; trial 41, a monorepo's ``packages/mylib2/src/mylib2``), a module
    at its top or in ``src/``."""
    files = [name for name in tracked(root) if name.endswith(".py")]
    packages = {f.rpartition("/")[0] for f in files if f.rpartition("/")[2] == "__init__.py"}
    names = {
        folder.rpartition("/")[2]
        for folder in packages
        if folder and folder.rpartition("/")[0] not in packages
    }
    names |= {
        f.rpartition("/")[2].removesuffix(".py")
        for f in files
        if f.rpartition("/")[0] in ("", "src")
    }
    return names - _NOT_THE_PROJECT


def installed_said(copies: Sequence[tuple[str, str]]) -> list[str]:
    """The summary's line on ``installed_copies``: the comparison cannot see their changes."""
    if not copies:
        return []
    shown = ", ".join(f"{name} ({where})" for name, where in copies[:3])
    more = f" and {len(copies) - 3} more" if len(copies) > 3 else ""
    return [
        f"both sides imported {shown}{more}: an installed copy, not this checkout's code, so a "
        "change to it here or in the base is not measured; install the project editable "
        "(pip install -e .) or put its folder on PYTHONPATH"
    ]


def not_passed(said: Sequence[str], copies: Sequence[tuple[str, str]]) -> list[str]:
    """The gate's lines with a ``passed`` verdict made ``INCONCLUSIVE``: both sides ran an
    installed copy, so the rows cannot vouch for the project's code (trial 41: a copy installed
    with ``pip install .`` and a 30 % slowdown in the tree: ``passed``, ``-0.9 % unchanged``)."""
    names = ", ".join(name for name, _ in copies[:3])
    why = (
        f"; both sides ran an installed copy of {names}: a slowdown in this tree's code is "
        "neither shown nor ruled out"
    )
    return [
        line.replace("): passed, ", "): INCONCLUSIVE (no regression shown), ", 1) + why
        if line.startswith("regression gate (") and "): passed, " in line
        else line
        for line in said
    ]


class Redirect:
    """A meta path finder that moves top-level modules found in ``home`` to ``tree``."""

    def __init__(self, home: Path, tree: Path) -> None:
        self.home = home
        self.tree = tree
        # Where a path into the checkout can start: as resolved, or as named (a symlink).
        self.prefixes = tuple({str(home), os.environ.get(REF_HOME_ENV) or str(home)})
        self.moved: list[str] = []  # the modules it loaded from ``tree``, by name
        self.early: list[str] = []  # the checkout's, loaded before it was installed
        self.tops: frozenset[str] | None = None  # ``_tops``, read when first needed

    def twin(self, location: str) -> Path | None:
        """``location``'s place in ``tree``, or None where it is not the repository's."""
        if not location.startswith(self.prefixes):  # most imports: no path to resolve
            return None
        try:
            relative = Path(os.path.realpath(location)).relative_to(self.home)
        except ValueError:
            return None
        if not relative.parts:
            return None
        if not (self.tree / relative.parts[0]).exists() and relative.parts[0] not in self._tops():
            return None  # not the repository's: an untracked virtual environment, say
        return self.tree / relative

    def _tops(self) -> frozenset[str]:
        """The first parts of the paths git tracks in the checkout, and of Python source it
        would track once added, once: a module at the top that REF lacks (``helper.py``,
        committed since, or new and not committed yet) is this tree's, missing in REF's."""
        if self.tops is None:
            tops = {name.split("/")[0] for name in tracked(self.home)}
            self.tops = frozenset(tops | set(untracked_sources(self.home)))
        return self.tops

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        # Submodules too: most follow their package's __path__, in the tree already, but a
        # finder may map one straight to the checkout (setuptools' editable finder for a
        # namespace package's part, trial 41: the base ran the head's ``acmez.fast``).
        spec = self._others(name, path, target)
        if spec is None:
            return None
        if spec.has_location and spec.origin:
            return self._moved_file(spec)
        if spec.loader is None and spec.submodule_search_locations:  # a namespace package
            return self._moved_namespace(spec)
        return spec  # built in, or a loader of its own (six's ``six.moves``): not a file

    def _others(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: ModuleSpec | None = find(name, path, target)
            if spec is not None:
                return spec
        return None

    def _moved_file(self, spec: ModuleSpec) -> ModuleSpec:
        assert spec.origin is not None
        twin = self.twin(spec.origin)
        if twin is None:
            return spec
        if not twin.is_file():
            raise ModuleNotFoundError(self._missing(spec.name), name=spec.name)
        package = spec.submodule_search_locations is not None
        moved = importlib.util.spec_from_file_location(
            spec.name, twin, submodule_search_locations=[str(twin.parent)] if package else None
        )
        if moved is None:  # a file no loader takes: leave it to the others, as found
            return spec
        self.moved.append(spec.name)
        return moved

    def _moved_namespace(self, spec: ModuleSpec) -> ModuleSpec:
        assert spec.submodule_search_locations is not None
        kept: list[str] = []
        for location in spec.submodule_search_locations:
            twin = self.twin(location)
            if twin is None:
                kept.append(location)
            elif twin.is_dir():
                kept.append(str(twin))
        if kept == list(spec.submodule_search_locations):
            return spec  # nothing of the checkout's
        if not kept:
            raise ModuleNotFoundError(self._missing(spec.name), name=spec.name)
        self.moved.append(spec.name)
        spec.submodule_search_locations = kept
        return spec

    def _missing(self, name: str) -> str:
        return f"No module named {name!r} in {self.tree} (it is imported from {self.home} here)"
