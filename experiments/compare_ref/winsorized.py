"""Judge logged paired rounds again under a robust error for the middle-half mean: is it finer?

A same-job row's change is the mean of the middle half of its paired rounds' log ratios
(``stats.paired_change``), its error the spread of that statistic over at most ``MAX_BLOCKS``
contiguous blocks of pairs. With fewer pairs than that, each block is one pair, and the error is
the plain standard deviation of the pairs: one pair a burst of the neighbour hit widens it as
much as the trimming narrows the change. The textbook error of a trimmed mean (Tukey and
McLaughlin: the winsorized standard deviation over ``(1 - 2g/n) * sqrt(n)``, on ``n - 2g - 1``
degrees of freedom) is robust to that pair, but takes the pairs as independent. Three rules:

- ``shipped``: ``stats.paired_change``;
- ``winsorized``: Tukey-McLaughlin on every pair (pairs independent);
- ``winsorized blocks``: Tukey-McLaughlin on the pairs up to ``MAX_BLOCKS``, and on the blocks'
  middle-half means above it.

For each, as ``blocks.py`` does: **calibration**, each row's pairs cut into two halves (or two
windows of ``--window`` pairs, the first and the last), judged apart, and their difference over its
stated error compared with the two-sided 95 % t quantile (honest: beyond it 5 % of the time); and
the median 95 % half-width, on the session's first pairs and on the others.

    python experiments/compare_ref/winsorized.py r97a_pairs.jsonl r98n_pairs.jsonl --window 5
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from blocks import NAME_RE, load  # noqa: E402

from pytest_tpu.gate import stats  # noqa: E402

TRIM = 0.25  # what ``stats._trimmed`` cuts from each end
Judged = tuple[float, float, float]  # change (log), standard error, degrees of freedom


def shipped(values: Sequence[float]) -> Judged | None:
    found = stats.paired_change(values)
    if found is None or not math.isfinite(found.se) or found.se <= 0:
        return None
    return found.log, found.se, found.df


def winsorized(values: Sequence[float]) -> Judged | None:
    n = len(values)
    cut = int(TRIM * n)
    df = n - 2 * cut - 1
    if df < 1:
        return None
    ordered = sorted(values)
    low, high = ordered[cut], ordered[n - cut - 1]
    clipped = [min(max(v, low), high) for v in values]
    se = statistics.stdev(clipped) / ((1 - 2 * cut / n) * math.sqrt(n))
    return (stats._trimmed(values), se, df) if se > 0 else None


def winsorized_blocks(values: Sequence[float]) -> Judged | None:
    if len(values) <= stats.MAX_BLOCKS:
        return winsorized(values)
    blocks = [stats._trimmed(block) for block in stats._blocks(values, stats.MAX_BLOCKS)]
    found = winsorized(blocks)
    return None if found is None else (stats._trimmed(values), found[1], found[2])


RULES: dict[str, Callable[[Sequence[float]], Judged | None]] = {
    "shipped": shipped,
    "winsorized": winsorized,
    "winsorized blocks": winsorized_blocks,
}


def parts(values: Sequence[float], window: int) -> tuple[Sequence[float], Sequence[float]] | None:
    if window == 0:
        middle = len(values) // 2
        return (values[:middle], values[middle:]) if middle >= 5 else None
    return (values[:window], values[-window:]) if len(values) >= 2 * window else None


def beyond(values: Sequence[float], window: int, rule: Callable[..., Judged | None]) -> bool | None:
    cut = parts(values, window)
    if cut is None:
        return None
    one, two = rule(cut[0]), rule(cut[1])
    if one is None or two is None:
        return None
    z = abs(one[0] - two[0]) / math.hypot(one[1], two[1])
    return z > stats.t_ppf(0.975, min(one[2], two[2]))


def half_width(values: Sequence[float], rule: Callable[..., Judged | None]) -> float | None:
    found = rule(values)
    return None if found is None else stats.t_ppf(0.975, found[2]) * found[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", type=Path)
    parser.add_argument("--window", type=int, default=0, help="pairs per window (0: halves)")
    args = parser.parse_args()
    apart: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0] * 2 * len(RULES))
    widths: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for path in args.pairs:
        for record in load([path]):
            found = NAME_RE.search(str(record["nodeid"]))
            if not found:
                continue
            values = [float(v) for v in record["differences"]]  # type: ignore[attr-defined]
            stage = "first" if record.get("stage") == "first" else "later"
            key = (path.stem, found.group(2), found.group(1))
            for index, (name, rule) in enumerate(RULES.items()):
                if (out := beyond(values, args.window, rule)) is not None:
                    apart[key][2 * index] += out
                    apart[key][2 * index + 1] += 1
                if (width := half_width(values, rule)) is not None:
                    widths[(*key, stage)][name].append(width)
    names = list(RULES)
    print(f"| run | workload | style | {' | '.join(f'apart beyond 95 %: {n}' for n in names)} |")
    print("|---|---|---|" + "---|" * len(names))
    for key in sorted(apart):
        counts = apart[key]
        cells = [f"{counts[2 * i]}/{counts[2 * i + 1]}" for i in range(len(names))]
        print(f"| {' | '.join(key)} | {' | '.join(cells)} |")
    print()
    print(f"| run | workload | style | pairs | {' | '.join(f'median ±: {n}' for n in names)} |")
    print("|---|---|---|---|" + "---|" * len(names))
    for key in sorted(widths):
        cells = [
            f"{100 * statistics.median(widths[key][n]):.1f} %" if widths[key][n] else "-"
            for n in names
        ]
        print(f"| {' | '.join(key)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
