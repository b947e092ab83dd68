"""Each side's garbage collector scans only what its rounds made, not the process it runs in.

A full collection walks every object the collector tracks, and a process that imported
TensorFlow tracks hundreds of thousands before its first round; when one falls in a round, that
round takes tens to hundreds of milliseconds. Which round, and in which of the two processes,
follows each process's history (the head is the session that started everything, the base a
child), not the code: new-user trial 37's `pedantic(json.loads, setup=...)` of a 260 KB document
read 0.7-0.9 ms a round with one round of 178 ms in the leading process, so that five A/A pairs
read +495, -83, +547, -84 and +446 % as the roles turned (`detects 420 %`, quiet), and it did
not read `passed` in 3 of 3 sessions. With the collector off (`--benchmark-disable-gc`) the same
session passed, its pairs -5.3 to +4.3 %.

So before a benchmark's first round each side freezes what its process holds (``gc.freeze``:
moved out of every generation, in constant time) and thaws it after the test. Collections still
run in the rounds, over what the benchmark made since: its own garbage costs what it costs, on
both sides alike.
"""

from __future__ import annotations

import gc


def freeze() -> None:
    """Move every object the collector tracks now out of its scans, until ``thaw``."""
    gc.freeze()


def thaw() -> None:
    """Give the frozen objects back to the collector (its oldest generation)."""
    gc.unfreeze()
