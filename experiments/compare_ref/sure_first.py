"""Which rows measured again with more rounds would ``pooled.sure_first`` send to more pairs?

Reads the ``--tpu-report`` files of ``run.py --keep DIR`` runs and lists every row that a new pair
measured again with more rounds (``resolve``): its arm, the first pair's change and interval, the
new pair's (from the row's note where more pairs followed, else the row's own), how it ended, and
whether the rule sends it on: the first pair's 95 % interval above zero and reaching the threshold,
and the new pair neither a regression nor ruling a slowdown out (its interval reaching zero and
ending under the threshold). Then the counts by arm: what the rule costs unchanged code (rows sent
on) and which changed rows it would reopen.

Meant for runs on code before the rule (``e2e7a32``): a row that ended a regression is counted as
not sent on, since its new pair (or that pair's own new pairs) confirmed it. On code with the rule
a row sent on may end a regression by its pairs' spread; those sessions' summary lines say
"whose first pair's slowdown the new pair did not settle" (``grep`` the ``--keep`` logs).

    python experiments/compare_ref/sure_first.py KEEP_DIR [KEEP_DIR ...] [--threshold 5]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from resolve_rows import AGAIN as LEAD
from resolve_rows import arm_of, reports

_NUMBER = r"([+-][\d.]+)%"
_INTERVAL = rf"{_NUMBER} \[{_NUMBER}, {_NUMBER}\]"
# Where more pairs followed, the pair with more rounds is named in the note.
NEW = (
    re.compile(rf"the first with \d+x the rounds {_INTERVAL}"),
    re.compile(rf"\(first {_INTERVAL}, again {_INTERVAL} \(\d+x the rounds\)"),
    re.compile(rf"that pair read {_INTERVAL}"),
)

Reading = tuple[float, float, float]  # change, low, high, in percent


@dataclass(frozen=True)
class Again:
    run: str
    session: str
    name: str
    arm: float
    factor: int
    first: Reading
    new: Reading
    verdict: str
    regression: bool

    def sent_on(self, threshold: float) -> bool:
        """Whether the rule sends the row to more pairs."""
        _, first_low, first_high = self.first
        _, low, high = self.new
        sure = first_low > 0 and first_high >= threshold
        ruled_out = low <= 0 and high < threshold
        return sure and not ruled_out and not self.regression


def _new_reading(note: str, row: Mapping[str, Any]) -> Reading:
    for pattern in NEW:
        match = pattern.search(note)
        if match:
            numbers = [float(x) for x in match.groups()]
            return numbers[-3], numbers[-2], numbers[-1]
    return float(row["change_pct"]), float(row["ci_low"]), float(row["ci_high"])


def rows_of(keep: Path) -> Iterator[Again]:
    for path, arms, rows in reports(keep):
        for row in rows:
            note = str(row.get("note") or "")
            match = LEAD.search(note)
            if not match:
                continue
            name = str(row["name"]).partition("::")[2]
            first = float(match[2]), float(match[3]), float(match[4])
            yield Again(
                keep.name,
                path.stem,
                name,
                arm_of(arms, name),
                int(match[1]),
                first,
                _new_reading(note[match.end() :], row),
                str(row["verdict"]),
                row.get("regression") is True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keeps", type=Path, nargs="+", help="run.py --keep folders")
    parser.add_argument("--threshold", type=float, default=5.0, help="in percent")
    args = parser.parse_args()
    rows = [row for keep in args.keeps for row in rows_of(keep)]
    counts: Counter[tuple[float, bool]] = Counter()
    for row in rows:
        sent = row.sent_on(args.threshold)
        counts[row.arm, sent] += 1
        print(
            f"{row.run:8s} {row.session:13s} {row.name:24s} +{row.arm:.0%} x{row.factor} "
            f"first {row.first[0]:+5.1f} [{row.first[1]:+5.1f}, {row.first[2]:+5.1f}] "
            f"new {row.new[0]:+5.1f} [{row.new[1]:+5.1f}, {row.new[2]:+5.1f}] -> {row.verdict}"
            + (" (regression)" if row.regression else "")
            + ("  <- sent on" if sent else "")
        )
    for arm in sorted({arm for arm, _ in counts}):
        total = counts[arm, True] + counts[arm, False]
        print(f"+{arm:.0%}: {counts[arm, True]} of {total} rows measured again would be sent on")


if __name__ == "__main__":
    main()
