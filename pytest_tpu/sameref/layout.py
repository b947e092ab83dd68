"""Each side of a same-job comparison measures a benchmark on a heap laid out at random.

Where a process's memory allocator puts what a benchmark allocates depends on everything the
process did before, and that is not the same in the two processes: the head is the session that
started everything, the base a child. Code that allocates on each call can run at another speed
in each -- the same way in every pair made the same way, so new pairs of processes agreed with the
first and confirmed a slowdown of unchanged code. (That the allocator is the whole cause is not
shown; that the offset came with the roles and stayed through everything below is.)
(Measured here: a 50 µs tokenizer, ``re.findall`` and dicts, read +7 to +16 % in 35 of 39 A/A
same-job sessions, the head slower, the other four +0.5 to +3.7 %; its ``re.findall`` alone +10
to +19 %; the same function in a pedantic test, a dict loop of ints and a numpy function did not.
A fixed hash seed, the garbage collector off, every thread on one core, no untimed warm calls and
glibc's trim and mmap thresholds fixed all left it in place. Three new pairs agreed: the gate
failed unchanged code, exit 6, "99.7 % sure". New pairs now swap the roles, ``swap``.)

So before each benchmark's first round, each side of every pair (first and new alike) frees the
last benchmark's blocks, allocates blocks of random sizes and keeps a random half of them: the
holes they leave and the addresses of what follows differ from process to process and from test
to test. An offset that comes from layout then differs from pair to pair, and the spread between
pairs shows it instead of repeating it. (With it, the tokenizer's first pairs read +8.0, +7.3,
+1.8 and -1.6 %, its ``re.findall`` -2.9, +14.8, +2.9 and +5.1 %: the lottery is drawn again each
time. It does not remove a part that stays with the roles: in one of three gated A/A sessions
five pairs still put the tokenizer at +6.4 % [+0.9, +12.1] and failed it.)
"""

from __future__ import annotations

import random

BLOCKS = 128
SMALLEST = 513  # above CPython's small-object allocator: these go to the C allocator
LARGEST = 65_536
_KEPT: list[bytearray] = []  # alive to the end of the process


def shuffle() -> None:
    """Free the blocks of the last call, allocate ``BLOCKS`` blocks of random sizes (spread
    evenly on the log scale) and keep a random half of them."""
    draw = random.SystemRandom()
    _KEPT.clear()
    sizes = [round(SMALLEST * (LARGEST / SMALLEST) ** draw.random()) for _ in range(BLOCKS)]
    blocks = [bytearray(size) for size in sizes]
    _KEPT.extend(block for block in blocks if draw.random() < 0.5)
