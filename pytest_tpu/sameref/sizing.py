"""``benchmark(fn)``'s rounds sized on what a round costs the session, turns included.

pytest-benchmark gives ``benchmark(fn)`` as many rounds as fit ``--benchmark-max-time`` at the
duration of one calibrating call. Taking turns adds a fixed cost to every round: the hand-over
between the two processes and the pinning, about 60 µs a turn on this project's VMs. For a
benchmark of a few milliseconds that is nothing; for a 75 µs function it more than doubles what a
round costs, and a same-job session of such functions took about 5.9 times a plain run (13,000
rounds a side, each round and hand-over about 270 µs of the pair's time).

So where the calibrating call is short, a few more calls are made through the turns (the base makes
them too: both sides size alike) and the rounds are sized on their wall time: one head call and one
base call, with the hand-overs, take ``W`` between two of this side's calls (the median over the
probes), and each side gets ``max-time`` of its half of that. The probe calls are not recorded,
like the calibrating call; they also warm the function up. Where a call takes a few milliseconds
or more, the turns' cost is a percent or less of it and nothing is probed.

Both sides size their rounds on the head's seconds, probe calls included
(``size_rounds_on_turns``'s ``settle``): each side's own calibrating call is one call, on a shared
machine a few percent to twice slower than the next, and a round only counts where the other side
ran one beside it. Sized apart, the two sides of a re-measurement meant to take 40 rounds of a
Keras CNN took 34 and 43 (34 paired), of one meant to take 20, 15 and 13; the rounds past the
other side's were run and thrown away (quiet, session 85). Where only the seconds were the head's
and each side probed as many times as its own calibrating call said, the new pairs of a 75 µs
numpy function still ran 347-833 head rounds against 373-872 base ones (beside a neighbour, r111n).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

PROBE_SHARE = 0.02  # of --benchmark-max-time, at most, spent on probe calls
MOST_PROBES = 50
FEWEST_PROBES = 4  # fewer would fit: the call is long enough for the turns not to matter


def probes(duration: float, max_time: float) -> int:
    """How many probe calls to make after a calibrating call of ``duration`` seconds; an even
    number (a head call waits for two base calls, then for none, in ABBA), or 0 for none."""
    if not duration > 0:
        return 0
    count = min(MOST_PROBES, math.floor(PROBE_SHARE * max_time / duration))
    count -= count % 2
    return count if count >= FEWEST_PROBES else 0


def size_rounds_on_turns(fixture: Any, settle: Callable[[float], float]) -> None:
    """Make one pytest-benchmark fixture instance size ``benchmark(fn)``'s rounds on the
    turn-inclusive time of its calls, alike on both sides (see the module's docstring).

    ``settle`` takes this side's seconds and returns those to go on: on the head it keeps them
    for the base and returns them; on the base it returns the head's latest, where its turns
    brought them. It is asked twice: for the number of probe calls, so that both sides make as
    many (the head's calibrating call takes the first turn, so the base has its seconds before
    its own probes), and for the seconds the rounds are sized on (the head's last probe comes
    before the base's, so the base has the head's final seconds by then)."""
    original: Callable[[Any], tuple[float, int, Any]] | None = getattr(
        fixture, "_calibrate_timer", None
    )
    if not callable(original):
        return

    def calibrate(runner: Callable[[Any], float]) -> tuple[float, int, Any]:
        duration, iterations, loops_range = original(runner)
        count = probes(settle(duration), float(getattr(fixture, "_max_time", 0.0)))
        if count:
            ends = [time.perf_counter()]
            for _ in range(count):
                runner(loops_range)
                ends.append(time.perf_counter())
            duration = max(duration, _share(ends))
        return settle(duration), iterations, loops_range

    fixture._calibrate_timer = calibrate


def _share(ends: list[float]) -> float:
    """This side's half of a typical cycle from the times its probe calls ended.

    A cycle is two calls of each side (ABBA), so two of this side's calls. The median cycle, not
    the mean, so that one stall in one side's probes cannot shrink that side's rounds alone. (In a
    new-user trial on a loaded machine, sized on the mean, one side ran about a tenth of the
    other's rounds in 2 of 9 sessions, and the other side's rounds beyond them went unpaired: 187
    pairs of 1,921 head rounds. The cause was not found; 16 sessions of the same benchmark, quiet,
    before and after this change, paired 99-100 % of the head's rounds.)
    """
    cycles = [ends[i + 2] - ends[i] for i in range(0, len(ends) - 2, 2)]
    return statistics.median_low(cycles) / 4
