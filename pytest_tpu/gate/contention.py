"""How much of the CPUs other processes took while a benchmark ran: a busy neighbour, measured.

A calibration kernel measures how fast the machine runs *it*. A neighbour that keeps one of two
cores busy can leave a small single-threaded kernel as fast as ever while a multi-threaded
TensorFlow benchmark loses half its cores (a new user's trial: an unchanged ResNet-style predict
read +85.5 % [+57.7, +118.1] against five quiet saved runs, "99.9 % sure", with the kernel at
-6.6 %). The calibration kernel cannot see that; the operating system's accounting can. Around
each benchmark's rounds the plugin reads how much CPU time the whole machine spent busy
(``/proc/stat``, steal included: time the hypervisor gave to other machines) and how much of it
was this process's (``/proc/self/stat``, every thread); the rest, per second of wall time, is the
cores other processes took. Each saved run keeps that figure (and the cores this process took),
and a slowdown (or an improvement) measured while other processes took more of the CPUs than in
the typical saved run (or less) cannot be told from that: the gate says ``inconclusive`` and
why, instead of blaming the code.
Where ``/proc`` is not there (not Linux), nothing is measured and nothing changes.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

STAT = "/proc/stat"
OWN = "/proc/self/stat"
# More than a quarter of one core beyond what the typical saved run saw. Background daemons take
# hundredths of a core; a neighbour that matters takes a good part of one (trial 18: 1.0).
BEYOND_CORES = 0.25
SHORTEST_S = 0.2  # a shorter span is a few clock ticks: too coarse to tell anything


def _ticks_per_second() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0


def _machine_busy() -> int | None:
    """Clock ticks every CPU has spent busy since boot (user, nice, system, irq, softirq,
    steal), or None where the kernel does not say."""
    try:
        with open(STAT, encoding="ascii") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    except ValueError:
        return None
    return user + nice + system + irq + softirq + steal


def _own_busy() -> int | None:
    """Clock ticks this process (all its threads) has spent on a CPU, or None."""
    try:
        with open(OWN, encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    try:
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Use:
    """The CPU cores (averages over a benchmark's call) other processes took, and this one."""

    others: float
    own: float


@dataclass(frozen=True)
class Meter:
    """A reading taken before a benchmark's rounds; ``use`` gives the cores used since."""

    wall: float
    machine: int | None
    own: int | None

    @classmethod
    def start(cls) -> Meter:
        return cls(time.monotonic(), _machine_busy(), _own_busy())

    def use(self) -> Use | None:
        """Cores other processes and this one took on average since ``start``, or None where
        it cannot be told (no ``/proc``, too short a span)."""
        seconds = time.monotonic() - self.wall
        machine, own = _machine_busy(), _own_busy()
        if machine is None or own is None or self.machine is None or self.own is None:
            return None
        if seconds < SHORTEST_S:
            return None
        span = seconds * _ticks_per_second()
        mine = own - self.own
        others = (machine - self.machine) - mine
        return Use(round(max(0.0, others / span), 3), round(max(0.0, mine / span), 3))


def cores(value: object) -> float | None:
    """``value`` as a number of CPU cores (at least 0), or None: carried on a report, it may
    come from another process (pytest-xdist) as anything JSON holds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def explains(
    saved: Sequence[float | None], now: float | None, slower: bool, cpus: int | None = None
) -> str:
    """Why a change measured now cannot be told from other processes' use of the CPUs, or "".

    ``saved`` and ``now`` are the cores other processes took in each saved run and in this one.
    A slowdown while they took more than the typical saved run saw (its median, by
    ``BEYOND_CORES``), or an improvement while they took that much less. The median, not the
    most: one saved run beside a neighbour leaves the baseline's level to the quiet ones (g43:
    with one of five saved runs at 0.73 cores, unchanged TensorFlow matmul rows beside a
    spinning neighbour failed at +30 to +50 %). What the benchmark itself uses (``Use.own``,
    kept in each saved run) does not tell whether a neighbour hurts it: matmul rows using
    1.0-1.3 cores lost a third of their speed beside one (g43), where a numpy function using
    1.0 did not. Nothing where a run was not measured (a baseline saved before this was
    recorded).
    """
    if now is None or not saved or any(o is None for o in saved):
        return ""
    total = cpus or os.cpu_count() or 1
    typical = statistics.median(o for o in saved if o is not None)
    if slower and now > typical + BEYOND_CORES:
        told = "more"
    elif not slower and now < typical - BEYOND_CORES:
        told = "less"
    else:
        return ""
    way = "slower" if slower else "faster"
    return (
        f"other processes took {now:.2f} of {total} CPU cores while it ran, {told} than "
        f"in the typical saved run ({typical:.2f}): a {way} time cannot be told from that (a "
        "neighbour slows a benchmark in ways a calibration kernel does not show); compare on a "
        "machine as busy as when the baseline was saved, or use --compare-ref"
    )
