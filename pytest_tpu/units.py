"""Numbers for people: scaled units and no more digits than the spread justifies.

Pure functions on floats and unit strings; no pytest, numpy or TensorFlow.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Base unit → scaled units, largest first; the first one that puts a value at 1 or more wins.
_TIME = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_FLOPS = (
    ("PFLOP/s", 1e15),
    ("TFLOP/s", 1e12),
    ("GFLOP/s", 1e9),
    ("MFLOP/s", 1e6),
    ("FLOP/s", 1.0),
)
_BYTES = (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0))
# Every spelling a benchmark may record, as (family, factor to the base unit).
_ALIASES: dict[str, tuple[str, float]] = {
    **{name: ("time", factor) for name, factor in _TIME},
    "us": ("time", 1e-6),
    "sec": ("time", 1.0),
    **{name.lower(): ("flops", factor) for name, factor in _FLOPS},
    **{name.lower().replace("/s", "s"): ("flops", factor) for name, factor in _FLOPS},
    **{name: ("bytes", factor) for name, factor in _BYTES},
    "bytes": ("bytes", 1.0),
}
_FAMILIES = {"time": _TIME, "flops": _FLOPS, "bytes": _BYTES}
_BASE = {"time": "s", "flops": "FLOP/s", "bytes": "B"}


def _family(unit: str) -> tuple[str, float] | None:
    return _ALIASES.get(unit) or _ALIASES.get(unit.lower())


def to_base(unit: str) -> tuple[str, float]:
    """The base unit of ``unit``'s family and the factor to it (``ms`` -> ``("s", 1e-3)``);
    unknown units are their own base."""
    known = _family(unit)
    return (_BASE[known[0]], known[1]) if known else (unit, 1.0)


def pick_unit(values: Sequence[float], unit: str) -> tuple[float, str]:
    """The factor and unit that put the median of ``values`` between 1 and 1000.

    One unit per column (or table) keeps the numbers comparable at a glance: 0.53 and 15.7
    TFLOP/s rather than 530 GFLOP/s and 15.7 TFLOP/s. Unknown units are left as they are.
    """
    known = _family(unit)
    finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
    if known is None or not finite:
        return 1.0, unit
    family, to_base = known
    typical = statistics.median(finite) * to_base
    choices = _FAMILIES[family]
    for name, factor in choices:
        if typical >= factor * 0.9995:  # 999.6 ms rounds to "1.00 s", not "1000 ms"
            return to_base / factor, name
    name, factor = choices[-1]
    return to_base / factor, name


def decimals_for(value: float, spread: float | None, figures: int = 3) -> int:
    """Decimal places for ``value`` given its absolute spread.

    The last digit shown is the spread's first significant digit (its second when that digit is
    a 1, as 0.14 hides less than 0.1), never fewer than two significant figures of the value nor
    more than four. Without a spread: ``figures`` significant figures. Never negative: rounding
    an integer part to tens reads as a different number.
    """
    if value == 0 or not math.isfinite(value):
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    if spread is None or spread <= 0 or not math.isfinite(spread):
        return max(0, figures - 1 - magnitude)
    lead = math.floor(math.log10(spread))
    places = -lead + (1 if f"{spread:e}".startswith("1") else 0)
    places = max(places, 1 - magnitude)
    places = min(places, 3 - magnitude)
    return max(0, places)


def format_number(value: float, spread: float | None = None, figures: int = 3) -> str:
    """``value`` with the digits its absolute ``spread`` allows (see ``decimals_for``)."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{decimals_for(value, spread, figures)}f}"


def format_quantity(value: float, unit: str, rel_spread: float | None = None) -> str:
    """One value scaled to a readable unit: ``"850 ms"``, ``"15.7 TFLOP/s"``."""
    factor, shown = pick_unit([value], unit)
    scaled = value * factor
    spread = abs(scaled) * rel_spread if rel_spread else None
    text = format_number(scaled, spread)
    return f"{text} {shown}".rstrip()


def format_spread(rel_spread: float | None) -> str:
    """A relative spread as ``"±3%"``: whole percent, one figure below 1 %."""
    if rel_spread is None or not math.isfinite(rel_spread):
        return ""
    pct = abs(rel_spread) * 100
    # One figure: the spread's own spread is large, "±3.5%" claims more than is known.
    text = f"{pct:.0f}" if pct >= 1 else f"{pct:.1g}"
    return f"±{text}%"


def format_speedup(ratio: float | None) -> str:
    """``"29x"`` like the published comparisons; two figures below 10x."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return ""
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:#.2g}x"


def signed_rounded(value: float, places: int) -> str:
    """``value`` with its sign, except where it rounds to zero: ``0``, not ``-0`` (a change that
    reads as a tiny slowdown's opposite); an interval's bound keeps its sign, which says on which
    side of zero it lies."""
    text = f"{value:+.{places}f}"
    return text[1:] if float(text) == 0 else text


def format_change(pct: float | None, low: float | None, high: float | None) -> str:
    """A change with its interval: ``"+5.2% [+3.1, +7.4]"``; digits follow the interval's width."""
    if pct is None or not math.isfinite(pct):
        return ""
    width = (high - low) / 2 if low is not None and high is not None else None
    # A change is a percentage already: one decimal is enough unless the interval is narrower.
    places = 2 if width is not None and 0 < width < 1 else 1
    if width is not None and width >= 10:
        places = 0

    def signed(x: float) -> str:
        return f"{x:+.{places}f}"

    def bound(x: float) -> str:  # a hundredfold and past, digits say nothing (seen: +363232167)
        if x > 10_000:
            return ">+10,000"
        # A bound that rounds to zero gets up to two decimals: "+14% [+0, +31] SLOWER" read as
        # an interval that reaches no change at all (trial 38: its low end was +0.1 %).
        for more in range(places, max(places, 2) + 1):
            text = f"{x:+.{more}f}"
            if float(text) != 0 or x == 0:  # an exact zero is said as one
                break
        return text

    text = f"{signed_rounded(pct, places)}%"
    if low is not None and high is not None:
        text += f" [{bound(low)}, {bound(high)}]"
    return text


def format_detectable(pct: float) -> str:
    """The smallest change a comparison catches, in percent: beyond 1,000 % the digits say
    nothing more than that it catches nothing a user would ship (seen: 16812571.9 %)."""
    if math.isinf(pct):
        return "no estimate"
    return f"{pct:.1f}%" if pct <= 1000 else "over 1,000%"


def relative_spread(samples: Sequence[float]) -> float | None:
    """Sample standard deviation over the mean: the spread carried to every derived figure.

    FLOP/s, epoch and step times are the round time times a constant, so they share its
    relative spread. None with fewer than two samples: one round says nothing about noise.
    """
    if len(samples) < 2:
        return None
    mean = statistics.fmean(samples)
    if mean <= 0:
        return None
    return statistics.stdev(samples) / mean
