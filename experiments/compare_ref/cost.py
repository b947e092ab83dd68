"""What a passing ``--compare-ref`` session costs against a plain run of the same benchmarks.

The same-job experiment's repository (``run.py``: the matmul chain, the Keras CNN and the numpy
function, both styles, three copies each), its base compared with itself: every session is one
the gate passes. Plain runs and same-job sessions alternate, so drift of the machine hits both
alike; each session's ratio is against the plain run beside it. Prints every session's ratio,
the seconds its new pairs of processes took (the ``[N s]`` ending the summary's re-measurement
lines) and why they ran, then the spread of the ratios.

    python experiments/compare_ref/cost.py --sessions 8 --threshold 5 --out cost.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run.py
sys.path.insert(0, str(HERE.parent))  # conditions.py

from conditions import machine  # noqa: E402
from run import git, make_repo, pytest_run  # noqa: E402

TOOK_RE = re.compile(r"\[(\d+) s\]$")
REMEASURE = ("re-measured ", "measured ")  # the summary lines of confirm and resolve


def new_pairs(out: str) -> tuple[float, list[str]]:
    """The seconds the session's new pairs took, and their summary lines."""
    took = [
        (line, float(m.group(1)))
        for line in out.splitlines()
        if line.startswith(REMEASURE) and "new pair" in line and (m := TOOK_RE.search(line))
    ]
    return sum(seconds for _, seconds in took), [line for line, _ in took]


@dataclass
class Session:
    """One same-job session of the base against itself, and the plain run beside it."""

    index: int
    plain_s: float
    same_s: float
    new_pairs_s: float
    lines: list[str]
    regressions: int

    @property
    def ratio(self) -> float:
        return self.same_s / self.plain_s

    @property
    def first_pair(self) -> float:
        """The session without its new pairs, against the plain run."""
        return (self.same_s - self.new_pairs_s) / self.plain_s


def one(repo: Path, index: int, threshold: float, logs: Path) -> Session:
    """A plain run and a same-job session of the base against itself, in turn order."""
    args = ["--compare-ref=base", f"--fail-on-regression={threshold:g}"]
    if index % 2 == 0:
        _, plain = pytest_run(repo, [])
        out, same = pytest_run(repo, args)
    else:
        out, same = pytest_run(repo, args)
        _, plain = pytest_run(repo, [])
    (logs / f"aa-{index:02d}.log").write_text(out)
    seconds, lines = new_pairs(out)
    failed = sum(line.startswith("REGRESSION") for line in out.splitlines())
    return Session(index, plain, same, seconds, lines, failed)


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}x, range {min(values):.2f}-{max(values):.2f}x"


def summary(sessions: list[Session]) -> str:
    without = [s.ratio for s in sessions if not s.lines]
    return "\n".join(
        [
            f"sessions: {len(sessions)}; {_spread([s.ratio for s in sessions])}",
            "first pair alone (session minus new pairs): "
            + _spread([s.first_pair for s in sessions]),
            f"sessions without new pairs: {len(without)}"
            + (f", {_spread(without)}" if without else ""),
            f"regressions (unchanged code): {sum(s.regressions for s in sessions)}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--condition", default="quiet", help="quiet or neighbour (conditions.py)")
    parser.add_argument("--out", type=Path, help="write every session as JSON")
    parser.add_argument("--keep", type=Path, help="keep the repository and logs here")
    options = parser.parse_args()
    started = time.monotonic()
    records: list[Session] = []
    with tempfile.TemporaryDirectory(prefix="compare-ref-cost-") as scratch:
        root = options.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        repo = root / "repo"
        make_repo(repo)
        git(repo, "checkout", "-q", "base")
        with machine(options.condition, root / "stop"):
            for index in range(options.sessions):
                record = one(repo, index, options.threshold, root)
                records.append(record)
                if options.out:
                    rows = [{**asdict(r), "ratio": r.ratio} for r in records]
                    options.out.write_text(json.dumps(rows, indent=1))
                why = " | ".join(record.lines) or "no new pairs"
                print(
                    f"{index + 1}: {record.same_s:.0f} s against {record.plain_s:.0f} s "
                    f"({record.ratio:.2f}x); {why}",
                    flush=True,
                )
    print(summary(records))
    print(f"wall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
