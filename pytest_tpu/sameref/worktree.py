"""A temporary git worktree of the base revision, removed whatever way the session ends.

Worktrees are created under the system's temporary folder with a name that carries the owning
process id (``pytest-tpu-ref-<pid>-<random>``). They are removed at session end, on Ctrl-C and on
SIGTERM (``pytest_unconfigure`` and ``atexit``); one left by a process that was killed outright is
removed by the next session in the same repository, once its owner is gone. What such a process
leaves outside any repository's list (its scratch folder with the base session's log, or a tree
whose repository is gone) is removed by the next ``--compare-ref`` session on the machine.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PREFIX = "pytest-tpu-ref-"
# Where a folder goes whose path must be short (a Unix socket's: ``turns.socket_path``), when the
# system's temporary folder is too deep; ``remove_leftovers`` looks there too.
SHORT_FOLDER = "/tmp"
GIT_TIMEOUT = 120.0
# A tree a new pair of processes borrows for its base side instead of checking REF out: the
# head's own, in a pair with the roles swapped (``swap.Swap``).
BORROW_ENV = "PYTEST_TPU_REF_BORROW"


def twin_of(path: Path, root: Path, tree: Path) -> Path:
    """``path`` under ``root`` as its twin under ``tree``; as it is where it lies outside."""
    try:
        return tree / path.resolve().relative_to(root.resolve())
    except ValueError:
        return path


def twin_arg(arg: str, twin: Callable[[Path], Path]) -> str:
    """A test argument (``path[::name]``) with an absolute path moved by ``twin``; a relative
    one as it is: it is relative to the invocation folder, which has its twin already."""
    path, sep, rest = arg.partition("::")
    if not Path(path).is_absolute():
        return arg
    return f"{twin(Path(path))}{sep}{rest}"


class RefError(Exception):
    """A revision or repository that cannot be used; the message names it."""


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT
        )
    except FileNotFoundError:
        raise RefError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise RefError(f"git {' '.join(args)} did not finish in {GIT_TIMEOUT:g} s") from None


def repository_root(path: Path) -> Path:
    """The top of the git checkout holding ``path``."""
    done = _git(path, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise RefError(f"{path} is not inside a git checkout")
    return Path(done.stdout.strip())


def resolve(root: Path, ref: str) -> str:
    """The commit ``ref`` names (any revision: a branch, a tag, a sha, ``origin/main``)."""
    if not ref or ref.startswith("-"):
        raise RefError(f"{ref!r} is not a git revision")
    done = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise RefError(f"unknown revision {ref!r} in {root}{_shallow_hint(root)}")
    return done.stdout.strip()


def _shallow_hint(root: Path) -> str:
    """Why a revision may be missing from a shallow clone, or "" in a full one. A CI checkout
    is shallow by default (actions/checkout fetches one commit), so that is the likely first
    failure of a same-job comparison in CI (new-user trial 32: "unknown revision 'HEAD~1'" in a
    clone of depth 1, with no word on why)."""
    done = _git(root, "rev-parse", "--is-shallow-repository")
    if done.returncode != 0 or done.stdout.strip() != "true":
        return ""
    return (
        "; this clone is shallow and holds only part of the history: fetch the revision, e.g. "
        "`git fetch --unshallow`, or `fetch-depth: 0` with actions/checkout"
    )


def head(root: Path, beyond: str) -> str:
    """What this session measures as the head: HEAD's commit, and ``beyond`` it (``dirty``)."""
    done = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    commit = done.stdout.strip()[:12] if done.returncode == 0 else "no commit yet"
    return f"{commit} with {beyond}" if beyond else commit


def dirty(root: Path) -> str:
    """What the checkout holds beyond HEAD, as the header says it ("" when nothing).

    Uncommitted changes to tracked files, and untracked Python files that git does not ignore: a
    new test or module is measured on the head side and absent from the base (a trial's head
    read `HEAD` while an untracked benchmark file was measured). Other untracked files (reports,
    data written by earlier runs) are not counted: they would make every tree look dirty.
    """
    done = _git(root, "status", "--porcelain", "--untracked-files=no")
    changed = done.returncode == 0 and bool(done.stdout.strip())
    listed = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    names = listed.stdout.split("\0") if listed.returncode == 0 else []
    python = sum(name.endswith(".py") for name in names)
    parts = ["uncommitted changes"] if changed else []
    parts += [f"{python} untracked .py file(s)"] if python else []
    return " and ".join(parts)


@dataclass
class Worktree:
    """A checked-out base revision; ``remove`` is idempotent."""

    root: Path  # the repository it belongs to
    path: Path
    commit: str

    @property
    def scratch(self) -> Path:
        """The temporary folder around the tree: the socket and the base session's log."""
        return self.path.parent

    def remove(self) -> None:
        if not self.path.exists():
            return
        _git(self.root, "worktree", "remove", "--force", str(self.path))
        shutil.rmtree(self.path, ignore_errors=True)
        _git(self.root, "worktree", "prune")


@dataclass(frozen=True)
class Borrowed:
    """A tree this session did not make, measured as it is and never removed; only its
    temporary ``scratch`` folder goes."""

    path: Path
    scratch: Path

    def remove(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def short_scratch() -> Path | None:
    """A folder of ours in ``SHORT_FOLDER``, removed at exit (and, after a SIGKILL, by the next
    session's ``remove_leftovers``); None where there is no such folder."""
    if not os.path.isdir(SHORT_FOLDER):
        return None
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=SHORT_FOLDER))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def borrow(path: Path) -> Borrowed:
    """The tree at ``path`` for the base side, with a scratch folder removed at exit at the
    latest."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{PREFIX}borrowed-{os.getpid()}-"))
    tree = Borrowed(path, scratch)
    atexit.register(tree.remove)
    return tree


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(folder: Path) -> int | None:
    """The process id a folder of ours is named after (``pytest-tpu-ref-[borrowed-]<pid>-...``)."""
    owner = folder.name.removeprefix(PREFIX).removeprefix("borrowed-").split("-", 1)[0]
    return int(owner) if owner.isdigit() else None


def _registered(tree: Path) -> bool:
    """Whether a tree is still a repository's worktree: its ``.git`` file points at the
    repository's record of it, which that repository's next session removes (``remove_stale``),
    naming it in its header."""
    try:
        pointer = (tree / ".git").read_text().strip()
    except OSError:
        return False
    return pointer.startswith("gitdir: ") and Path(pointer.removeprefix("gitdir: ")).is_dir()


def remove_leftovers() -> list[Path]:
    """Remove temporary folders of ours in the system's temporary folder whose owner is gone and
    that no repository lists: a scratch folder holding only the base session's log, a
    borrowed tree's scratch, or a tree whose repository was deleted. A process killed while it
    cleaned up, or a throwaway repository deleted under a killed session, left them where no
    repository's ``git worktree list`` shows them; returns what was removed."""
    removed = []
    places = dict.fromkeys([Path(tempfile.gettempdir()), Path(SHORT_FOLDER)])
    for folder in (found for place in places for found in place.glob(f"{PREFIX}*")):
        owner = _owner(folder)
        if owner is None or _alive(owner) or not folder.is_dir() or folder.is_symlink():
            continue
        if _registered(folder / "tree"):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():  # another user's folder stays where it is
            removed.append(folder)
    return sorted(removed)


def remove_stale(root: Path) -> list[Path]:
    """Remove worktrees of ours whose owning process is gone; returns what was removed."""
    done = _git(root, "worktree", "list", "--porcelain")
    removed = []
    for line in done.stdout.splitlines():
        path = Path(line.removeprefix("worktree ").strip())
        if not line.startswith("worktree ") or not path.parent.name.startswith(PREFIX):
            continue
        owner = _owner(path.parent)
        if owner is not None and not _alive(owner):
            Worktree(root, path, "").remove()
            shutil.rmtree(path.parent, ignore_errors=True)
            removed.append(path)
    _git(root, "worktree", "prune")
    return removed


def create(root: Path, commit: str) -> Worktree:
    """Check ``commit`` out in a fresh temporary worktree, removed at exit at the latest."""
    parent = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    path = parent / "tree"
    tree = Worktree(root, path, commit)
    atexit.register(_remove_all, tree, parent)
    done = _git(root, "worktree", "add", "--detach", str(path), commit)
    if done.returncode != 0:
        _remove_all(tree, parent)
        raise RefError(f"could not check out {commit[:12]}: {done.stderr.strip()}")
    return tree


def _remove_all(tree: Worktree, parent: Path) -> None:
    with contextlib.suppress(Exception):
        tree.remove()
    shutil.rmtree(parent, ignore_errors=True)
