"""Both sides' threads on the same cores: the cores of a shared machine do not run at one speed.

Left alone, the scheduler keeps each of the two processes on "its" core, and on a virtual
machine two cores can differ by tens of percent (seen here: the same 100 µs function +50 %
slower in one process than in the other, 0-9 % once both ran on one core). Pairing neighbouring
rounds cannot divide that out, because it never changes sides. A multi-threaded benchmark has the
same problem one level down: where TensorFlow's worker threads happen to run differs from process
to process (measured here, a TensorFlow matmul chain in six pairs of processes with identical
code: their ratio had a spread of 1.7-1.9 % with nothing pinned, 2.9 % with only the calling
thread pinned and 0.3-0.4 % with every thread pinned).

So during a benchmark's rounds both sides pin every thread, the same way: the thread that runs
the rounds to the shared core, and the threads of each name (``tf_Compute``, ``python``, ...) one
by one round-robin over the other cores and then that one, the busiest in the benchmark's first
call first (by the CPU time each used in it; threads that did not run keep the order they were
made in, so both sides place them alike). After one pinned round they are placed once more, the
busiest in that round first: the first call's busiest threads are often not the rounds' (an XLA
function's compiling threads, and worker threads that share the name ``python`` and did near-equal
work then), and a placement that put both of its working threads on the calling thread's core ran
at 39 ms a round where the other ran at 22 ms: pairs of processes with identical code differed by
-29 % to +64 % (trial 15). Each thread keeps one core, and the working threads of a pool land on
different cores, so a multi-threaded benchmark keeps its parallelism. Busiest
first matters for a library whose helpers share the calling thread's name and work beside it
(OpenBLAS, OpenMP): taken in the order they were made, idle threads of that name (TensorFlow
makes a few) put numpy's OpenBLAS helper on the calling thread's core, where each waited on the
other, spinning, for whole time slices (measured here: a 120x120 ``a @ a.T`` of 85 us took
11.9 ms a round in both processes; 90-130 us with its helper on the other core).
A benchmark's first runner call is left unpinned, because threads a library creates lazily there
would inherit the calling thread's single core; threads born later are pinned at the next round.
The turns already keep the two sides from running at once, so sharing the cores costs no time.

A benchmark whose calls start threads that do much of its work is let go after its first pinned
round. A thread inherits the cores of the thread that starts it, so one that lives and dies within
a round (a ``tf.data`` iterator's, a compiler's for a function traced anew each call) runs all its
life on the calling thread's one core, beside it, and is never placed: a ``tf.data`` pipeline
built and iterated in each call took about 80 or 150 ms a round pinned, and the first pair of an
A/A session could detect 41 % at the median pinned throughout, 28 % let go and 34 % with neither
side pinned (``experiments/compare_ref/pin_births.py sessions``). Such threads show in the first
pinned round as CPU time the process used that no thread alive at both its ends did (``churn``).
Where they did little of the work, pinning can still hurt or not: Keras's ``model.predict`` ran
some or all of its pinned calls at about twice its unpinned time (which ones varied from process
to process and call to call), ``model.fit`` all at the same; so there untimed calls unpinned and
pinned in turn decide.
Both sides must decide alike (one pinned and the other not reads the pinning as a change of the
code), so each says what its first pinned round showed at its next turn, and from the third round
on both release their threads where either side's did (``sameref.turns``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from pytest_tpu import threads

BUSY_SHARE = 0.1  # of the calling thread's CPU time: less is idle, for placing threads
# Of the process's CPU time in the first pinned round: where threads started or ended within it
# used more, pinning is let go (``Pin.churned``). Code that starts no thread reads below zero (the
# error's side); a tf.data pipeline built and iterated in each call reads 65 %. Not lower: Keras's
# ``model.fit`` starts threads each call that use 3 % of a round, and let go after its second
# round, a first pair detected 21.5 % at the median against 6.6 % pinned throughout
# (``pin_births.py sessions --workload fit``). ``model.predict``'s 6 % lost the other way (17 %
# let go, 46 % pinned): no share tells those two apart ...
CHURN_SHARE = 0.1
# ... but what pinning does to their calls does. Pinned, ``model.predict`` took 160-170 ms a call
# in some calls and 80-90 ms in others, mixed within one process, against 80-100 ms unpinned;
# ``model.fit``'s calls took the same time either way. So where threads started in the first
# pinned round used more than ``SOME_CHURN`` of it, untimed calls in that round's turn, unpinned
# and pinned in turn (``PROBE_PAIRS`` of each, fewer where they would take over
# ``PROBE_BUDGET_S``), decide: let go where the pinned ones took ``SLOWED`` times the unpinned
# ones' time or more. One call of each would miss ``model.predict`` about half the time.
SOME_CHURN = 0.01
SLOWED = 1.2
PROBE_PAIRS = 3
PROBE_BUDGET_S = 1.0
CORE_ENV = "PYTEST_TPU_REF_CORE"  # the shared core, in the base session's environment


def shared_core() -> int | None:
    """The core both sides use (the last one this process may run on), or None where threads
    cannot be pinned or there is only one core."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(getter(0))
    return allowed[-1] if len(allowed) > 1 else None


def core_from_env() -> int | None:
    """The core the head chose, as the base session reads it."""
    value = os.environ.get(CORE_ENV, "")
    return int(value) if value.isdigit() else None


class Pin:
    """Pins every thread of this process from a benchmark's second round on (the calling thread
    to ``core``, the others spread over the cores), and lets them go from the third where either
    side's second started threads that did much of its work, or some work and calls ran slower
    pinned than not (``churned``); ``release`` gives each back what it had."""

    def __init__(self, core: int | None) -> None:
        self.core = core
        self.calls = 0
        self.saved: dict[int, set[int]] = {}  # thread id -> its cores before pinning
        self.named: dict[str, int] = defaultdict(int)  # threads of each name pinned so far
        self.cores: list[int] = []
        self.born_pinned: set[int] = set()  # threads made while this process was pinned
        self.used: dict[int, int] = {}  # CPU time of each thread before the first call, in ns
        self.process_ns = 0  # the process's CPU time when ``used`` was read
        # Whether threads started or ended within the first pinned round did much work, or some
        # and pinning slowed the calls: a reason to let go. None until that round is over
        # (``after_round``).
        self.churned: bool | None = None
        self.let_go = False  # released for good after the second round: see the module's text

    def after_round(self, probe: Callable[[], float] | None = None) -> None:
        """After a runner call, in its turn: what the first pinned round showed. ``probe`` makes
        one more, untimed call and returns its time, where the benchmark's calls may be repeated.
        """
        if self.core is None or self.calls != 2 or self.churned is not None:
            return
        share = self._churn()
        if share > CHURN_SHARE:
            self.churned = True
        elif share > SOME_CHURN and probe is not None:
            self.churned = self._slowed(probe)
        else:
            self.churned = False

    def _churn(self) -> float:
        """The share of the CPU time the process used since ``used`` was read that the threads
        alive then and now did not: the work of threads born or ended meanwhile.

        The process's clock is read before the threads' here, and after them when ``used`` was
        read, so that work done while the threads are read counts as theirs: the error can only
        hide churn, never make it up."""
        spent = time.process_time_ns() - self.process_ns
        now = {tid: threads.cpu_ns(tid) for tid in threads.ids()}
        kept = sum(used - self.used[tid] for tid, used in now.items() if tid in self.used)
        return (spent - kept) / spent if spent > 0 else 0.0

    def _slowed(self, probe: Callable[[], float]) -> bool:
        """Whether calls took ``SLOWED`` times longer pinned than unpinned, in untimed calls of
        each in turn, unpinned first; the threads are placed as before the first when done. A
        call that raises ends the trial, pinned: the timed rounds show the user what it raised.
        """
        pinned = self._placement()
        every = self.saved.get(threading.get_native_id(), set())
        alone = {tid: self.saved.get(tid) or every for tid in pinned}
        took = {False: 0.0, True: 0.0}
        try:
            for _ in range(PROBE_PAIRS):
                for placement, is_pinned in ((alone, False), (pinned, True)):
                    _place(placement)
                    took[is_pinned] += probe()
                if sum(took.values()) > PROBE_BUDGET_S:
                    break
        except Exception:  # an untimed call of ours must not fail the test
            return False
        finally:
            _place(pinned)
        return took[True] >= SLOWED * took[False]

    @staticmethod
    def _placement() -> dict[int, set[int]]:
        """The cores of every thread of this process, as they are now."""
        now = {}
        for tid in threads.ids():
            with contextlib.suppress(OSError):  # ended meanwhile
                now[tid] = os.sched_getaffinity(tid)
        return now

    def before_round(self, other: bool | None = None) -> None:
        """Before a runner call (after its turn): pin, place again, or let go. ``other`` is what
        the other side's first pinned round showed (``churned``), where known."""
        self.calls += 1
        if self.core is None or self.let_go:
            return
        if self.calls >= 3 and (self.churned or other):
            self.release()
            self.let_go = True
            return
        if self.calls < 2:  # what each thread has used before the first call, left unpinned
            self.used = {tid: threads.cpu_ns(tid) for tid in threads.ids()}
            return
        caller = threading.get_native_id()
        if not self.saved:
            try:
                allowed = os.sched_getaffinity(0)
                os.sched_setaffinity(0, {self.core})  # 0: the calling thread, on Linux
            except OSError:  # the core was taken away (a cgroup changed): run unpinned
                self.core = None
                return
            self.saved[caller] = allowed
            ordered = sorted(allowed)
            start = ordered.index(self.core) + 1 if self.core in ordered else 0
            self.cores = ordered[start:] + ordered[:start]  # the shared core comes last
            self._pin_busiest_first(caller)
            return
        if self.calls == 3:  # placed again by a round's work, no longer by the first call's
            self.named.clear()
            self._pin_busiest_first(caller)
            return
        for tid in [tid for tid in threads.ids() if tid not in self.saved]:
            self._pin_other(tid)
            self.born_pinned.add(tid)

    def _pin_busiest_first(self, caller: int) -> None:
        """Pin every thread but ``caller``, the busiest since the last placement first (the
        first call's CPU time at the first, a whole round's at the second), and note what each
        has used by now.

        A thread that used less than ``BUSY_SHARE`` of what the calling thread did counts as
        idle, and idle threads keep the order they were made in, so both sides place them alike:
        ranked by the microseconds a background thread happens to wake for, they were placed
        differently in the two processes, and a 48 µs pure-Python function made 7 % slower read
        -3.8 % to +1.1 % by one pair in 4 of 14 sessions, ``unchanged`` (0 of 14 before the
        clock made those microseconds visible)."""
        now = {tid: threads.cpu_ns(tid) for tid in threads.ids()}
        spent = {tid: used - self.used.get(tid, 0) for tid, used in now.items()}
        floor = BUSY_SHARE * spent[caller] if caller in self.used and caller in now else 0.0
        others = [tid for tid in now if tid != caller]
        # Stable: idle threads stay in the order they were made.
        others.sort(key=lambda tid: spent[tid] if spent[tid] >= floor else 0, reverse=True)
        if len(self.saved) > 1:  # placed before: threads new since were born pinned
            self.born_pinned.update(tid for tid in others if tid not in self.saved)
        for tid in others:
            self._pin_other(tid)
        self.used = now
        self.process_ns = time.process_time_ns()  # after the threads': see _churn

    def _pin_other(self, tid: int) -> None:
        name = threads.name(tid)
        core = self.cores[self.named[name] % len(self.cores)]
        self.named[name] += 1
        try:
            saved = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {core})
        except OSError:  # the thread ended meanwhile, or may not be moved: leave it
            saved = set()
        self.saved.setdefault(tid, saved)  # placed again: what it had before the first pin

    def release(self) -> None:
        caller = threading.get_native_id()
        every = self.saved.get(caller, set())
        backs = dict(self.saved)
        if every:
            # A thread born of a pinned thread inherited its one core: it gets the caller's.
            # That covers threads born after the last round too (a pool grown in the test body).
            backs |= {tid: every for tid in threads.ids() if tid not in self.saved}
            backs |= dict.fromkeys(self.born_pinned, every)
        _place(backs)
        self.saved.clear()
        self.named.clear()
        self.born_pinned.clear()


def _place(cores: dict[int, set[int]]) -> None:
    """Give each thread its cores (none: leave it as it is)."""
    for tid, back in cores.items():
        if back:
            with contextlib.suppress(OSError):  # ended, or a core taken away meanwhile
                os.sched_setaffinity(tid, back)
