"""How the pairs of processes of same-job sessions spread: within a session and across them.

Reads the ``--tpu-report`` JSON files of ``--compare-ref`` sessions named ``<arm>-<n>.json``
(x39 and x40 name them ``aa-*`` for the same code and ``p5-*`` for the slower commit). Every row
that went to three or more pairs lists each pair's change in its note (``first ..., again ..., a
third pair ..., then ...``). Per arm and benchmark it prints the pooled standard deviation of the
pairs within a session, that of the sessions' means of their new pairs, and every reading in
1-point bins: where the pairs of a session are independent draws, the sessions' means spread as
the pairs do over the root of their number; where the bins show peaks, each process runs the
code at one of a few speeds.

    python experiments/compare_ref/pair_modes.py DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

_READING = re.compile(
    r"(?:first(?: with \d+x the rounds)?|again|a third pair|then) ([+-]\d+\.\d+)% \["
)
Sessions = dict[tuple[str, str], list[list[float]]]


def readings(folders: list[Path]) -> Sessions:
    """Each arm's and benchmark's pairs' changes (percent), one list per session."""
    found: Sessions = defaultdict(list)
    for folder in folders:
        for path in sorted(folder.glob("*-*.json")):
            arm = path.name.split("-")[0]
            for row in json.loads(path.read_text())["comparison"]["rows"]:
                if row.get("metric") != "time":
                    continue
                values = [float(x) for x in _READING.findall(row.get("note") or "")]
                if len(values) >= 3:
                    found[(arm, row["name"].split("::")[-1])].append(values)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    found = readings(parser.parse_args().folders)
    for (arm, name), sessions in sorted(found.items()):
        within = statistics.mean(statistics.variance(pairs) for pairs in sessions) ** 0.5
        means = [statistics.mean(pairs[1:]) for pairs in sessions]
        spread = statistics.stdev(means) if len(means) > 1 else float("nan")
        count = statistics.mean(len(pairs) for pairs in sessions)
        print(
            f"{arm} {name}: {len(sessions)} sessions, {count:.1f} pairs each; within a session "
            f"{within:.2f} %, the sessions' means {spread:.2f} % (standard deviations)"
        )
        bins = Counter(round(x) for pairs in sessions for x in pairs)
        print("   " + " ".join(f"{k:+d}:{bins[k]}" for k in range(min(bins), max(bins) + 1)))


if __name__ == "__main__":
    main()
