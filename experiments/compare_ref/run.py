"""Does --compare-ref hold? A/A, +5 % and +10 % commits, quiet and with neighbours.

Builds a throwaway git repository whose benchmark file (the gate experiment's matmul chain, Keras
CNN and numpy workloads, both pytest-benchmark styles, three copies each) is committed once as the
base and three times as heads, each head doing 0 %, 5 % and 10 % more work in its copies, rotated:
the extra work is in real commits, not in an environment variable. Each comparison checks a head
out and runs ``pytest --compare-ref=base --fail-on-regression=PCT``; every session thus measures
all three arms. Prints, per condition, workload, style and arm, how often the gate failed and how
the rest were judged, with the session's cost against a plain run of the same benchmarks.

    python experiments/compare_ref/run.py --repeats 20 --threshold 5 --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # experiments/conditions.py

from conditions import machine  # noqa: E402

WORKLOADS = HERE.parent / "gate" / "workloads.py"
ARMS = (0.0, 0.05, 0.10)
COPIES = ("a", "b", "c")
KEEP = ("matmul", "cnn", "numpy")  # the workloads the issue names, measured by default
# --workloads may add the stored-gate experiment's transformer, and trial 75's large temporaries
ALL = (*KEEP, "transformer", "alloc")
WORKLOADS_KEPT = list(KEEP)  # --workloads: a subset, for a focused check
OFFSET_HELD = "off in this pair (root mean square"  # sameref.offsets.allowed_for's reason
FAIL_RE = re.compile(r"^REGRESSION \S+::(test_\w+\[\w+-[abc]\]): ")


def arms_of(rotation: int) -> dict[str, float]:
    """The extra work of each copy in the head commit of ``rotation`` (a session's index % 3)."""
    return {copy: ARMS[(rotation + j) % 3] for j, copy in enumerate(COPIES)}


def benchmark_file(arms: dict[str, float]) -> str:
    """The gate experiment's workloads with the arms written into the file itself."""
    text = WORKLOADS.read_text()
    start = text.index("ARMS = dict(")
    end = text.index(")\n\n", start) + 2
    text = text[:start] + f"ARMS = {arms!r}\n" + text[end:]
    dropped = [kind for kind in ALL if kind not in WORKLOADS_KEPT]
    for kind in dropped:
        text = re.sub(rf'\n    "{kind}": \([^)]*\),', "", text)
    return text


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "base")
    git(repo, "config", "user.email", "experiment@example.com")
    git(repo, "config", "user.name", "experiment")
    (repo / "test_work.py").write_text(benchmark_file(dict.fromkeys(COPIES, 0.0)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    for rotation in range(3):
        arms = arms_of(rotation)
        git(repo, "checkout", "-q", "-b", f"head{rotation}", "base")
        (repo / "test_work.py").write_text(benchmark_file(arms))
        git(repo, "commit", "-qam", f"head {arms}")


PAIRS: dict[str, str] = {}  # with --pairs: the environment that loads pairlog.py
EXTRA: list[str] = []  # --pytest-args: added to every --compare-ref session's command line


def log_pairs(out: Path) -> None:
    """Have every session, nested ones too, log its paired rounds to ``out`` (``pairlog.py``)."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    PAIRS.update(PYTEST_PLUGINS="pairlog", PYTHONPATH=path, PAIRLOG_OUT=str(out.resolve()))


def pytest_run(repo: Path, args: list[str], session: str = "") -> tuple[str, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **PAIRS, "PAIRLOG_SESSION": session}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_work.py", "-q", "-p", "no:cacheprovider", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
    )
    return done.stdout + done.stderr, time.monotonic() - started


def compare_once(repo: Path, index: int, threshold: float, log: Path) -> list[dict[str, object]]:
    rotation = index % 3
    arms = arms_of(rotation)
    git(repo, "checkout", "-q", f"head{rotation}")
    report = log.with_suffix(".json")
    out, seconds = pytest_run(
        repo,
        [
            "--compare-ref=base",
            f"--fail-on-regression={threshold:g}",
            f"--tpu-report={report}",
            *EXTRA,
        ],
        log.stem,
    )
    log.write_text(out)
    failed = {m.group(1) for line in out.splitlines() if (m := FAIL_RE.match(line))}
    rows = json.loads(report.read_text())["comparison"]["rows"] if report.exists() else []
    records = []
    for row in rows:
        name = str(row["name"]).partition("::")[2]
        test, _, params = name.partition("[")
        kind, copy = params.rstrip("]").split("-")
        records.append(
            {
                "workload": kind,
                "style": test.removeprefix("test_"),
                "arm": arms[copy],
                "verdict": row["verdict"],
                "failed": name in failed,
                "change_pct": row["change_pct"],
                "detectable_pct": row["detectable_pct"],
                "withdrawn": row["confirmed"] is False,
                "again": "measured again with" in str(row.get("note") or ""),
                # One pair's "unchanged" the first pair's measured offset left inconclusive.
                "held": OFFSET_HELD in str(row.get("note") or ""),
                "noise_source": row.get("noise_source"),
                "statistic": row.get("statistic", ""),
                "seconds": seconds,
                "session": index,
            }
        )
    return records


def condition(
    name: str, options: argparse.Namespace, root: Path, records: list[dict[str, object]]
) -> None:
    """Add the rows of ``options.repeats`` sessions under condition ``name`` to ``records``,
    written to ``options.out`` after each session (a run cut short keeps what it measured)."""
    repo = root / f"repo-{name}"
    make_repo(repo)
    git(repo, "checkout", "-q", "base")
    _, plain = pytest_run(repo, [])
    print(f"[{name}] plain run of the same benchmarks: {plain:.0f} s", flush=True)
    # A session with nothing to confirm: the cost of a passing --compare-ref run.
    out, same = pytest_run(
        repo,
        ["--compare-ref=base", f"--fail-on-regression={options.threshold:g}", *EXTRA],
        f"{name}-aa",
    )
    (root / f"{name}-aa.log").write_text(out)  # why it cost what it did: its [N s] lines
    failures = sum(line.startswith("REGRESSION") for line in out.splitlines())
    cost = f"{same:.0f} s ({same / plain:.2f}x)"
    print(f"[{name}] base against itself: {cost}, {failures} regressions", flush=True)
    for index in range(options.repeats):
        found = compare_once(repo, index, options.threshold, root / f"{name}-{index:02d}.log")
        for record in found:
            record.update(condition=name, plain_s=plain)
        records += found
        if options.out:
            options.out.write_text(json.dumps(records, indent=1))
        false = sum(bool(r["failed"]) for r in found if r["arm"] == 0)
        cost = found[0]["seconds"] if found else 0
        print(f"[{name}] {index + 1}: {len(found)} rows, {false} false, {cost:.0f} s", flush=True)


def _median(rows: list[dict[str, object]], key: str) -> str:
    found = sorted(float(r[key]) for r in rows if r[key] is not None)  # type: ignore[arg-type]
    return f"{found[len(found) // 2]:+.1f}%" if found else "-"


def held(records: list[dict[str, object]]) -> str:
    """How many rows one pair called ``unchanged`` the first pair's measured offset left
    ``inconclusive`` (``sameref.offsets``), per condition and arm: for more work, each would have
    been a wrong verdict without it."""
    counts: dict[tuple[object, object], list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        counts[(r["condition"], r["arm"])][0] += bool(r.get("held"))
        counts[(r["condition"], r["arm"])][1] += 1
    parts = [f"{c} +{float(a):.0%} {n}/{t}" for (c, a), (n, t) in sorted(counts.items(), key=str)]  # type: ignore[arg-type]
    return "one pair's unchanged held inconclusive by the first pair's offset: " + ", ".join(parts)


def table(records: list[dict[str, object]]) -> str:
    groups: dict[tuple[object, ...], list[dict[str, object]]] = defaultdict(list)
    for r in records:
        groups[(r["condition"], r["workload"], r["style"], r["arm"])].append(r)
    lines = [
        "| condition | workload | style | work | failed | of which on the mean | called slower "
        "| measured again with "
        "more rounds | withdrawn by a new pair | wrong verdicts | inconclusive | median change "
        "| median detectable |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=str):
        rows = groups[key]
        fails = sum(bool(r["failed"]) for r in rows)
        tail = sum(bool(r["failed"]) and r.get("statistic") == "mean of all rounds" for r in rows)
        doubt = sum(r["verdict"] == "inconclusive" for r in rows)
        slower = sum(r["verdict"] == "slower" for r in rows)
        withdrawn = sum(bool(r.get("withdrawn")) for r in rows)
        again = sum(bool(r.get("again")) for r in rows)
        cond, workload, style, arm = key
        # Same code called slower or faster; more work called unchanged or faster.
        wrong_verdicts = ("slower", "faster") if float(arm) == 0 else ("unchanged", "faster")  # type: ignore[arg-type]
        wrong = sum(r["verdict"] in wrong_verdicts for r in rows)
        lines.append(
            f"| {cond} | {workload} | {style} | +{float(arm):.0%} | {fails}/{len(rows)} | {tail} "  # type: ignore[arg-type]
            f"| {slower}/{len(rows)} | {again} | {withdrawn} | {wrong} | {doubt}/{len(rows)} "
            f"| {_median(rows, 'change_pct')} | {_median(rows, 'detectable_pct')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument(
        "--conditions",
        default="quiet,neighbour",
        help="comma list of quiet, neighbour, steady, both (experiments/conditions.py)",
    )
    parser.add_argument("--out", type=Path, help="write every row as JSON")
    parser.add_argument("--keep", type=Path, help="keep the repositories and logs here")
    parser.add_argument(
        "--table",
        type=Path,
        nargs="+",
        help="only print the table of --out files (several: their rows pooled, as runs of the "
        "same decisions on other machines or days)",
    )
    parser.add_argument("--pairs", type=Path, help="log every row's paired rounds (JSON lines)")
    parser.add_argument(
        "--workloads", default=",".join(KEEP), help=f"comma list, a subset of {', '.join(ALL)}"
    )
    parser.add_argument(
        "--pytest-args",
        default="",
        help="options added to every --compare-ref session, e.g. '--tpu-compare-ref-rounds=8'",
    )
    options = parser.parse_args()
    EXTRA[:] = options.pytest_args.split()
    kept = options.workloads.split(",")
    if not kept or not set(kept) <= set(ALL):
        parser.error(f"--workloads: a comma list of {', '.join(ALL)}, not {options.workloads!r}")
    WORKLOADS_KEPT[:] = kept
    if options.table:
        pooled = [row for path in options.table for row in json.loads(path.read_text())]
        print(table(pooled))
        return
    if options.pairs:
        log_pairs(options.pairs)
    started = time.monotonic()
    records: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="compare-ref-experiment-") as scratch:
        root = options.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        for name in options.conditions.split(","):
            with machine(name, root / f"stop-{name}"):
                condition(name, options, root, records)
    print(table(records))
    print(held(records))
    sessions = {(r["condition"], r["session"]): r for r in records}
    ratios = sorted(float(r["seconds"]) / float(r["plain_s"]) for r in sessions.values())
    if ratios:
        print(f"cost against a plain run: median {ratios[len(ratios) // 2]:.2f}x")
    print(f"wall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
