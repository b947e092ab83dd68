"""The validators of pytest-tpu's option values, and the bounds they check.

Each is an argparse ``type=`` function (``options`` gives it to the option and its ini twin), so a
bad value is a usage error (exit code 4) that names the option, the value and the valid values.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass

KINDS: tuple[str, ...] = ("cpu", "gpu", "tpu")
SELECTORS: tuple[str, ...] = ("auto", "all")
GATED_METRICS: tuple[str, ...] = ("time", "memory", "compile")
# Upper bounds, each a usage error above it rather than a hang or a crash later:
# - a TPU that has not answered in a day will not; larger values overflow the process timers.
MAX_TPU_TIMEOUT = 24 * 3600.0
# - the first step over N logical CPUs costs about N**2 (measured: 64 -> 0.3 s, 256 -> 4 s,
#   1024 -> 20 s for one all-reduce, before any model compiles; 100000 never finished), and no
#   CPU has more than a few hundred cores to give them, so more replicas measure nothing real.
MAX_VIRTUAL_CPUS = 256
# - each worker is a whole Python and TensorFlow process (hundreds of MB, seconds of CPU to
#   start) on this one machine: 1000 ran out of processes (BlockingIOError) before any test.
MAX_WORKERS = 64
MAX_BASELINE_HISTORY = 100
# --compare-ref: at most this many times its rounds for a row measured again (``sameref.resolve``).
MAX_MORE_ROUNDS = 16

# Baseline names become file names: letters, digits, dot, dash, underscore; no leading dot.
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}")


@dataclass(frozen=True)
class AcceleratorSelection:
    """What ``--accelerator`` asked for: ``auto``, ``all`` or an explicit tuple of kinds."""

    mode: str  # "auto" | "all" | "explicit"
    kinds: tuple[str, ...]

    def __str__(self) -> str:
        return self.mode if self.mode != "explicit" else ",".join(self.kinds)


def parse_accelerator(value: str) -> AcceleratorSelection:
    """Parse ``cpu,gpu``, ``all`` or ``auto``; unknown kinds list the valid ones."""
    items = [part.strip().lower() for part in value.split(",") if part.strip()]
    if len(items) == 1 and items[0] in SELECTORS:
        return AcceleratorSelection(items[0], KINDS)
    bad = [item for item in items if item not in KINDS]
    if not items or bad:
        shown = ", ".join(bad) if bad else "(empty)"
        raise argparse.ArgumentTypeError(
            f"unknown accelerator kind {shown}; valid: {', '.join(KINDS)}, "
            f"or one of {', '.join(SELECTORS)}"
        )
    return AcceleratorSelection("explicit", tuple(dict.fromkeys(items)))


def parse_positive_float(value: str) -> float:
    """A number of seconds greater than zero."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0 or number != number or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number of seconds")
    return number


def parse_positive_int(value: str) -> int:
    """A whole number of at least 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return number


def parse_history(value: str) -> int:
    """How many runs a baseline keeps: 1 to ``MAX_BASELINE_HISTORY``."""
    number = parse_positive_int(value)
    if number > MAX_BASELINE_HISTORY:
        raise argparse.ArgumentTypeError(
            f"{value!r} is more than {MAX_BASELINE_HISTORY} runs; a baseline keeps 1 to "
            f"{MAX_BASELINE_HISTORY}"
        )
    return number


def parse_int_up_to(upper: int, why: str) -> Callable[[str], int]:
    """A validator for a whole number from 1 to ``upper``; ``why`` explains the bound."""

    def parse(value: str) -> int:
        number = parse_positive_int(value)
        if number > upper:
            raise argparse.ArgumentTypeError(f"{value!r} is more than {upper}: {why}")
        return number

    parse.__name__ = "bounded_int"
    return parse


parse_more_rounds = parse_int_up_to(
    MAX_MORE_ROUNDS, "a re-measurement that long is a run of its own"
)


def parse_tpu_timeout(value: str) -> float:
    """Seconds for the TPU probe, at most ``MAX_TPU_TIMEOUT``."""
    number = parse_positive_float(value)
    if number > MAX_TPU_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"{value!r} is more than {MAX_TPU_TIMEOUT:g} seconds (a day): a TPU that has not "
            "answered by then will not"
        )
    return number


parse_virtual_cpus = parse_int_up_to(
    MAX_VIRTUAL_CPUS, "set-up grows with the square of the count and no CPU has that many cores"
)
parse_workers = parse_int_up_to(
    MAX_WORKERS, "each worker is a whole TensorFlow process on this machine"
)


def parse_percent(value: str) -> float:
    """``5%``, ``5`` or ``0.5%``: a percentage above 0 and below 100. A bare number under 1 is
    refused: it reads as a fraction as readily as a percentage (trial 39: ``0.05`` gated at
    0.05 %, a hundred times stricter than the 5 % meant), and the ``%`` says which."""
    text = value.strip()
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            # "between 0 and 100" read as if 0 were allowed (trial 29: "--fail-on-regression=0").
            f"{value!r} is not a percentage; expected a number above 0 and below 100, such as 5%"
        ) from None
    if not 0 < number < 100:
        raise argparse.ArgumentTypeError(
            f"{value!r} is out of range; expected a percentage above 0 and below 100, such as 5%"
        )
    if number < 1 and not text.endswith("%"):
        raise argparse.ArgumentTypeError(
            f"{value!r} is ambiguous: a fraction ({number:g} = {number * 100:g}%) or a percentage "
            f"({number:g}%)? Write it with %, such as {number * 100:g}% or {number:g}%"
        )
    return number


def parse_thresholds(value: str) -> dict[str, float]:
    """``5%`` (time) or ``time:5%,memory:2%,compile:25%``: a percentage per gated metric."""
    thresholds: dict[str, float] = {}
    for part in (item.strip() for item in value.split(",")):
        metric, sep, pct = part.rpartition(":")
        metric = metric.strip().lower() if sep else "time"
        if metric not in GATED_METRICS:
            raise argparse.ArgumentTypeError(
                f"{metric!r} in {value!r} is not a gated metric; valid: {', '.join(GATED_METRICS)}"
            )
        if metric in thresholds:
            raise argparse.ArgumentTypeError(f"{metric!r} appears twice in {value!r}")
        try:
            thresholds[metric] = parse_percent(pct)
        except argparse.ArgumentTypeError as exc:
            if "not a percentage" not in str(exc):  # a number: no other form was meant
                raise
            # Say the other form too: a user who wrote "abc" may have meant one per metric.
            raise argparse.ArgumentTypeError(
                f"{exc}; or one per metric, such as time:5%,memory:10% "
                f"(metrics: {', '.join(GATED_METRICS)})"
            ) from None
    return thresholds


def parse_choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    """A validator accepting exactly one of ``choices``."""

    def parse(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not valid; choose one of: {', '.join(choices)}"
            )
        return value

    parse.__name__ = "choice"
    return parse


def parse_baseline_name(value: str) -> str:
    """A baseline name that is safe as a file name inside the baseline directory."""
    # fullmatch: "$" would also match before a trailing newline, letting "abc\n" through.
    if not _NAME_RE.fullmatch(value) or ".." in value:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a valid baseline name; use letters, digits, '.', '-' and '_' "
            "(no path separators, no '..', at most 100 characters)"
        )
    return value


def parse_speedup_reference(value: str) -> str:
    """One device kind."""
    return parse_choice(KINDS)(value.lower())
