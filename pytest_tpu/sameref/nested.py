"""A nested ``--compare-ref`` session: a new pair of processes that measures some benchmarks again.

It runs as a child of the session (``pytest --compare-ref=COMMIT`` on just those node ids, its
report in a temporary file), in the base's worktree where the roles are swapped, and is stopped
the way it cleans up (SIGTERM) whatever ends the wait for it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_tpu.childargs import pytest_command
from pytest_tpu.sameref import seed, worktree
from pytest_tpu.sameref.swap import Swap, inverted

CONFIRM_ENV = "PYTEST_TPU_REF_CONFIRMING"  # set in the nested session: it does not confirm again
# {node id: factor} as JSON in a session with more rounds (a factor over 1), or with fewer (a new
# pair checking a reading its first pair resolved far finer than the threshold: ``lean_factor``)
ROUNDS_ENV = "PYTEST_TPU_REF_ROUNDS"
# The node ids (JSON) a nested session keeps of what this session's own test arguments collect,
# where some test lies outside the root folder (see ``_where``)
KEEP_ENV = "PYTEST_TPU_REF_KEEP"
# {node id: paired rounds} of the outermost session's first pair, as JSON, in every nested
# session and its base: the rounds a factor in ``ROUNDS_ENV`` multiplies (``resolve.scale_rounds``)
FIRST_ROUNDS_ENV = "PYTEST_TPU_REF_FIRST_ROUNDS"
TIMEOUT_S = 3600.0
GRACE_S = 1.0  # a nested session that got the same Ctrl-C is cleaning up already
STOP_S = 30.0  # for a SIGTERMed nested session to stop its base session and remove its worktree


# Where this session's tests are and where it was started, for the nested sessions: node ids
# are the root folder's, and a nested session started there with them could not find tests an
# ini elsewhere (``-c``) or a relative ``PYTHONPATH`` placed (trial 41: "found no collectors",
# and a regression stood on one pair, unconfirmed).
_PATHS: dict[str, Path] = {}
_INVOKED: list[Path] = []
_INI: list[Path] = []  # the ini file named with -c, which the nested sessions name too
_ROOTDIR: list[Path] = []  # the root folder named with --rootdir, likewise
_GIVEN: list[str] = []  # this session's test arguments as typed ([] where it found them itself)
# Where a line goes as each new pair starts: the head's terminal (``announce_with``). After the
# last test a session measured again for 18-146 s in silence (trial 70: "the cost is hard to
# predict"); the line says what runs now and how long ago the last test ended.
_ANNOUNCE: list[Callable[[str], None]] = []
_FIRST_ROUNDS: dict[str, int] = {}  # ``remember_first_rounds``


def locate(
    paths: Mapping[str, Path],
    invoked: Path,
    ini: Path | None = None,
    given: Sequence[str] = (),
    rootdir: Path | None = None,
) -> None:
    """Remember each test's file by node id, the folder this session was started in, the ini
    file its ``-c`` named, the test arguments it was given and the ``--rootdir`` it named."""
    _PATHS.update(paths)
    _INVOKED[:] = [invoked]
    _INI[:] = [ini] if ini is not None else []
    _GIVEN[:] = given
    _ROOTDIR[:] = [rootdir] if rootdir is not None else []


def _ini(swap: Swap | None) -> list[str]:
    """``-c`` with the ini file and ``--rootdir`` with the root folder, where this session named
    them, by full path (their twins with the roles swapped)."""
    args = []
    if _INI:
        args += ["-c", str(swap.twin(_INI[0]) if swap is not None else _INI[0])]
    if _ROOTDIR:
        args.append(f"--rootdir={swap.twin(_ROOTDIR[0]) if swap is not None else _ROOTDIR[0]}")
    return args


def _where(
    nodeids: Sequence[str], rootdir: Path, swap: Swap | None
) -> tuple[Path, list[str], dict[str, str]]:
    """The folder a nested session starts in, its test arguments and what its environment adds.

    Where every test lies under the root folder, a node id is the root folder's however it is
    reached: the session starts in this session's folder (or its twin with the roles swapped)
    with each test's file by its full path. A test outside it (``-c`` naming an ini in another
    folder) has a node id relative to the argument it was found through, which no other
    argument reproduces (trial 41: "found no collectors", and a regression stood on one pair):
    there the nested session is given this session's own arguments and keeps just ``nodeids``
    (``KEEP_ENV``). Without this session's folder known, the root folder and the node ids."""
    paths = [_PATHS.get(nodeid) for nodeid in nodeids]
    if not _INVOKED or any(p is None for p in paths):
        return (swap.cwd if swap is not None else rootdir), list(nodeids), {}
    cwd = swap.twin(_INVOKED[0]) if swap is not None else _INVOKED[0]
    root = rootdir.resolve()
    if not all(p is not None and p.resolve().is_relative_to(root) for p in paths):
        given = [_placed(arg, swap) for arg in _GIVEN]
        return cwd, given, {KEEP_ENV: json.dumps(list(nodeids))}
    args = []
    for nodeid, path in zip(nodeids, paths, strict=True):
        assert path is not None
        rest = nodeid.partition("::")[2]
        placed = swap.twin(path) if swap is not None else path
        args.append(f"{placed}::{rest}" if rest else str(placed))
    return cwd, args, {}


def _placed(arg: str, swap: Swap | None) -> str:
    """A test argument as typed, in the base's worktree where the roles are swapped (a relative
    one is relative to the folder, which has its twin there)."""
    return arg if swap is None else worktree.twin_arg(arg, swap.twin)


def kept() -> frozenset[str] | None:
    """The node ids this nested session keeps of what it collects, or None: it keeps all."""
    try:
        found = json.loads(os.environ.get(KEEP_ENV) or "null")
    except ValueError:
        return None
    return frozenset(str(n) for n in found) if isinstance(found, list) else None


class Keep:
    """Deselects whatever a nested session's arguments collect beyond the node ids it is for."""

    def __init__(self, nodeids: frozenset[str]) -> None:
        self.nodeids = nodeids

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        dropped = [item for item in items if item.nodeid not in self.nodeids]
        if dropped:
            items[:] = [item for item in items if item.nodeid in self.nodeids]
            config.hook.pytest_deselected(items=dropped)


def confirming() -> bool:
    """Whether this session is itself the re-measurement."""
    return bool(os.environ.get(CONFIRM_ENV))


def factors() -> dict[str, float]:
    """The round factor of each benchmark of a session with more or fewer rounds, by node id."""
    return _factors_in(os.environ)


def _by_nodeid(env: Mapping[str, str], name: str) -> dict[str, Any]:
    """The JSON object ``env[name]`` holds, by node id; {} where it is missing or not one."""
    try:
        found = json.loads(env.get(name) or "{}")
    except ValueError:
        return {}
    return {str(k): v for k, v in found.items()} if isinstance(found, dict) else {}


def _factors_in(env: Mapping[str, str]) -> dict[str, float]:
    """The round factors ``env`` gives a session (``ROUNDS_ENV``), by node id."""
    return {
        k: float(v)
        for k, v in _by_nodeid(env, ROUNDS_ENV).items()
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf and v != 1
    }


def announce_with(write: Callable[[str], None] | None) -> None:
    """Write a line through ``write`` as each new pair starts (None: no more lines)."""
    _ANNOUNCE[:] = [write] if write is not None else []


def remember_first_rounds(paired: Mapping[str, int]) -> None:
    """Keep how many rounds each benchmark's first pair paired, for the nested sessions; only in
    the outermost session (a nested one has the outermost's already, and its own are scaled)."""
    if FIRST_ROUNDS_ENV not in os.environ:
        _FIRST_ROUNDS.clear()
        _FIRST_ROUNDS.update({k: v for k, v in paired.items() if v > 0})


def first_rounds() -> dict[str, int]:
    """The paired rounds of the outermost session's first pair, by node id ({} in that session
    itself, or where they are not known)."""
    found = _by_nodeid(os.environ, FIRST_ROUNDS_ENV)
    return {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def _first_rounds_env() -> dict[str, str]:
    """What a nested session's environment adds of the first pair's rounds (``FIRST_ROUNDS_ENV``):
    this session's, where it is the outermost; else what it was given, passed on as it is."""
    return {FIRST_ROUNDS_ENV: json.dumps(_FIRST_ROUNDS)} if _FIRST_ROUNDS else {}


def starting(nodeids: Sequence[str], env: Mapping[str, str], swap: Swap | None) -> str:
    """The line said as a new pair of processes starts: how many benchmarks, with how many
    rounds, which roles."""
    factors = [v for k, v in _factors_in(env).items() if k in set(nodeids)]
    most = max(factors, default=1.0)
    rounds = f", up to {most:g}x the rounds" if most > 1 else ""
    roles = ", the roles swapped" if swap is not None else ""
    return f"a new pair of processes measures {len(nodeids)} benchmark(s) again{rounds}{roles}"


def command(
    nodeids: Sequence[str], commit: str, pct: float, report: Path, measuring: Sequence[str]
) -> list[str]:
    return [
        *pytest_command(), *nodeids, "-q", "-p", "no:cacheprovider",
        "-p", "no:randomly", f"--compare-ref={commit}", f"--fail-on-regression={pct:g}",
        f"--tpu-report={report}", *measuring,
    ]  # fmt: skip


def nested(
    nodeids: Sequence[str],
    commit: str,
    pct: float,
    rootdir: Path,
    measuring: Sequence[str],
    env: Mapping[str, str],
    swap: Swap | None = None,
) -> tuple[dict[str, Mapping[str, Any]], str]:
    """Run a nested ``--compare-ref`` session of ``nodeids`` with ``env`` added: its report's
    time rows by name, or why there are none ("did not run (...)", "gave no comparison (...)").
    With ``swap``, the base's code leads and the rows are turned back (``swap``)."""
    cwd, tests, keep = _where(nodeids, rootdir, swap)
    added = {**(swap.env() if swap is not None else {}), **keep}
    with tempfile.TemporaryDirectory(prefix="pytest-tpu-again-") as folder:
        report = Path(folder) / "again.json"
        args = command(tests, commit, pct, report, [*_ini(swap), *measuring])
        for write in _ANNOUNCE:
            write(starting(nodeids, env, swap))
        try:
            whole = {**os.environ, **_first_rounds_env(), **env, **added}
            code, output = _run(args, cwd, {**whole, **seed.for_new_pair()})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {}, f"did not run ({exc})"
        again = report_rows(report)
        if swap is not None:
            again = {name: inverted(row) for name, row in again.items()}
    if not again:
        tail = " | ".join(output.strip().splitlines()[-2:])
        return {}, f"gave no comparison (exit {code}: {tail})"
    return again, ""


def _run(args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[int, str]:
    """Run the nested session to its end; its exit code and output.

    Whatever stops the wait (a timeout, Ctrl-C, SIGTERM turned into KeyboardInterrupt) stops the
    nested session the way it cleans up: SIGTERM, so that it ends its own base session and
    removes its worktree. ``subprocess.run`` would SIGKILL it and leave both behind.
    """
    with tempfile.TemporaryFile() as out:  # a file, not a pipe: nothing needs draining
        process = subprocess.Popen(
            list(args), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            code = process.wait(timeout=TIMEOUT_S)
        except BaseException:
            _stop(process, cwd)
            raise
        out.seek(0)
        return code, out.read().decode("utf-8", errors="replace")


def _stop(process: subprocess.Popen[bytes], cwd: Path) -> None:
    """End a nested session: a moment for a Ctrl-C it got too, then SIGTERM, then SIGKILL; then
    remove what it left."""
    for wait, stop in ((GRACE_S, process.terminate), (STOP_S, process.kill)):
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            stop()
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting politely
            stop()
    process.wait()
    # Killed outright, it could not remove its worktree; and a SIGTERM that came while it was
    # cleaning up after the Ctrl-C cut that short (trial 39: its temporary folder stayed until
    # the next session). Its owner gone, what is left of it goes now.
    with contextlib.suppress(worktree.RefError):
        worktree.remove_stale(worktree.repository_root(cwd))
    worktree.remove_leftovers()


def report_rows(report: Path) -> dict[str, Mapping[str, Any]]:
    try:
        document = json.loads(report.read_text())
        rows = document["comparison"]["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(r["name"]): r for r in rows if isinstance(r, dict) and r.get("metric") == "time"}
