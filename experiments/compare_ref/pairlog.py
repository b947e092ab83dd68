"""A pytest plugin for the same-job experiment: logs every compared row's paired rounds.

Loaded by ``run.py --pairs FILE`` through ``PYTEST_PLUGINS`` (so the nested sessions that confirm
a regression or measure a row again with more rounds load it too), it wraps the function that
turns one benchmark's rounds into a row and appends, per row, one JSON line to the file named by
``PAIRLOG_OUT``: the node id, the experiment's name for the session (``PAIRLOG_SESSION``), which
session measured it (``first``, ``confirm`` or ``rounds``), both sides' rounds with their turns,
and the paired log ratios. ``blocks.py`` judges those rounds
again offline under other rules for the uncertainty. The plugin changes no row.

A new pair with the roles swapped (``pytest_tpu.sameref.swap``) runs the base's code in its leading
process, so its rows come out base against head; its record is turned back -- ``head`` holds the
head's code's rounds, ``differences`` their log ratios against the base's -- and marked
``"swapped": true`` (its ``verdict`` and ``change`` stay those of the pair as it ran). Before, such
records read the other way round, and ``pairs_replay.py`` drew them with the wrong sign.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.stats import pair_differences
from pytest_tpu.results import BenchResult
from pytest_tpu.sameref import nested, rows
from pytest_tpu.sameref.turns import Rounds
from pytest_tpu.sameref.worktree import BORROW_ENV

OUT_ENV = "PAIRLOG_OUT"
SESSION_ENV = "PAIRLOG_SESSION"  # the experiment's name for the session, e.g. "quiet-03"
_compare_one = rows.compare_one
# Read at import (``PYTEST_PLUGINS`` loads this before any plugin's pytest_configure): the head's
# plugin takes the variable out of the environment when it starts.
_SWAPPED = bool(os.environ.get(BORROW_ENV))


def _stage() -> str:
    if nested.factors():
        return "rounds"
    return "confirm" if nested.confirming() else "first"


def logged_compare_one(
    head: BenchResult, base_samples: Sequence[float], rounds: Rounds, threshold: float
) -> Row:
    row = _compare_one(head, base_samples, rounds, threshold)
    head_rounds = rows._measured(rounds.head, head.samples)
    base_rounds = rows._measured(rounds.base, base_samples)
    if _SWAPPED:  # this session's head side ran the base's code: turned back, as ``swap`` does
        head_rounds, base_rounds = base_rounds, head_rounds
    record: dict[str, Any] = {
        "nodeid": head.nodeid,
        "session": os.environ.get(SESSION_ENV, ""),
        "stage": _stage(),
        "swapped": _SWAPPED,
        "factor": nested.factors().get(head.nodeid, 1),
        "pid": os.getpid(),
        "time": time.time(),
        "threshold": threshold,
        "head": head_rounds,
        "base": base_rounds,
        "differences": pair_differences(head_rounds, base_rounds),
        "verdict": row.verdict,
        "change": row.change,
        "detectable": row.detectable,
    }
    out = os.environ.get(OUT_ENV)
    if out:
        with open(out, "a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
    return row


rows.compare_one = logged_compare_one  # build_rows looks it up in the module at call time
