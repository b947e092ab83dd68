"""Pure statistics of the regression gate: no pytest, numpy or TensorFlow import.

A benchmark's rounds on a shared machine are its true cost plus interference, and interference
only adds time, so a run's location is the mean of its fastest half of rounds (``lower_mean``).
Rounds are not independent (load comes in bursts), so a run's uncertainty comes from *batch
means*: the rounds are cut into a few contiguous blocks, each block is located on its own, and
the spread of the block locations says how much the run's location could move. Sessions differ by
more than blocks do; that part is measured from the saved history of runs (``Change`` combines
both), never assumed as a constant. Everything works on logs, so changes are ratios.

Memory and time are linear in the number of rounds: no bootstrap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from statistics import NormalDist
from typing import TypeVar

LOWER_FRACTION = 0.5  # share of the fastest rounds that locates a run
MAX_BLOCKS = 8  # contiguous blocks of a run for batch means
MIN_BLOCKS = 3  # fewer rounds than this: no within-run uncertainty can be estimated
CONFIDENCE = 0.95  # the interval shown
SPREAD_OF_PAIRS = "pairs of processes in this job"  # names a same-job row judged on that spread
ONE_PAIR = "one pair of processes"  # ends the noise source of a same-job row of one pair
TWO_PAIRS = "two pairs of processes pooled"  # ends that of a row two pairs measured together
# What keeps two agreeing pairs from ``unchanged`` where they rule a slowdown out, with the room
# their offset needs, and only a speed-up of the threshold stays open (``sameref.pooled``).
ONLY_A_SPEEDUP = "but reaches a speed-up of it"
# A slowdown of this share of its threshold or more, read by one pair, can be a regression an offset
# between the pair's two processes made look smaller (``sameref.rows.one_pair``, ``lines``).
ONE_PAIR_HIDES = 0.25
# The offset between two processes with the same code that one pair's interval must leave room
# for, as a share of the threshold: a change this large from one pair is already taken for a
# possible offset (new pairs measure it), so one pair rules a regression out only where its
# interval stays under the threshold less this (``one_pair_may_hide``).
ONE_PAIR_OFFSET = 0.5
FAIL_CONFIDENCE = 0.99  # how sure "slower" must be (the gate's rule, ``verdict.decide``)
TAIL = "mean of all rounds"  # names a row failed on slow calls in the tail (``gate.tail``)
POWER = 0.8  # "catches 4 times in 5": the power of the smallest detectable change
# One saved run: the assumed spread between sessions is held as uncertain as three saved runs
# would leave a measured one (2 degrees of freedom). A slowdown must then be 9.8 assumed standard
# deviations (log scale) to be 99 % sure, +62 % against a 5 % threshold: unchanged TensorFlow
# benchmarks whose sessions differ by 16 % (the most seen here) get that far about one time in 60.
ONE_RUN_DF = 2

Location = Callable[[Sequence[float]], float]
T = TypeVar("T")


def by_one_pair(noise_source: str) -> bool:
    """Whether a row's noise source says one pair of processes' rounds measured it (``ONE_PAIR``):
    its interval leaves out an offset between the two processes."""
    return noise_source.endswith(ONE_PAIR)


def by_two_pairs(noise_source: str) -> bool:
    """Whether two pairs of processes measured a row together (``TWO_PAIRS``): a row they leave
    ``inconclusive`` lacked the room their mean's offset needs under the threshold, whatever its
    interval (``sameref.pooled``), unless only a speed-up kept it open (``two_pairs_hide``)."""
    return noise_source.endswith(TWO_PAIRS)


def two_pairs_hide(noise_source: str, reason: str) -> bool:
    """Whether two pairs of processes measured a row together and leave a slowdown of its
    threshold possible: every such row but one whose reason says only a speed-up of the
    threshold kept it from ``unchanged`` (``ONLY_A_SPEEDUP``). New-user trial 73: -3.1 %
    [-5.2, -0.9] by two pairs at 5 %, "reaches a speed-up of it", named by the gate among the rows
    that could hide a slowdown."""
    return by_two_pairs(noise_source) and ONLY_A_SPEEDUP not in reason


def one_pair_cannot_catch(detectable: float | None, threshold: float) -> bool:
    """Whether one pair of processes' rounds could not have caught a slowdown of ``threshold``
    reliably (their smallest detectable slowdown lies past it), so that an offset between the
    two processes could hide one however their interval reads (trial 23, a Keras LSTM)."""
    return detectable is not None and not detectable <= threshold


def one_pair_may_hide(change: float, high: float, threshold: float) -> bool:
    """Whether one pair of processes' change and the upper end of its interval (both fractions)
    leave a slowdown of ``threshold`` possible once an offset between the two processes is
    allowed for: a change of ``ONE_PAIR_HIDES`` of it or more, or an interval reaching past the
    threshold less ``ONE_PAIR_OFFSET`` of it. (r49, r50n and r51, the same job: a Keras CNN made 5 %
    slower read +0.5 %, -0.0 % and +1.1 % [-1.6, +3.9] in one pair and was called ``unchanged``.)"""
    return change >= threshold * ONE_PAIR_HIDES or high >= threshold * (1 - ONE_PAIR_OFFSET)


def clean(samples: Sequence[object]) -> list[float]:
    """The positive, finite samples (a zero or NaN round cannot be a duration)."""
    out: list[float] = []
    for x in samples:
        if isinstance(x, int | float) and not isinstance(x, bool):
            try:
                value = float(x)
            except OverflowError:
                continue
            if 0 < value < math.inf:
                out.append(value)
    return out


def lower_mean(samples: Sequence[float], fraction: float = LOWER_FRACTION) -> float:
    """Mean of the fastest ``fraction`` of the samples (at least one)."""
    ordered = sorted(clean(samples))
    if not ordered:
        raise ValueError("no valid samples")
    count = max(1, int(len(ordered) * fraction))
    return math.fsum(ordered[:count]) / count


def mean(samples: Sequence[float]) -> float:
    """Mean of all the samples: what a slow call in the tail costs shows here, not in
    ``lower_mean`` (the tail check, ``gate.tail``)."""
    data = clean(samples)
    if not data:
        raise ValueError("no valid samples")
    return math.fsum(data) / len(data)


def midmean(values: Sequence[float]) -> float:
    """Mean of the middle half of ``values`` (a quarter trimmed from each end)."""
    ordered = sorted(clean(values))
    if not ordered:
        raise ValueError("no valid samples")
    cut = len(ordered) // 4
    middle = ordered[cut : len(ordered) - cut]
    return math.fsum(middle) / len(middle)


def round_ratios(samples: Sequence[float], calibration: Sequence[float | None]) -> list[float]:
    """Per-round ``bench_i / ref_i`` for the rounds where both are valid durations."""
    return [
        bench / ref
        for bench, ref in zip(samples, calibration, strict=False)
        if ref is not None and clean([bench]) and clean([ref])
    ]


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class Estimate:
    """One run's location on a log scale and how far it could move within the run.

    ``se`` is the standard error of ``log`` from batch means (``inf`` with too few rounds);
    ``spread`` is the standard deviation of the block locations, the run's own drift on the
    timescale of a block; ``blocks`` is how many blocks (``blocks - 1`` degrees of freedom).
    """

    log: float
    se: float
    spread: float
    blocks: int

    @property
    def value(self) -> float:
        return math.exp(self.log)

    def to_json(self) -> list[float]:
        return [self.log, _finite(self.se), _finite(self.spread), self.blocks]

    @classmethod
    def from_json(cls, data: object) -> Estimate:
        if not isinstance(data, list) or len(data) != 4:
            raise ValueError("an estimate is a list [log, se, spread, blocks]")
        log, se, spread, blocks = data
        numbers = (log, se, spread)
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in numbers):
            raise ValueError("an estimate holds numbers")
        if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1:
            raise ValueError("an estimate's block count is a whole number of at least 1")
        se_, spread_ = (math.inf if x is None or x < 0 else float(x) for x in (se, spread))
        if not math.isfinite(log) or abs(log) > 1000:
            raise ValueError("an estimate's location is not a finite log duration")
        return cls(float(log), se_, spread_, blocks)


def _finite(value: float) -> float:
    """JSON has no infinity: -1 stands for "unknown" in files."""
    return value if math.isfinite(value) else -1.0


def _blocks(values: Sequence[T], count: int) -> list[Sequence[T]]:
    size, extra = divmod(len(values), count)
    out, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        out.append(values[start:end])
        start = end
    return out


def estimate(values: Sequence[float], location: Location = lower_mean) -> Estimate | None:
    """The run's location with its batch-means uncertainty; None without valid values.

    ``values`` must be in the order they were measured: blocks are contiguous in time.
    """
    data = clean(values)
    if not data:
        return None
    log = math.log(location(data))
    count = min(MAX_BLOCKS, len(data))
    if count < MIN_BLOCKS:
        return Estimate(log, math.inf, math.inf, count)
    logs = [math.log(location(block)) for block in _blocks(data, count)]
    spread = sample_sd(logs)
    return Estimate(log, spread / math.sqrt(count), spread, count)


def _expm1(x: float) -> float:
    """``exp(x) - 1``, infinite instead of an OverflowError (a baseline of 5e-324 s)."""
    return math.expm1(x) if x < 700 else math.inf


def sample_sd(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1))


def slope_upper(points: Sequence[tuple[float, float]], confidence: float = 0.95) -> float | None:
    """An upper ``confidence`` bound on how steeply y follows x, ``|slope|``, from a least-squares
    line through ``points``: its slope's size plus one-sided Student's t times its standard error,
    with ``n - 2`` degrees of freedom. None with fewer than four points (one degree of freedom
    leaves the bound meaningless) or where x does not vary."""
    if len(points) < 4:
        return None
    mean_x = math.fsum(x for x, _ in points) / len(points)
    mean_y = math.fsum(y for _, y in points) / len(points)
    sxx = math.fsum((x - mean_x) ** 2 for x, _ in points)
    if not sxx > 0:
        return None
    slope = math.fsum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    residual = math.fsum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points)
    df = len(points) - 2
    return abs(slope) + t_ppf(confidence, df) * math.sqrt(residual / df / sxx)


# --------------------------------------------------------------------------- Student's t


def _t_pdf(x: float, df: float) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom (normal above 200)."""
    if df > 200:
        return 0.5 * math.erfc(-x / math.sqrt(2))
    if x < 0:
        return 1 - t_cdf(-x, df)
    # On [0, x] after the substitution x = tan(theta), which keeps the integrand bounded.
    area = _simpson(
        lambda theta: _t_pdf(math.tan(theta), df) / math.cos(theta) ** 2, math.atan(x), 400
    )
    return min(1.0, 0.5 + area)


def _simpson(f: Callable[[float], float], top: float, steps: int) -> float:
    """The integral of ``f`` over [0, ``top``] by Simpson's rule (``steps`` even)."""
    h = top / steps
    total = 0.0
    for i in range(steps + 1):
        weight = 1 if i in (0, steps) else (4 if i % 2 else 2)
        total += weight * f(i * h)
    return total * h / 3


@lru_cache(maxsize=512)
def t_ppf(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t: Newton's method on ``t_cdf`` from the normal quantile,
    kept inside a shrinking bracket (a step that would leave it bisects instead). A few
    ``t_cdf`` calls where bisection took fifty; cached, as rows share degrees of freedom."""
    low, high = -1e3, 1e3
    x = NormalDist().inv_cdf(min(max(p, 1e-12), 1 - 1e-12))
    for _ in range(100):
        miss = t_cdf(x, df) - p
        if miss < 0:
            low = x
        else:
            high = x
        density = _t_pdf(x, df)
        step = x - miss / density if density > 0 else high  # no slope out there: bisect
        following = step if low < step < high else (low + high) / 2
        if abs(following - x) < 1e-12:
            return following
        x = following
    return x


# --------------------------------------------------------------------------- two sides


@dataclass(frozen=True)
class Change:
    """Relative change of round time, current vs baseline (+0.05 means 5 % slower).

    ``low``/``high`` bound it at ``CONFIDENCE``; ``p_slower`` is how sure it is that the current
    run is slower; ``detectable`` is the smallest slowdown this comparison would catch four times
    in five; ``source`` says where the between-session part of the uncertainty came from.
    """

    estimate: float
    low: float
    high: float
    p_slower: float
    detectable: float
    se: float
    df: float
    source: str
    measured: bool  # False when the between-session noise had to be assumed

    @property
    def log(self) -> float:
        return math.log1p(self.estimate)


@dataclass(frozen=True)
class Noise:
    """The between-session variance of a log location, and where it came from."""

    variance: float
    df: float
    source: str
    measured: bool


def between_sessions(
    history: Sequence[Estimate],
    extra: Sequence[float] = (),
    current: Estimate | None = None,
    assumed: float = 0.0,
    beyond: str = "",
) -> Noise:
    """How much a session's location varies from session to session.

    With two or more saved runs: their variance, less the part their own within-run noise
    explains (measured) -- but never less than the variance of a block's location within a run
    (the median of the saved runs' and ``current``'s: one run's burst of load, then or now, is
    in that run's location and its own error, not the floor of every comparison). Sessions
    differ by more than stretches of one session do; a few runs saved minutes apart can agree
    by chance, or because the machine held still while they ran, and then nothing else would
    stand between a session that runs differently and a "certain" verdict (seen here: five
    saved runs within 1.8 % of each other,
    blocks of each run 8-16 % apart, an unchanged benchmark +17 % in a later session).
    With one saved run: nothing between sessions is known. The assumption is the largest of the
    spread of blocks within the saved and the current run, the spread of --measure-noise runs
    (``extra``, log locations)
    and ``assumed`` (the caller's threshold), held as uncertain as three saved runs would leave
    it; the source says which.
    """
    if len(history) >= 2:
        logs = [h.log for h in history]
        within = math.fsum(_sq(h.se) for h in history) / len(history)
        measured = max(sample_sd(logs) ** 2 - within, 0.0)
        floor = _typical_block_variance([*history, *([current] if current else [])])
        source = f"{len(history)} saved runs"
        if floor > measured:
            source += f" (at least the spread of blocks within a run, {math.sqrt(floor):.1%})"
        found = Noise(max(measured, floor), len(history) - 1, source, True)
        return _beyond(found, [*history, *([current] if current else [])], extra, assumed, beyond)
    return _assumed([*history, *([current] if current else [])], extra, assumed)


def _beyond(
    found: Noise, runs: Sequence[Estimate], extra: Sequence[float], assumed: float, beyond: str
) -> Noise:
    """``found``, or where this session lies further from the saved runs than they lie from each
    other (``beyond`` says how: ``history.beyond_reach``), no less than one saved run assumes.

    The saved runs' spread measures sessions as close together as they were; how much sessions
    further apart differ is not measured, so it is assumed as for one saved run: at least the
    threshold (or what they measured, where that is more), as uncertain as three saved runs
    would leave it.
    """
    if not beyond:
        return found
    one = _assumed(runs, extra, assumed)
    variance = max(found.variance, one.variance)
    source = (
        f"{beyond} this session: at least {_expm1(math.sqrt(variance)):.1%} assumed, as for one "
        "saved run (how much sessions further apart differ is not measured)"
    )
    # As uncertain as one saved run's assumption, whichever variance is larger: a spread measured
    # minutes apart is no better known for sessions further apart (trial 30: 9 % measured from
    # five runs, 4 degrees of freedom, failed an unchanged GRU step at +40 %).
    return Noise(variance, ONE_RUN_DF, source, False)


def _assumed(runs: Sequence[Estimate], extra: Sequence[float], assumed: float) -> Noise:
    """One saved run (and the current one): what is assumed of the sessions' spread, and why.

    Blocks of one process can agree to a tenth of a percent while two sessions differ by
    percents (seen: a 280 us function -3.7 % "faster" against one saved run, unchanged code,
    with 0.0 % assumed from its blocks), so the threshold is a floor: with one saved run only
    changes well beyond it are resolved, and the row says what was assumed. Blocks count where
    they spread more, the current run's too: a burst of load now is not in the saved run.
    """
    known = [r for r in runs if math.isfinite(r.spread) and r.blocks > 1]
    candidates = [(_block_variance(known), "the spread of blocks within the runs")] if known else []
    if len(extra) >= 2:
        candidates.append((sample_sd(extra) ** 2, "the spread of --measure-noise runs"))
    if assumed > 0:
        candidates.append((math.log1p(assumed) ** 2, "the threshold, as nothing was measured"))
    if not candidates:
        return Noise(math.inf, 1, "no estimate: too few rounds", False)
    variance, why = max(candidates)
    return Noise(
        variance,
        ONE_RUN_DF,
        f"assumed {_expm1(math.sqrt(variance)):.1%} (1 saved run: {why})",
        False,
    )


def _typical_block_variance(runs: Sequence[Estimate]) -> float:
    """The variance of a block's location within the median run (0 where none is known).

    The median, not the pooled variance: one saved run with a burst of load in it (new-user
    trial 27: a numpy sort's blocks 10 % apart in one of five runs, 0.1-2.5 % in the others)
    pooled to 4.2 % and left a 5 % threshold out of reach for every later comparison. A burst
    moves its run's location, which the saved runs' spread counts (or, in the current run, its
    own error does)."""
    parts = [r.spread**2 for r in runs if math.isfinite(r.spread) and r.blocks > 1]
    return statistics.median(parts) if parts else 0.0


def _block_variance(runs: Sequence[Estimate]) -> float:
    """The pooled variance of a block's location within a run (0 where none is known)."""
    parts = [(r.spread**2, r.blocks - 1) for r in runs if math.isfinite(r.spread) and r.blocks > 1]
    df = sum(d for _, d in parts)
    return math.fsum(v * d for v, d in parts) / df if df else 0.0


def _sq(x: float) -> float:
    return x * x if math.isfinite(x) else math.inf


def welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variance estimates, each given with
    its degrees of freedom (infinite for one read as normal): 1e9 where none is estimated."""
    total = math.fsum(v for v, _ in parts)
    denominator = math.fsum(v * v / df for v, df in parts if v > 0)
    return total * total / denominator if denominator > 0 else 1e9


def change(
    history: Sequence[Estimate],
    current: Estimate,
    extra: Sequence[float] = (),
    assumed: float = 0.0,
    beyond: str = "",
) -> Change | None:
    """The change of ``current`` against the mean of ``history``, with an honest interval.

    Its variance is a new session's between-session noise, the current run's own noise and the
    uncertainty of the baseline's mean. None when ``history`` is empty. ``assumed`` is the
    least spread between sessions taken where one saved run measures none (the threshold).
    """
    if not history:
        return None
    base = math.fsum(h.log for h in history) / len(history)
    delta = current.log - base
    noise = between_sessions(history, extra, current, assumed, beyond)
    within_history = math.fsum(_sq(h.se) for h in history) / len(history)
    parts = [
        (noise.variance * (1 + 1 / len(history)), noise.df),
        (_sq(current.se), max(1, current.blocks - 1)),
        (within_history / len(history), max(1, min(h.blocks for h in history) - 1)),
    ]
    variance = math.fsum(v for v, _ in parts)
    if not math.isfinite(variance):
        return _unknown(delta, noise)
    se = math.sqrt(variance)
    df = welch_df(parts)
    return _from(delta, se, df, noise)


def _from(delta: float, se: float, df: float, noise: Noise) -> Change:
    if se == 0:
        p = 1.0 if delta > 0 else 0.0 if delta < 0 else 0.5
        half = 0.0
    else:
        p = t_cdf(delta / se, df)
        half = t_ppf(1 - (1 - CONFIDENCE) / 2, df) * se
    detectable = _detectable(df) * se
    return Change(
        estimate=_expm1(delta),
        low=_expm1(delta - half),
        high=_expm1(delta + half),
        p_slower=p,
        detectable=_expm1(detectable),
        se=se,
        df=df,
        source=noise.source,
        measured=noise.measured,
    )


def from_log(delta: float, se: float, df: float, source: str) -> Change:
    """A change measured in this job from its log estimate, standard error and degrees of
    freedom, with its interval, how sure it is and what it detects."""
    return _from(delta, se, df, Noise(0.0, df, source, True))


def _detectable(df: float) -> float:
    """The true change, in standard errors, that the gate calls slower 4 times in 5."""
    # A tenth of a degree of freedom changes nothing shown; below one there is no t to speak of.
    return _detectable_at(max(1.0, round(df, 1)))


@lru_cache(maxsize=512)
def _detectable_at(df: float) -> float:
    """The gate calls a change slower when ``estimate / estimated error`` clears the one-sided
    ``FAIL_CONFIDENCE`` t quantile. The estimated error is itself uncertain (``df`` degrees of
    freedom), so t + z would promise too much with few blocks: the shift that clears it with
    80 % power is solved for on the noncentral t's power, integrated over the error's spread.
    """
    t = t_ppf(FAIL_CONFIDENCE, df)
    low, high = t, 4 * t + 10
    for _ in range(24):  # the bracket narrows to 1e-6 of its width: far below what is shown
        mid = (low + high) / 2
        if _power(mid, t, df) < POWER:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _power(shift: float, t: float, df: float) -> float:
    """P(Z + shift > t * U / sqrt(df)) with Z normal and U^2 chi-square on ``df`` (Simpson)."""
    top = math.sqrt(df + 12 * math.sqrt(2 * df) + 40)
    scale = math.log(2) - (df / 2) * math.log(2) - math.lgamma(df / 2)

    def integrand(u: float) -> float:
        if u == 0:  # the density at 0: finite for one degree of freedom, 0 above
            density = math.exp(scale) if df == 1 else 0.0
        else:
            density = math.exp(scale + (df - 1) * math.log(u) - u * u / 2)
        return density * 0.5 * math.erfc((t * u / math.sqrt(df) - shift) / math.sqrt(2))

    # 200 steps: relative error under 1e-6 against 600, from 1 to 400 degrees of freedom.
    return _simpson(integrand, top, 200)


def _unknown(delta: float, noise: Noise) -> Change:
    return Change(
        estimate=_expm1(delta),
        low=-1.0,
        high=math.inf,
        p_slower=0.5,
        detectable=math.inf,
        se=math.inf,
        df=1,
        source=noise.source,
        measured=False,
    )


def relative_spread(values: Sequence[float]) -> float:
    """Sample standard deviation of ``values`` relative to their mean (0 for fewer than two)."""
    data = clean(values)
    if len(data) < 2:
        return 0.0
    return sample_sd(data) / (math.fsum(data) / len(data))


# --------------------------------------------------------------------------- same job, paired


def _trimmed(values: Sequence[float]) -> float:
    """Mean of the middle half of real numbers (a quarter trimmed from each end)."""
    ordered = sorted(values)
    cut = len(ordered) // 4
    middle = ordered[cut : len(ordered) - cut]
    return math.fsum(middle) / len(middle)


def paired_rounds(
    head: Sequence[tuple[int, float]], base: Sequence[tuple[int, float]]
) -> list[tuple[float, float]]:
    """(head, base) round times of the rounds that ran next to each other, in time order.

    Each round carries its turn; turns ``2k`` and ``2k + 1`` are pair ``k``.
    """
    heads = {turn // 2: value for turn, value in head if clean([value])}
    bases = {turn // 2: value for turn, value in base if clean([value])}
    return [(heads[k], bases[k]) for k in sorted(heads.keys() & bases.keys())]


def pair_differences(
    head: Sequence[tuple[int, float]], base: Sequence[tuple[int, float]]
) -> list[float]:
    """Log ratios head/base of the rounds that ran next to each other, in time order."""
    return [math.log(h / b) for h, b in paired_rounds(head, base)]


def paired_change(differences: Sequence[float]) -> Change | None:
    """The change of head against base from paired rounds of one job, with its interval.

    No between-session part: both sides ran in this session, round next to round. Rounds are
    still not independent, so the uncertainty comes from batch means over blocks of pairs.
    """
    return _paired(differences, _trimmed)


def paired_mean_change(pairs: Sequence[tuple[float, float]]) -> Change | None:
    """The change of head's mean round time against base's, from paired rounds of one job.

    The ratio of the two sides' sums over the same pairs, so a slow call on either side counts
    in full; uncertain by batch means over blocks of pairs, as ``paired_change``: a burst of load
    lasting many turns slows both sides of the pairs it covers alike.
    """
    return _paired(pairs, _log_ratio_of_sums)


def _paired(items: Sequence[T], locate: Callable[[Sequence[T]], float]) -> Change | None:
    """The log change ``locate`` finds in all of ``items`` (pairs, in time order), with the
    spread of what it finds in contiguous blocks of them as its error."""
    if not items:
        return None
    delta = locate(items)
    count = min(MAX_BLOCKS, len(items))
    source = f"{len(items)} paired rounds in this job, {ONE_PAIR}"
    noise = Noise(0.0, max(1, count - 1), source, True)
    if count < MIN_BLOCKS:
        return _unknown(delta, noise)
    blocks = [locate(block) for block in _blocks(items, count)]
    return _from(delta, sample_sd(blocks) / math.sqrt(count), count - 1, noise)


def _log_ratio_of_sums(pairs: Sequence[tuple[float, float]]) -> float:
    return math.log(math.fsum(h for h, _ in pairs) / math.fsum(b for _, b in pairs))


def widened(found: Change, extra_sd: float, why: str) -> Change:
    """``found`` with one more independent source of uncertainty (a log-scale SD) added."""
    if extra_sd <= 0 or not math.isfinite(found.se):
        return found
    se = math.hypot(found.se, extra_sd)
    noise = Noise(0.0, found.df, f"{found.source}; {why}", found.measured)
    return _from(found.log, se, found.df, noise)


def widened_above(found: Change, extra_sd: float, why: str) -> Change:
    """``found`` made as uncertain as a bias of about ``extra_sd`` (a log-scale SD) that can only
    have pushed it down, on that side alone.

    A bias down can hide a larger true change, not make a smaller one: the upper end of the
    interval and how sure an improvement is take the bias in, as ``widened`` does; the lower end
    and how sure a slowdown is do not. The smallest detectable slowdown takes it in: a bias down
    could hide that much of a slowdown.
    """
    if extra_sd <= 0 or not math.isfinite(found.se):
        return found
    wide = widened(found, extra_sd, why)
    slower = found.estimate > 0
    return replace(
        found,
        high=wide.high,
        p_slower=(found if slower else wide).p_slower,
        detectable=wide.detectable,
        source=wide.source,
    )


def between_pairs(changes: Sequence[float], new: Sequence[float], within_se: float) -> Change:
    """A same-job change from several pairs of processes, uncertain by the spread between them.

    ``changes`` are every pair's log change (the first pair's included: it was chosen for being
    large, so it can only widen the spread), ``new`` the log changes of the pairs measured after
    it, which give the estimate. Each pair's own interval covers its rounds, not the offset
    between its two processes; the pairs' spread covers both, with ``len(changes) - 1`` degrees
    of freedom, and never less than ``within_se``, the new pairs' own error of their mean.
    """
    spread = sample_sd(changes) / math.sqrt(len(new))
    noise = Noise(0.0, len(changes) - 1, _spread_source(len(changes)), True)
    return _from(math.fsum(new) / len(new), max(spread, within_se), len(changes) - 1, noise)


# A pair's error is never taken below this (log scale): an interval of identical rounds reads
# zero, and its weight would be infinite.
_LEAST_SE = 1e-6


def weighted_pairs(
    changes: Sequence[float], errors: Sequence[float], swapped: Sequence[bool]
) -> Change:
    """A same-job change from several pairs of processes, each new pair weighted by how well it
    was measured, the roles' offset taken out where the pairs hold both roles.

    ``changes`` are every pair's log change, ``errors`` their rounds' standard errors and
    ``swapped`` whether each ran with the roles swapped, the first pair's first: it was chosen for
    being large, so it counts in the spread and never in the estimate. A pair reads the change,
    plus an offset between its two processes that its rounds cannot show, plus its rounds' noise.
    The offsets' variance (``tau2``) is what the pairs' spread shows beyond their rounds' noise
    (DerSimonian-Laird), and each new pair weighs ``1 / (error**2 + tau2)``: a pair that a burst
    of load left coarse counts for less. (The unweighted mean was as uncertain as its noisiest
    pair over the count of pairs: one new pair reading +17 % [-22, +76] among pairs within a
    point of +20 % kept a +20 % regression open at a 10 % threshold until all 13 pairs ran.) Its
    error is the weighted mean's, widened where the pairs lie further apart than the weights
    expect (Hartung-Knapp), on Student's t with one degree of freedom fewer than pairs. Where
    every pair's rounds have the same error this is exactly the unweighted spread the gate used
    before (``experiments/compare_ref/confirm_model.py`` prints the same tables); replayed on
    logged pairs, it took 2.24 new pairs per +5 % row instead of 2.51, with the same verdicts.

    New pairs take the roles in turn (``sameref.swap``): an offset that comes with a role changes
    sign between them, and counted as spread it leaves a row open however many pairs agree on it
    (trial 26: an unchanged 235 us Python function read +2.6, -2.4, +1.7, -3.0 and +2.5 % by five
    pairs, the second and fourth with the roles swapped, and was ``inconclusive``). So where four
    or more pairs hold both roles, each role's new pairs have their own weighted mean, the change
    is the midpoint of the two, and the spread is each pair's around its role's mean (the first
    pair leads), on two degrees of freedom fewer than pairs. With three, one degree of freedom
    left a row open that the spread of all three settles (replayed on logged pairs of workloads
    without a role offset: more new pairs for the same verdicts).
    """
    ses = [max(error, _LEAST_SE) for error in errors]
    # The first pair was chosen for reading large, and its own rounds may be far finer than the
    # new pairs': weighed by them, its distance from the new pairs would set the spread alone. It
    # counts as a pair measured as the new pairs typically were.
    ses[0] = max(ses[0], statistics.median(ses[1:]))
    new_led = [i for i in range(1, len(changes)) if not swapped[i]]
    new_followed = [i for i in range(1, len(changes)) if swapped[i]]
    by_role = bool(new_led and new_followed) and len(changes) >= 4
    groups = [[0, *new_led], new_followed] if by_role else [list(range(len(changes)))]
    tau2 = _between_variance(changes, ses, groups)
    weights = [1 / (se**2 + tau2) for se in ses]
    means: list[float] = []
    inverse = 0.0
    residual = 0.0
    for group in groups:
        new = [i for i in group if i > 0]
        means.append(_weighted_mean(changes, weights, new))
        inverse += 1 / math.fsum(weights[i] for i in new)
        # The spread around all the group's pairs, the first's included, as the estimate's
        # around the new pairs alone would count the first pair's pick for reading large twice.
        centre = _weighted_mean(changes, weights, group)
        residual += math.fsum(weights[i] * (changes[i] - centre) ** 2 for i in group)
    df = len(changes) - len(groups)
    # Each group's mean weighs alike in the midpoint: its variance is a quarter of the sum.
    variance = inverse / len(groups) ** 2
    se = math.sqrt(variance * max(1.0, residual / df))
    leading = (means[0] - means[1]) / 2 if by_role else None
    noise = Noise(0.0, df, _spread_source(len(changes), leading), True)
    return _from(math.fsum(means) / len(means), se, df, noise)


def _weighted_mean(
    values: Sequence[float], weights: Sequence[float], indices: Sequence[int]
) -> float:
    return math.fsum(weights[i] * values[i] for i in indices) / math.fsum(
        weights[i] for i in indices
    )


def _spread_source(count: int, leading: float | None = None) -> str:
    """The noise source of a change judged on the spread of ``count`` pairs; with ``leading``
    (log), the roles' offset taken out, the leading process's."""
    spread = "the spread between the pairs, which shows an offset between processes that a pair's "
    spread += "own rounds cannot"
    if leading is None:
        return f"{count} {SPREAD_OF_PAIRS}, paired rounds: {spread}"
    return (
        f"{count} {SPREAD_OF_PAIRS}, paired rounds, the roles taken in turn: {spread}, and the "
        f"offset of the roles taken out (the leading process {_expm1(leading):+.1%})"
    )


def _between_variance(
    changes: Sequence[float], ses: Sequence[float], groups: Sequence[Sequence[int]]
) -> float:
    """The variance of the offsets between pairs' processes beyond their rounds' noise, each
    pair around its group's mean (DerSimonian-Laird's moment estimate; 0 where the pairs lie no
    further apart than their rounds allow)."""
    q = c = 0.0
    fixed = [1 / se**2 for se in ses]
    for group in groups:
        mean = _weighted_mean(changes, fixed, group)
        q += math.fsum(fixed[i] * (changes[i] - mean) ** 2 for i in group)
        total = math.fsum(fixed[i] for i in group)
        c += total - math.fsum(fixed[i] ** 2 for i in group) / total
    df = len(changes) - len(groups)
    return max(0.0, (q - df) / c) if c > 0 else 0.0
