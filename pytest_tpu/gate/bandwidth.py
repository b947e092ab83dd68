"""How fast the machine copied memory while a benchmark ran: a host that moves, measured.

On a shared virtual machine other tenants use the host's caches and memory bus without taking
any CPU time this guest can see (``/proc/stat`` shows no steal, ``contention`` reads 0.0 cores),
and the calibration kernel, small enough to stay in cache, runs as fast as ever. Keras training
steps do not: in g36 (quiet, this project's 2-core VM) five runs saved within 2.5 minutes agreed
within 5 %, the sessions of the next 25 minutes read the unchanged CNN's steps a median 17 %
slower (up to +57 %) while the kernel did not follow, and the gate failed unchanged code in 4 of
160 rows. In fresh processes on the same VM (``experiments/gate/host_probe.py``), the time of
one copy of a buffer larger than the last-level cache followed the CNN's steps across
processes (correlation 0.8, the steps moving about twice as much) where the kernel did not
(-0.3 to 0.3).

So around each benchmark's rounds the plugin times a few such copies (a few milliseconds each),
and each saved run keeps their location (``memory_copy`` in its summary). A slowdown measured
while copies ran slower than the saved runs allow (their between-session spread, as for any
benchmark, at ``MACHINE_CONFIDENCE``), or an improvement while they ran faster, cannot be told
from the machine, where it is no more than ``FOLLOWS`` times what the copies moved: the gate says
``inconclusive`` and why, instead of blaming the code. How much a given benchmark follows the
copies is not known from one session, so such drift holds back the verdict of any benchmark;
one that stays in cache pays for that in detection, never in a wrong verdict.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pytest_tpu.gate.model import MACHINE_CONFIDENCE
from pytest_tpu.gate.stats import Change, Estimate, change, estimate, lower_mean

CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
LEAST_BYTES = 64 * 2**20  # twice this machine's 32 MiB last-level cache
MOST_BYTES = 512 * 2**20  # enough to leave any cache; the copy stays under a second
GROUPS = 2  # groups of copies before the rounds, and as many after them
COPIES = 3  # copies a group; its time is the fastest (one copy that met a burst reads 2.4x)
GIB = 2**30
LEAST_SAVED = 2  # saved runs that measure how much the copies vary between sessions
# How many times the copies' change a benchmark's may be and still be the host's: Keras training
# steps moved about twice as much as the copies across processes (host_probe.py); twice that
# allows for work that leans on the caches more, which the copies cannot show.
FOLLOWS = 4.0


@cache
def buffer_bytes() -> int:
    """Twice the largest CPU cache the kernel reports, within ``LEAST_BYTES``..``MOST_BYTES``:
    a copy that size goes to memory, not to a cache."""
    largest = 0
    for size_file in CACHES.glob("index*/size"):
        try:
            text = size_file.read_text(encoding="ascii").strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            largest = max(largest, int(digits) * scale)
    return min(MOST_BYTES, max(LEAST_BYTES, 2 * largest))


def copy_groups(groups: int = GROUPS, copies: int = COPIES) -> list[float]:
    """Seconds per GiB of ``groups`` groups of ``copies`` copies of a buffer larger than the
    caches, each group's fastest, in order.

    The fastest of a group, because single copies here took 2.4 times as long now and then, a
    few in a row: a burst that would make the run's location as noisy as it is. Fresh buffers
    each time, freed after: at this size numpy maps them from the kernel and unmaps them on
    release, so the benchmark's own memory figures and the allocator it uses are as they would
    be without this. The first copy touches the pages and is not timed. Nothing (``[]``) where
    the buffers cannot be had.
    """
    import numpy as np

    try:
        source = np.ones(buffer_bytes() // 4, dtype=np.float32)
        target = np.empty_like(source)
    except MemoryError:  # a machine that cannot spare it: no copies, and nothing held back
        return []
    try:
        np.copyto(target, source)
        fastest = []
        for _ in range(groups):
            times = []
            for _ in range(copies):
                started = time.perf_counter()
                np.copyto(target, source)
                times.append(time.perf_counter() - started)
            fastest.append(min(times) * GIB / source.nbytes)
        return fastest
    finally:
        del source, target


class Probe:
    """Copies timed before a benchmark's rounds; ``finish`` times as many after them."""

    def __init__(self) -> None:
        self.before = copy_groups()

    def finish(self) -> Estimate | None:
        """The location of all the groups (seconds per GiB) and its uncertainty."""
        return estimate([*self.before, *copy_groups()], lower_mean)


def explains(
    saved: Sequence[Estimate | None], now: Estimate | None, found: Change, slower: bool
) -> str:
    """Why the change ``found`` cannot be told from the host's memory speed, or "".

    ``saved`` and ``now`` are the copies' locations in each saved run and in this one. The
    copies must have moved the way ``found`` did at ``MACHINE_CONFIDENCE``, against their
    between-session spread measured in at least ``LEAST_SAVED`` saved runs, and by enough:
    ``found``'s nearer bound no further out than ``FOLLOWS`` times the copies' change (a host
    whose copies ran 10 % slower does not explain a benchmark 20 times slower). Nothing where
    any run was not measured (a baseline saved before this was recorded).

    The copies' change, not the far end of its interval: from two or three saved runs that
    interval spans t with one or two degrees of freedom, and its far end explained anything.
    (Session 46, CI: copies +40.2 %, 98 % sure, from two saved runs held back a pure-Python
    function made 20 times slower, +1811 % [+523, +5765]; copies of unchanged code read -7 to
    +16 % from one fresh process to the next here, quiet.) ``FOLLOWS`` already allows twice the
    follow that was measured.
    """
    moved = copies_change(saved, now)
    if moved is None:
        return ""
    if slower:
        sure, far, near = moved.p_slower, math.log1p(moved.estimate), math.log1p(found.low)
    else:
        sure, far, near = 1 - moved.p_slower, -math.log1p(moved.estimate), -math.log1p(found.high)
    if sure < MACHINE_CONFIDENCE or near > FOLLOWS * far:
        return ""
    way, told = ("slower", "more slowly") if slower else ("faster", "faster")
    return (
        f"the machine copied memory {told} than in the saved runs ({moved.estimate:+.1%} a copy "
        f"larger than the CPU caches, {sure:.0%} sure): a {way} time this size cannot be told "
        "from that (other tenants of a shared host slow memory-bound work without using this "
        "machine's CPUs; Keras steps moved about twice as much as such a copy here); compare "
        "when the machine is as it was when the baseline was saved, or use --compare-ref"
    )


def copies_change(saved: Sequence[Estimate | None], now: Estimate | None) -> Change | None:
    """How much slower the copies ran now than in at least ``LEAST_SAVED`` saved runs, or None
    where that is not measured (too few saved runs, a run saved before copies were timed)."""
    if now is None or len(saved) < LEAST_SAVED or any(run is None for run in saved):
        return None
    return change([run for run in saved if run is not None], now)
