"""Replay how the first pair's measured offset holds one pair's ``unchanged`` rows, rule by rule.

A same-job session's first pair of processes measures every row; the rows it cannot settle are
measured again by new pairs (``pytest_tpu.sameref.confirm``), and what those read shows how far
apart the first pair's processes were (``pytest_tpu.sameref.offsets``). This takes the logged pairs
of ``run.py --pairs FILE`` session by session: the first pair's rows (``rows.compare_one`` on their
rounds, the shipped code), the new pairs' rows of the same session, and under each rule below the
bound it puts on the first pair's offset. It then counts, per arm:

- ``held``: one pair's ``unchanged`` rows the bound leaves ``inconclusive`` (for +5 % and +10 % each
  is a wrong verdict avoided; for +0 % an ``unchanged`` given up);
- ``covered``: of the unchanged code's first-pair rows in a session with a bound (not measured
  again), how often each end of the interval, widened by the bound, still reaches zero: what the
  rule promises at 97.5 % for each end. Only unchanged code's truth is known exactly (the +5 %
  arm's extra work read +4.2 to +5.8 % by the pairs in r57); ``rounds`` is the intervals alone,
  ``half`` the room the one-pair rule leaves without a bound (half the threshold).

Rules: ``t`` (Student's t with as many degrees of freedom as rows, times their root mean square;
shipped until new-user trial 28), ``z`` (shipped: the normal quantile instead), ``largest`` (the
largest offset seen, as it is), and ``t-all`` (``t`` counting rows whose rounds do not resolve a
quarter of the threshold too).

    python experiments/compare_ref/offsets_replay.py r57n_pairs.jsonl --threshold 5
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, arm_of, load  # noqa: E402
from pairs_replay import reported, row_of  # noqa: E402

from pytest_tpu.gate.compare import Row  # noqa: E402
from pytest_tpu.gate.stats import ONE_PAIR, t_ppf  # noqa: E402
from pytest_tpu.sameref import offsets  # noqa: E402

Bound = Callable[[offsets.Offset | None, offsets.Offset | None], float | None]


def _t(fine: offsets.Offset | None, _: offsets.Offset | None) -> float | None:
    return None if fine is None else t_ppf(offsets.COVER, fine.count) * fine.rms


def _z(fine: offsets.Offset | None, _: offsets.Offset | None) -> float | None:
    return None if fine is None else fine.bound


def _largest(fine: offsets.Offset | None, _: offsets.Offset | None) -> float | None:
    return None if fine is None else abs(fine.largest_log)


def _t_all(_: offsets.Offset | None, every: offsets.Offset | None) -> float | None:
    return None if every is None else t_ppf(offsets.COVER, every.count) * every.rms


def _rounds(_: offsets.Offset | None, __: offsets.Offset | None) -> float | None:
    return 0.0


RULES: dict[str, Bound] = {
    "t": _t,
    "z": _z,
    "largest": _largest,
    "t-all": _t_all,
    "rounds": _rounds,
}


def sessions(records: Sequence[Mapping[str, Any]], threshold: float) -> dict[str, dict[str, Any]]:
    """Per session: its first pair's rows and arms by node id, and its new pairs' report rows."""
    found: dict[str, dict[str, Any]] = defaultdict(lambda: {"first": {}, "arm": {}, "later": {}})
    for record in records:
        name = NAME_RE.search(str(record.get("nodeid")))
        arm = arm_of(dict(record), name.group(3)) if name else None
        if arm is None or record.get("stage") not in ("first", "confirm", "rounds"):
            continue
        session, nodeid = found[str(record["session"])], str(record["nodeid"])
        if record["stage"] == "first":
            session["first"][nodeid] = row_of(record, threshold)
            session["arm"][nodeid] = arm
        else:
            session["later"].setdefault(nodeid, []).append(reported(row_of(record, threshold)))
    return found


def _held(row: Row, bound: float, threshold: float) -> bool:
    return row.high is not None and math.log1p(row.high) + bound >= math.log1p(threshold)


def _with_half(threshold: float) -> dict[str, Bound]:
    """The rules, and ``half``: the room the one-pair rule leaves without a bound."""
    return {**RULES, "half": lambda *_: math.log1p(threshold / 2)}


def replay(found: Mapping[str, Mapping[str, Any]], threshold: float) -> str:
    counts: dict[tuple[str, float], list[int]] = defaultdict(lambda: [0, 0])  # held, unchanged
    cover: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # covered, rows
    for session in found.values():
        first, later = session["first"], session["later"]
        thresholds = dict.fromkeys(first, threshold)
        fine = offsets.first_pair_offset(first, later, thresholds)
        every = offsets.first_pair_offset(first, later, dict.fromkeys(first, 1e9))
        for rule, bound_of in _with_half(threshold).items():
            bound = bound_of(fine, every)
            for nodeid, row in first.items():
                if nodeid in later or row.change is None:
                    continue
                arm = session["arm"][nodeid]
                if row.verdict == "unchanged" and row.noise_source.endswith(ONE_PAIR):
                    counts[(rule, arm)][1] += 1
                    counts[(rule, arm)][0] += bound is not None and _held(row, bound, threshold)
                if bound is not None and arm == 0 and row.high is not None and row.low is not None:
                    # Same code: the truth is known exactly. Both ends, each a 97.5 % claim.
                    for end in (math.log1p(row.high), -math.log1p(row.low)):
                        cover[rule][1] += 1
                        cover[rule][0] += end + bound >= 0
    lines = ["| rule | held +0 % | held +5 % | held +10 % | covered |", "|---|---|---|---|---|"]
    for rule in _with_half(threshold):
        held = [counts[(rule, arm)] for arm in (0.0, 0.05, 0.10)]
        share = cover[rule][0] / cover[rule][1] if cover[rule][1] else math.nan
        cells = " | ".join(f"{h}/{n}" for h, n in held)
        lines.append(f"| {rule} | {cells} | {share:.1%} of {cover[rule][1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--threshold", type=float, default=5.0)
    options = parser.parse_args()
    threshold = options.threshold / 100
    print(replay(sessions(load(options.logs), threshold), threshold))


if __name__ == "__main__":
    main()
