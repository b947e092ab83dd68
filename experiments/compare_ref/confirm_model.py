"""A model of the same-job confirmation of one benchmark, for a rule's false alarms and power.

Every pair of processes reads the code's change plus an offset of its own, drawn afresh for each
pair (normal, standard deviation ``sigma``; ``--role`` adds an offset that changes sign with the
roles), plus its rounds' noise (``--rounds-se``). The model follows what ``sameref.confirm`` does
with such readings:

- the first pair sends a row on when it is sure (99 %) of a slowdown of half the threshold or more
  (a regression from the threshold up, ``rows.doubtful`` below it);
- a new pair (the roles swapped) withdraws a regression only where it neither agrees, nor lies
  further off than both pairs' rounds allow, nor leaves it open (``judge.to_more_pairs``);
- a third pair (and every second one after it with the roles swapped) joins, and the spread of
  all the pairs decides (``pairs.across``): a regression where it is sure enough
  (``--sure``, ``pairs.SURE``) and reaches the threshold on ``--fewest`` pairs or more
  (``pairs.FEWEST``; two more pairs where fewer are sure of it); two more pairs where it leaves the
  threshold open; two at a time up to ``--most`` (``pairs.MOST``) while it leaves it open leaning
  slower (``pairs.leans_open``).

It leaves out what does not touch the spread's verdict: more rounds for a pair that could not tell
(``resolve``, ``once_more``), improvements, and rows other rows' offsets hold. The spread is
computed by ``stats.weighted_pairs`` itself, as ``pairs.across`` does from report rows (the model
checks that on random readings before it starts), so it runs in minutes where the report rows
would take an hour.

    python experiments/compare_ref/confirm_model.py                       # shipped rule
    python experiments/compare_ref/confirm_model.py --sure 0.975 --most 9  # before session 56
    python experiments/compare_ref/confirm_model.py --fewest 3             # before session 76
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_tpu.gate.compare import Row
from pytest_tpu.gate.stats import FAIL_CONFIDENCE, MAX_BLOCKS, t_ppf, weighted_pairs
from pytest_tpu.sameref import pairs

_t = lru_cache(maxsize=None)(t_ppf)
SIGMAS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.045, 0.06)  # offsets between pairs, standard deviation
CHANGES = (0.0, 0.05, 0.06, 0.10)


@dataclass(frozen=True)
class Spread:
    """The pairs' change (log), its standard error and degrees of freedom."""

    estimate: float
    se: float
    df: int

    def sure(self, confidence: float) -> bool:
        return self.estimate - _t(confidence, self.df) * self.se > 0

    def high(self) -> float:
        return self.estimate + _t(0.975, self.df) * self.se


def spread(logs: Sequence[float], swapped: Sequence[bool], rounds_se: float) -> Spread:
    """``stats.weighted_pairs`` on pairs whose rounds all have the error ``rounds_se``."""
    found = weighted_pairs(logs, [rounds_se] * len(logs), swapped)
    return Spread(math.log1p(found.estimate), found.se, int(found.df))


@dataclass(frozen=True)
class Rule:
    sure: float
    most: int
    threshold: float
    rounds_se: float
    modes: tuple[float, ...] = ()  # a process's speed takes one of these (log); () for normal
    fewest: int = pairs.FEWEST  # pairs in all before a regression fails (3 before session 76)
    under_only: bool = False  # --fewest holds back only a change under the threshold (session 75)


@dataclass(frozen=True)
class Outcome:
    failed: bool
    new_pairs: int


def session(delta: float, sigma: float, role: float, rule: Rule, rng: random.Random) -> Outcome:
    """One session of one benchmark whose code changed by ``delta`` (log)."""
    swapped: list[bool] = []
    logs: list[float] = []

    def draw() -> None:
        turned = len(logs) % 2 == 1  # the first new pair and every second one after it
        swapped.append(turned)
        offset = rng.gauss(0.0, sigma) + (-role if turned else role)
        if rule.modes:  # trial 75: each process at one of a few speeds, head's less base's
            offset += rng.choice(rule.modes) - rng.choice(rule.modes)
        logs.append(delta + offset + rng.gauss(0.0, rule.rounds_se))

    t_round = _t(0.975, MAX_BLOCKS - 1)
    draw()
    sure_first = logs[0] - _t(FAIL_CONFIDENCE, MAX_BLOCKS - 1) * rule.rounds_se > 0
    if not (sure_first and logs[0] >= rule.threshold / 2):
        return Outcome(False, 0)
    draw()
    if logs[0] >= rule.threshold:  # a regression: does the new pair send it on?
        low, high = logs[1] - t_round * rule.rounds_se, logs[1] + t_round * rule.rounds_se
        agrees = low > 0 and high >= rule.threshold
        apart = abs(logs[0] - logs[1]) > _t(0.975, 14) * math.hypot(rule.rounds_se, rule.rounds_se)
        if not (agrees or apart or (low <= 0 and high >= rule.threshold)):
            return Outcome(False, 1)
    draw()
    while True:
        found = spread(logs, swapped, rule.rounds_se)
        if found.sure(rule.sure) and found.high() >= rule.threshold:
            at_least = rule.under_only and found.estimate >= rule.threshold
            if at_least or len(logs) >= rule.fewest:
                return Outcome(True, len(logs) - 1)
            draw()  # too few pairs to fail it (``pairs.fails``): two more first
            draw()
            continue
        open_ = found.high() >= rule.threshold and not found.sure(rule.sure)
        leaning = len(logs) == 3 or found.estimate >= rule.threshold / 2
        if not (open_ and leaning) or len(logs) + 1 >= rule.most + 1:
            return Outcome(False, len(logs) - 1)
        draw()
        draw()


def _report(log: float, se: float, turned: bool) -> dict[str, object]:
    """A nested session's report row for a pair that read ``log`` with rounds' error ``se``."""
    return {
        "change_pct": 100 * math.expm1(log),
        "ci_low": 100 * math.expm1(log - 1.96 * se),
        "ci_high": 100 * math.expm1(log + 1.96 * se),
        "roles_swapped": turned,
    }


def _check(rng: random.Random) -> None:
    """The model's spread against ``pairs.across`` on random readings (as report rows)."""
    se = 0.002
    for count in (3, 5, 9):
        logs = [rng.gauss(0.03, 0.03) for _ in range(count)]
        roles = [index % 2 == 1 for index in range(count)]
        first = Row(
            nodeid="model",
            status="compared",
            change=math.expm1(logs[0]),
            low=math.expm1(logs[0] - 1.96 * se),
            high=math.expm1(logs[0] + 1.96 * se),
        )
        later = [_report(x, se, s) for x, s in zip(logs[1:], roles[1:], strict=True)]
        shipped = pairs.across(first, later)
        model = spread(logs, roles, se)
        if shipped is None or abs(shipped.log - model.estimate) > 1e-9:
            raise SystemExit(f"the model's change differs from pairs.across: {shipped}, {model}")
        if abs(shipped.se - model.se) > 1e-9:
            raise SystemExit(f"the model's error differs from pairs.across: {shipped}, {model}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20000, help="per cell")
    parser.add_argument("--sure", type=float, default=pairs.SURE)
    parser.add_argument("--most", type=int, default=pairs.MOST, help="pairs in all")
    parser.add_argument("--threshold", type=float, default=5.0, help="percent")
    parser.add_argument("--role", type=float, default=0.0, help="the roles' offset, percent")
    parser.add_argument("--rounds-se", type=float, default=0.3, help="a pair's, percent")
    parser.add_argument("--seed", type=int, default=56)
    parser.add_argument(
        "--modes", default="", help="a process's speeds, percent, e.g. 0,10 (trial 75)"
    )
    parser.add_argument(
        "--fewest", type=int, default=pairs.FEWEST, help="pairs in all before a regression fails"
    )
    parser.add_argument(
        "--under-only",
        action="store_true",
        help="--fewest holds back only a change under the threshold (session 75's variant)",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    _check(rng)
    modes = tuple(math.log1p(float(m) / 100) for m in args.modes.split(",") if m)
    rule = Rule(
        args.sure,
        args.most,
        args.threshold / 100,
        args.rounds_se / 100,
        modes,
        args.fewest,
        args.under_only,
    )
    print(f"sure {args.sure:.1%}, up to {args.most} pairs, {args.sessions} sessions a cell")
    print("| change | " + " | ".join(f"offsets {s:.1%}" for s in SIGMAS) + " |")
    print("|---" * (len(SIGMAS) + 1) + "|")
    for change in CHANGES:
        cells = []
        for sigma in SIGMAS:
            outcomes = [
                session(math.log1p(change), sigma, args.role / 100, rule, rng)
                for _ in range(args.sessions)
            ]
            failed = sum(o.failed for o in outcomes) / len(outcomes)
            new_pairs = sum(o.new_pairs for o in outcomes) / len(outcomes)
            cells.append(f"{failed:.2%} ({new_pairs:.2f})")
        print(f"| +{change:.0%} | " + " | ".join(cells) + " |")
    print("failed sessions (new pairs per session)")


if __name__ == "__main__":
    main()
