"""Does the regression gate hold? Stored baselines, unchanged and slower code, quiet and loaded.

For each machine condition (``experiments/conditions.py``: quiet; a neighbour keeping one core busy
in random bursts of 1-5 s; one keeping a core busy all the time, ``steady``; two bursty ones,
``both``; one copying memory in bursts, ``memory``; or ``quiet>neighbour``: the history saved in
one, the comparisons made in the other) this saves a baseline history of ``--history`` sessions of
``workloads.py`` (four kinds of work, both pytest-benchmark styles, three identical copies each),
then runs ``--repeats`` comparison sessions. In session ``i`` the copies do 0 %, 5 % and 10 % more
work, rotated, so every session measures all three arms under the same machine state. Each session
gates twice on the same rounds: pytest-tpu (``--compare --fail-on-regression``) and
pytest-benchmark (``--benchmark-compare-fail=median:PCT%``). Prints, per workload, style and arm,
how often each failed, and for pytest-tpu how the rest were judged.

``--save-every N`` saves one more run of the unchanged work after every N comparison sessions
(the last ``--history`` kept), the way CI on main saves between pull requests' runs, so that the
saved runs come to span the time the comparisons are made in. ``--history-work PCT`` saves the
runs with that much more work, so that the copies' arms are real improvements (``--verdicts``).

    python experiments/gate/run.py --repeats 20 --history 5 --threshold 5 --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # experiments/conditions.py

from conditions import machine  # noqa: E402

TAIL = "mean of all rounds"  # a report row's statistic when it failed on slow calls in the tail

ROOT = HERE.parent.parent
ARMS = (0.0, 0.05, 0.10)
COPIES = ("a", "b", "c")
OURS_FAIL_RE = re.compile(r"^REGRESSION (\S+): time")
# pytest-benchmark names a failing benchmark by its test name, without the file.
THEIRS_FAIL_RE = re.compile(r"^\s+(test_\w+\[\w+-[abc]\]) \(\d+_\w+\) - Field")


def session(work: Path, arms: dict[str, float], extra: list[str]) -> str:
    env = {
        **os.environ,
        "GATE_ARMS": ",".join(f"{k}={v}" for k, v in arms.items()),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "TMPDIR": str(work / "tmp"),
    }
    args = [
        sys.executable, "-m", "pytest", str(HERE / "workloads.py"), "-q", "-p", "no:cacheprovider",
        "-k", "not alloc",  # four kinds: trial 75's fifth is for compare_ref/run.py
        f"--baseline-dir={work / 'baselines'}",
        f"--benchmark-storage=file://{work / 'pytest-benchmark'}",
        "--benchmark-columns=median", *extra,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    return done.stdout + done.stderr


def parse(out: str, report: Path, arms: dict[str, float]) -> list[dict[str, object]]:
    """Rows from the --tpu-report JSON; failures from both gates' own lines."""
    ours_failed = {m.group(1) for line in out.splitlines() if (m := OURS_FAIL_RE.match(line))}
    theirs = {m.group(1) for line in out.splitlines() if (m := THEIRS_FAIL_RE.match(line))}
    rows = json.loads(report.read_text())["comparison"]["rows"] if report.exists() else []
    records = []
    for row in rows:
        nodeid = str(row["name"])
        if row["metric"] != "time" or "::" not in nodeid:
            continue
        test, _, params = nodeid.partition("::")[2].partition("[")
        kind, copy = params.rstrip("]").split("-")
        records.append(
            {
                "workload": kind,
                "style": test.removeprefix("test_"),
                "arm": arms[copy],
                "verdict": row["verdict"],
                "ours_failed": nodeid in ours_failed,
                "theirs_failed": nodeid.partition("::")[2] in theirs,
                "change_pct": row["change_pct"],
                "detectable_pct": row["detectable_pct"],
                "mode": row["mode"],
                "machine_pct": row["machine_pct"],
                "note": row["note"],
                "statistic": row.get("statistic", ""),
            }
        )
    return records


def condition(name: str, options: argparse.Namespace, work: Path) -> list[dict[str, object]]:
    """``name`` is a machine state, or ``A>B``: the history saved in state A, compared in B."""
    saved_in, _, compared_in = name.partition(">")
    work.mkdir(parents=True, exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)
    with machine(saved_in, work / "stop-history"):
        save_history(name, options, work)
    with machine(compared_in or saved_in, work / "stop-comparisons"):
        return comparisons(name, options, work)


def save_history(name: str, options: argparse.Namespace, work: Path) -> None:
    for k in range(options.history):
        save_run(name, options, work, f"baseline session {k + 1}", k == options.history - 1)


def save_run(name: str, options: argparse.Namespace, work: Path, what: str, last: bool) -> None:
    """One more run saved under ``exp``, keeping the last ``--history``."""
    extra = ["--save-baseline=exp", f"--tpu-baseline-history={options.history}"]
    if last:  # pytest-benchmark's own comparison is against the first sitting's last run
        extra.append("--benchmark-save=base")
    out = session(work, dict.fromkeys(COPIES, options.history_work / 100), extra)
    print(f"[{name}] {what}: {out.strip().splitlines()[-1]}", flush=True)


def comparisons(name: str, options: argparse.Namespace, work: Path) -> list[dict[str, object]]:
    records = []
    for index in range(options.repeats):
        if options.save_every and index and index % options.save_every == 0:
            # Saved between comparisons, as CI on main saves between pull requests' runs: the
            # history comes to span the hour the comparisons are made in.
            save_run(name, options, work, f"saved again before comparison {index + 1}", False)
        arms = {copy: ARMS[(index + j) % 3] for j, copy in enumerate(COPIES)}
        report = work / f"session-{index:02d}.json"
        out = session(
            work,
            arms,
            [
                f"--tpu-report={report}",
                "--compare=exp",
                f"--fail-on-regression={options.threshold:g}",
                # This session's own summaries, so its comparisons can be replayed offline
                # under another rule (experiments/gate/replay.py) on the very same rounds.
                f"--save-baseline=current-{index:02d}",
                "--tpu-baseline-history=1",
                "--benchmark-compare=0001",
                f"--benchmark-compare-fail=median:{options.threshold:g}%",
            ],
        )
        found = parse(out, report, arms)
        (work / f"session-{index:02d}.log").write_text(out)
        for record in found:
            record.update(condition=name, session=index, history_work=options.history_work / 100)
        records += found
        fails = sum(bool(r["ours_failed"]) for r in found if r["arm"] == 0)
        print(
            f"[{name}] comparison {index + 1}: {len(found)} rows, {fails} false alarms", flush=True
        )
    return records


def _median_detectable(rows: list[dict[str, object]]) -> str:
    """The median smallest detectable slowdown of the inconclusive rows ("-" without any)."""
    found = sorted(
        float(r["detectable_pct"])  # type: ignore[arg-type]
        for r in rows
        if r["verdict"] == "inconclusive" and r["detectable_pct"] is not None
    )
    return f"{found[len(found) // 2]:.1f}%" if found else "-"


def table(records: list[dict[str, object]]) -> str:
    groups: dict[tuple[object, ...], list[dict[str, object]]] = defaultdict(list)
    for r in records:
        groups[(r["condition"], r["workload"], r["style"], r["arm"])].append(r)
    lines = [
        "| condition | workload | style | work | pytest-tpu failed | of which on the mean "
        "| pytest-tpu inconclusive | median detectable | pytest-benchmark median:5% failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=str):
        rows = groups[key]
        ours = sum(bool(r["ours_failed"]) for r in rows)
        tail = sum(bool(r["ours_failed"]) and r.get("statistic") == TAIL for r in rows)
        doubt = sum(r["verdict"] == "inconclusive" for r in rows)
        theirs = sum(bool(r["theirs_failed"]) for r in rows)
        cond, workload, style, arm = key
        lines.append(
            f"| {cond} | {workload} | {style} | +{float(arm):.0%} | {ours}/{len(rows)} | {tail} "  # type: ignore[arg-type]
            f"| {doubt}/{len(rows)} | {_median_detectable(rows)} | {theirs}/{len(rows)} |"
        )
    return "\n".join(lines)


def _share(rows: list[dict[str, object]], test: Callable[[dict[str, object]], bool]) -> str:
    return f"{sum(test(r) for r in rows)}/{len(rows)}"


def _wrong(arm: float, row: dict[str, object]) -> bool:
    """Same code called slower or faster; more work called unchanged or faster."""
    return row["verdict"] in (("slower", "faster") if arm == 0 else ("unchanged", "faster"))


def wide_table(records: list[dict[str, object]]) -> str:
    """One line per condition, workload and style, the three arms side by side (the README's)."""
    groups: dict[tuple[str, ...], dict[float, list[dict[str, object]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in records:
        key = (str(r["condition"]), str(r["workload"]), str(r["style"]))
        groups[key][float(r["arm"])].append(r)  # type: ignore[arg-type]
    lines = [
        "| condition | workload | style | pytest-tpu failed: +0% / +5% / +10% "
        "| called slower: +5% / +10% | wrong verdicts | inconclusive (all arms) "
        "| median detectable (+0 %) | pytest-benchmark `median:5%` failed: +0% / +5% / +10% |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (k[0] != "quiet", k)):
        arms = groups[key]
        every = [(arm, r) for arm, rows in arms.items() for r in rows]
        ours = " / ".join(_share(arms[a], lambda r: bool(r["ours_failed"])) for a in ARMS)
        slower = " / ".join(_share(arms[a], lambda r: r["verdict"] == "slower") for a in ARMS[1:])
        theirs = " / ".join(_share(arms[a], lambda r: bool(r["theirs_failed"])) for a in ARMS)
        wrong = sum(_wrong(arm, r) for arm, r in every)
        doubt = sum(r["verdict"] == "inconclusive" for _, r in every)
        lines.append(
            f"| {' | '.join(key)} | {ours} | {slower} | {wrong} | {doubt}/{len(every)} "
            f"| {_median_detectable(arms[0.0])} | {theirs} |"
        )
    return "\n".join(lines)


def true_change(row: dict[str, object]) -> float:
    """The change a row's copy really made against the saved runs (``--history-work``)."""
    return (1 + float(row["arm"])) / (1 + float(row.get("history_work") or 0.0)) - 1  # type: ignore[arg-type]


def verdict_table(records: list[dict[str, object]]) -> str:
    """Per condition, workload, style and true change: how pytest-tpu judged the rows, with the
    `faster` ones split by what the fresh process said."""
    groups: dict[tuple[str, str, str, float], list[dict[str, object]]] = defaultdict(list)
    for r in records:
        key = (str(r["condition"]), str(r["workload"]), str(r["style"]), true_change(r))
        groups[key].append(r)
    lines = [
        "| condition | workload | style | change vs saved runs | slower | faster, a fresh process "
        "agreed | faster, no fresh process | withdrawn by a fresh process | unchanged | "
        "inconclusive |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (k[0] != "quiet", k)):
        pairs = [(r, str(r.get("note") or "")) for r in groups[key]]

        def count(
            test: Callable[[dict[str, object], str], bool],
            pairs: list[tuple[dict[str, object], str]] = pairs,
        ) -> str:
            return f"{sum(test(r, n) for r, n in pairs)}/{len(pairs)}"

        agreed = count(lambda r, n: r["verdict"] == "faster" and "in a fresh process (" in n)
        alone = count(lambda r, n: r["verdict"] == "faster" and "in a fresh process (" not in n)
        withdrawn = count(lambda r, n: "fresh process: this process -" in n)
        cells = [
            count(lambda r, n: r["verdict"] == "slower"),
            agreed,
            alone,
            withdrawn,
            count(lambda r, n: r["verdict"] == "unchanged"),
            count(lambda r, n: r["verdict"] == "inconclusive"),
        ]
        cond, workload, style, change = key
        lines.append(f"| {cond} | {workload} | {style} | {change:+.1%} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument(
        "--save-every",
        type=int,
        default=0,
        help="save one more run (of the unchanged work) after every N comparison sessions",
    )
    parser.add_argument(
        "--history-work",
        type=float,
        default=0.0,
        help="percent more work in the saved runs: with 10, the +0 %% arm is a real improvement",
    )
    parser.add_argument(
        "--conditions",
        default="quiet,neighbour",
        help="comma list: quiet, neighbour, steady, both, memory, "
        "or A>B (history in A, compared in B)",
    )
    parser.add_argument("--out", type=Path, help="write every row as JSON")
    parser.add_argument("--keep", type=Path, help="keep baselines and logs in this folder")
    parser.add_argument(
        "--table", type=Path, nargs="+", help="only print the README's table of --out files"
    )
    parser.add_argument(
        "--verdicts", type=Path, nargs="+", help="only print the verdicts of --out files"
    )
    options = parser.parse_args()
    if options.table:
        print(wide_table([r for path in options.table for r in json.loads(path.read_text())]))
        return
    if options.verdicts:
        print(verdict_table([r for path in options.verdicts for r in json.loads(path.read_text())]))
        return
    started = time.monotonic()
    random.seed(0)
    records: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="gate-experiment-") as scratch:
        root = options.keep or Path(scratch)
        for name in options.conditions.split(","):
            records += condition(name, options, root / name.replace(">", "-then-"))
            if options.out:
                options.out.write_text(json.dumps(records, indent=1))
    print(table(records))
    print(f"wall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
