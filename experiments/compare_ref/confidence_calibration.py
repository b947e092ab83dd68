"""How often is a same-code row "sure" of a change, by how it was measured?

Reads the ``--tpu-report`` files of ``run.py --keep DIR`` runs and takes every row of a copy
with no extra work (unchanged code). A row's ``confidence_pct`` is how sure it is of a
slowdown; for unchanged code a calibrated figure is at least 90 about one time in ten, at least
99 one time in a hundred, and as often at most 10 or 1. Counts by what the row's interval rests
on (one pair of processes' rounds, or the spread between pairs) and by workload.

    python experiments/compare_ref/confidence_calibration.py KEEP_DIR [KEEP_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from resolve_rows import arm_of, reports

from pytest_tpu.gate.stats import ONE_PAIR, SPREAD_OF_PAIRS

LEVELS = (90.0, 95.0, 99.0)


def kind(source: str) -> str:
    if ONE_PAIR in source:
        return "one pair"
    return "spread of pairs" if SPREAD_OF_PAIRS in source else "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("keeps", type=Path, nargs="+", help="run.py --keep folders")
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for keep in parser.parse_args().keeps:
        for _, arms, rows in reports(keep):
            for row in rows:
                name = str(row["name"]).partition("::")[2]
                # A row of one pair keeps its rounds' figure apart (since session 65).
                sure = row.get("pair_confidence_pct", row.get("confidence_pct"))
                if arm_of(arms, name) != 0 or not isinstance(sure, (int, float)):
                    continue
                workload = name.partition("[")[2].partition("-")[0]
                how = kind(str(row.get("noise_source") or ""))
                for key in ((how, workload), (how, "all")):
                    found[key].append(float(sure))
    for (how, workload), values in sorted(found.items()):
        slower = ", ".join(f">={x:g}: {sum(v >= x for v in values)}" for x in LEVELS)
        faster = ", ".join(f"<={100 - x:g}: {sum(v <= 100 - x for v in values)}" for x in LEVELS)
        print(f"{how:15s} {workload:7s} {len(values):4d} rows; {slower}; {faster}")


if __name__ == "__main__":
    main()
