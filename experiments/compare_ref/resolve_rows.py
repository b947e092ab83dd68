"""Would measuring again with more rounds pay if it skipped rows it could hardly resolve?

Reads the ``--tpu-report`` files of ``run.py --keep DIR`` runs and lists every row that was
measured again with more rounds in a new pair of processes: its arm (which session rotation gave
its copy), the factor of rounds, the first pair's change and interval, an estimate of the first
pair's detectable change (the interval's width times 2.8 / 3.92: 80 % power at 95 % against the
half-width at 95 %), what the new pair could then catch (that over the square root of the factor)
and how the row ended. Then, for a few limits, how many rows a rule "skip where the new pair
would still catch no better than the limit" would have skipped, how many of them were unchanged
code, and how many catches it would have lost.

    python experiments/compare_ref/resolve_rows.py KEEP_DIR [KEEP_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import arms_of

# The lead of a row measured again with more rounds: the factor, then the first pair's change and
# interval. Reports before ``e2e7a32`` wrote "(first ...)", later ones "(the session's first pair
# read ...)".
AGAIN = re.compile(
    r"measured again with (\d+)x the rounds in a new pair of processes "
    r"\((?:first|the session's first pair read) "
    r"([+-][\d.]+)% \[([+-][\d.]+)%, ([+-][\d.]+)%\]\)"
)
WIDTH_TO_DETECTABLE = (0.8416 + 1.96) / (2 * 1.96)  # normal approximation
LIMITS = (7.5, 10.0, 12.5, 15.0)


@dataclass(frozen=True)
class Again:
    keep: str
    name: str
    arm: float
    factor: int
    first: float
    detectable: float  # the first pair's, estimated, in percent
    verdict: str
    failed: bool

    @property
    def new_detectable(self) -> float:
        return self.detectable / math.sqrt(self.factor)


def reports(keep: Path) -> Iterator[tuple[Path, dict[str, float], list[dict[str, Any]]]]:
    """Each session's report in a ``run.py --keep`` folder: its path, the arm of each of its
    benchmark copies (by the copy's letter), and its comparison rows."""
    for path in sorted(keep.glob("*-[0-9][0-9].json")):
        arms = arms_of(int(path.stem.rpartition("-")[2]) % 3)
        try:
            rows = json.loads(path.read_text())["comparison"]["rows"]
        except (OSError, ValueError, KeyError):
            continue  # a session cut short wrote no report
        yield path, arms, rows


def arm_of(arms: dict[str, float], name: str) -> float:
    """The extra work of the benchmark copy ``name`` (``test_fn[cnn-b]``: its copy's letter)."""
    return arms[name.rstrip("]")[-1]]


def rows_of(keep: Path) -> list[Again]:
    found = []
    for _, arms, rows in reports(keep):
        for row in rows:
            match = AGAIN.search(str(row.get("note") or ""))
            if not match:
                continue
            name = str(row["name"]).partition("::")[2]
            low, high = float(match[3]), float(match[4])
            found.append(
                Again(
                    keep.name,
                    name,
                    arm_of(arms, name),
                    int(match[1]),
                    float(match[2]),
                    WIDTH_TO_DETECTABLE * (high - low),
                    str(row["verdict"]),
                    row.get("regression") is True,
                )
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keeps", type=Path, nargs="+", help="run.py --keep folders")
    rows = [row for keep in parser.parse_args().keeps for row in rows_of(keep)]
    for row in rows:
        print(
            f"{row.keep:10s} {row.name:26s} +{row.arm:.0%} x{row.factor} first {row.first:+5.1f}"
            f" detects {row.detectable:5.1f} then {row.new_detectable:5.1f} -> {row.verdict}"
            + (" FAILED" if row.failed else "")
        )
    caught = [row for row in rows if row.failed and row.arm > 0]
    for limit in LIMITS:
        skipped = [row for row in rows if row.new_detectable > limit]
        same = sum(row.arm == 0 for row in skipped)
        lost = sum(row in caught for row in skipped)
        print(
            f"skip where the new pair catches no better than {limit:g}%: {len(skipped)} of "
            f"{len(rows)} skipped ({same} unchanged code), {lost} of {len(caught)} catches lost"
        )


if __name__ == "__main__":
    main()
