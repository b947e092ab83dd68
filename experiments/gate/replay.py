"""Judge a gate experiment's saved sessions again, offline, under other drift rules (and without
the check of other processes' use of the CPUs, ``gate.contention``, or with other rules for the
host's memory copies, ``gate.bandwidth``).

``run.py --keep DIR`` saves each comparison session's own summaries as ``current-NN.json`` beside
the baseline history ``exp.json``. This compares them again with the gate's code, once per rule
for the machine's drift, so two rules meet the very same rounds, machine state and history:
a difference between them is the rule's, not the machine's. Only the first measurement is
replayed (a confirmation's fresh rounds are not saved), so "failed" here means "would have been
re-measured".

    python experiments/gate/replay.py DIR/quiet DIR/neighbour --threshold 5
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from pytest_tpu.gate import bandwidth, compare, contention, measure, model  # noqa: E402
from pytest_tpu.gate import baseline as store  # noqa: E402
from pytest_tpu.gate.stats import Change, Estimate, widened  # noqa: E402

ARMS = (0.0, 0.05, 0.10)
COPIES = ("a", "b", "c")
NAME_RE = re.compile(r"::test_(\w+)\[(\w+)-([abc])\]$")


class Rule(Protocol):
    """A rule for the machine's drift, as ``measure.with_drift`` is one."""

    def __call__(
        self,
        found: Change,
        mode: str,
        machine: Change | None,
        typical: float,
        share: float | None = None,
    ) -> Change: ...


Copies = Callable[[Sequence[Estimate | None], Estimate | None, Change, bool], str]

# As the gate has them, before a rule replaces them.
_WITH_DRIFT = measure.with_drift
_EXPLAINS, _COPIES_CHANGE = bandwidth.explains, bandwidth.copies_change


def _drift(machine: Change | None) -> float | None:
    if machine is None or not math.isfinite(machine.estimate):
        return None
    return math.log1p(machine.estimate)


def beyond_twice(
    found: Change, mode: str, machine: Change | None, typical: float, share: float | None = None
) -> Change:
    """The rule before bd6cd42: the drift beyond twice the history's kernel spread."""
    drift = _drift(machine)
    if drift is None:
        return found
    excess = max(0.0, abs(drift) - 2 * typical) * model.UNTRACKED_DRIFT[mode]
    return widened(found, excess, "drift beyond twice the history's")


def no_allowance(
    found: Change, mode: str, machine: Change | None, typical: float, share: float | None = None
) -> Change:
    """No drift allowance at all: what the rounds and the history say by themselves."""
    return found


def prior_share(
    found: Change, mode: str, machine: Change | None, typical: float, share: float | None = None
) -> Change:
    """The rule before trial 27: every mode carries its prior share of the drift
    (``model.UNTRACKED_DRIFT``), whatever its saved runs show."""
    return _WITH_DRIFT(found, mode, machine, typical)


def both_ways(
    found: Change, mode: str, machine: Change | None, typical: float, share: float | None = None
) -> Change:
    """The rule before new-user trial 29: raw rounds charged the drift on both sides of their
    interval, as the ratios are, whichever way the machine went."""
    drift = _drift(machine)
    if drift is None:
        return found
    share = model.UNTRACKED_DRIFT[mode] if share is None else share
    excess = math.sqrt(max(0.0, drift * drift - typical * typical))
    return widened(found, excess * share, "machine drift allowed for, both ways")


def _blind(saved: object, now: object, slower: bool, cpus: int | None = None) -> str:
    """No check of other processes' use of the CPUs (``contention``): the gate before it."""
    return ""


def _unseen(*args: object) -> str:
    """No check of the host's memory copies (``bandwidth``): the gate before ``9b62f7c``."""
    return ""


def _far_end(
    saved: Sequence[Estimate | None], now: Estimate | None, found: Change, slower: bool
) -> str:
    """The copies' rule before session 46: ``found``'s nearer bound against ``FOLLOWS`` times the
    far end of the copies' interval, not their change. The gate's own rule, on the copies'
    change moved to that far end."""
    moved = _COPIES_CHANGE(saved, now)
    if moved is None:
        return ""
    far = replace(moved, estimate=moved.high if slower else moved.low)
    bandwidth.copies_change = lambda *_: far
    try:
        return _EXPLAINS(saved, now, found, slower)
    finally:
        bandwidth.copies_change = _COPIES_CHANGE


# name: (the drift rule, whether other processes' use of the CPUs is checked, whether the host's
# memory copies are, or by which rule)
RULES: dict[str, tuple[Rule, bool, bool | Copies]] = {
    "variance beyond (main)": (measure.with_drift, True, True),
    "main without copies": (measure.with_drift, True, False),
    "copies' far end (before session 46)": (measure.with_drift, True, _far_end),
    "main without contention": (measure.with_drift, False, True),
    "both ways (before trial 29)": (both_ways, True, True),
    "prior shares (before trial 27)": (prior_share, True, True),
    "beyond twice (old)": (beyond_twice, False, False),
    "none": (no_allowance, False, False),
}


@contextmanager
def rule(chosen: tuple[Rule, bool, bool | Copies]) -> Iterator[None]:
    saved, busier, copies = measure.with_drift, contention.explains, bandwidth.explains
    measure.with_drift = chosen[0]
    if not chosen[1]:
        contention.explains = _blind
    if chosen[2] is False:
        bandwidth.explains = _unseen
    elif chosen[2] is not True:
        bandwidth.explains = chosen[2]
    try:
        yield
    finally:
        measure.with_drift, contention.explains, bandwidth.explains = saved, busier, copies


def judged(folder: Path, threshold: float) -> Iterator[tuple[str, str, str, float, compare.Row]]:
    """(rule, workload, style, arm, row) for every saved session of ``folder``."""
    base = store.load(folder / "baselines" / "exp.json").sides
    for path in sorted((folder / "baselines").glob("current-*.json")):
        index = int(path.stem.rpartition("-")[2])
        arms = {copy: ARMS[(index + j) % 3] for j, copy in enumerate(COPIES)}
        current = store.load(path).sides
        for name, chosen in RULES.items():
            with rule(chosen):
                rows = compare.compare_runs(base, current, threshold=threshold)
            for row in compare.compared(rows):
                found = NAME_RE.search(row.nodeid)
                if row.metric == "time" and found:
                    style, kind, copy = found.groups()
                    yield name, kind, style, arms[copy], row


def table(records: list[tuple[str, str, str, str, float, compare.Row]]) -> str:
    groups: dict[tuple[str, str, str, str, float], list[compare.Row]] = defaultdict(list)
    for cond, name, kind, style, arm, row in records:
        groups[(cond, kind, style, name, arm)].append(row)
    lines = [
        "| condition | workload | style | rule | work | failed | slower | inconclusive "
        "| median detectable |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups):
        rows = groups[key]
        verdicts = Counter(row.verdict for row in rows)
        doubt = sorted(
            row.detectable
            for row in rows
            if row.verdict == "inconclusive" and row.detectable is not None
        )
        median = f"{doubt[len(doubt) // 2]:.1%}" if doubt else "-"
        cond, kind, style, name, arm = key
        lines.append(
            f"| {cond} | {kind} | {style} | {name} | +{arm:.0%} "
            f"| {sum(row.regression for row in rows)}/{len(rows)} | {verdicts['slower']} "
            f"| {verdicts['inconclusive']} | {median} |"
        )
    return "\n".join(lines)


def totals(records: list[tuple[str, str, str, str, float, compare.Row]]) -> str:
    """Per condition, rule and arm over every workload and style: how often each verdict."""
    groups: dict[tuple[str, str, float], list[compare.Row]] = defaultdict(list)
    for cond, name, _kind, _style, arm, row in records:
        groups[(cond, name, arm)].append(row)
    lines = [
        "| condition | rule | work | failed | slower | unchanged | faster | inconclusive |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (cond, name, arm), rows in sorted(groups.items()):
        verdicts = Counter(row.verdict for row in rows)
        counts = " | ".join(str(verdicts[v]) for v in ("slower", "unchanged", "faster"))
        failed = sum(row.regression for row in rows)
        lines.append(
            f"| {cond} | {name} | +{arm:.0%} | {failed}/{len(rows)} | {counts} "
            f"| {verdicts['inconclusive']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="a condition's --keep folder")
    parser.add_argument("--threshold", type=float, default=5.0, help="percent")
    options = parser.parse_args()
    records = [
        (folder.name, *record)
        for folder in options.folders
        for record in judged(folder, options.threshold / 100)
    ]
    print(table(records))
    print()
    print(totals(records))


if __name__ == "__main__":
    main()
