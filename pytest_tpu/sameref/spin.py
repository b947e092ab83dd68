"""Idle BLAS threads of one side asleep during the other side's rounds.

OpenBLAS (numpy's and scipy's linear algebra in their wheels) keeps its helper threads spinning
for about 2**28 cycles (a tenth of a second) after each call, so that the next call finds them
awake. In a plain run that is the benchmark's own next round. In a same-job comparison the next
round is the other process's: its helper spins on the core where the other side's helper has to
work, and takes part of that core for the whole round. Measured here (a 200x200 ``np.linalg.svd``,
4.7 ms a call in a plain run, 2 cores): under ``--compare-ref`` 7.8-10 ms a call, rounds 4.7 to
15 ms apart, the smallest change a comparison could catch 17-49 %; and in 10 of 32 sessions of
new-user trial 24 the leading process took about 680 ms a call (a change of +5,700 to +9,900 %
for unchanged code, withdrawn each time at the cost of five pairs of processes). With the spin cut
to 2**20 cycles (about 0.4 ms) on both sides: 4.8-5.0 ms a call, the smallest change caught
0.3-0.6 %, in five sessions of the trial's five benchmarks none of them slow; plain runs took
4.8 ms either way. Within one call the gaps between OpenBLAS's calls are far shorter than that, so
what a round measures is the library as it runs in production; only the tail after the round
changes. (2**4 cycles, the shortest allowed, made each call wake its helper: 6.6 ms.)

So both processes start with ``OPENBLAS_THREAD_TIMEOUT`` set (the head starts itself again with
it, as with its hash seed, and the base inherits it), unless the user set it or its older name
``GOTO_THREAD_TIMEOUT``. A library reads it when it loads, so it is never set in a running
process: where the head cannot start itself again, neither side has it.
"""

from __future__ import annotations

import os

TIMEOUT_ENV = "OPENBLAS_THREAD_TIMEOUT"
USERS_NAMES = (TIMEOUT_ENV, "GOTO_THREAD_TIMEOUT")  # either one is the user's choice
TIMEOUT_EXPONENT = "20"  # 2**20 cycles: about 0.4 ms at 2.5 GHz


def missing() -> dict[str, str]:
    """What the environment of a same-job comparison's processes lacks: the spin limit, unless
    the user chose one."""
    if any(os.environ.get(name) for name in USERS_NAMES):
        return {}
    return {TIMEOUT_ENV: TIMEOUT_EXPONENT}


def describe() -> str:
    """The header's words on the spin limit both sides have, or "" where they have none."""
    for name in USERS_NAMES:
        if os.environ.get(name):
            value = os.environ[name]
            return f"{name}={value} (idle OpenBLAS threads sleep after 2**{value} cycles)"
    return ""
