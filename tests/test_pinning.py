"""When a same-job session lets a benchmark's threads go (``sameref.pinning``), on real threads,
clocks and cores: each trial in a process of its own (pytester), whose only threads are its own.
(Run in this suite's process after the other timed tests, the trials read too little churn to try
untimed calls: a round's churn is a share of the process's CPU time, which threads that other
tests leave behind can share.)"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning a thread needs Linux and two cores",
)

TRIAL = '''
import hashlib, os, threading, time

from pytest_tpu.sameref.pinning import Pin, shared_core

BLOCK = bytes(1 << 16)  # hashed without the GIL, so two threads can hash at once
EVERY, CORE = os.sched_getaffinity(0), {{shared_core()}}


def work(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(BLOCK).digest()


def call(own_s, helper_s):
    """``own_s`` of work beside a thread it starts that does ``helper_s``; the call's time."""
    start = time.perf_counter()
    helper = threading.Thread(target=work, args=(helper_s,))
    helper.start()
    work(own_s)
    helper.join()
    return time.perf_counter() - start


def first_pinned_round(helper_s, probe):
    """A Pin after an unpinned call and a pinned one of 20 ms whose helper does ``helper_s``,
    with ``probe`` as its untimed calls; and the calling thread's cores in each of those."""
    pin, seen = Pin(shared_core()), []

    def watched():
        seen.append(os.sched_getaffinity(0))
        return probe()

    pin.before_round()
    call(0.02, helper_s)
    pin.before_round()  # the first pinned round
    call(0.02, helper_s)
    pin.after_round(watched)
    return pin, seen


def test_trial():
{body}
'''


def trial(pytester: pytest.Pytester, body: str) -> None:
    indented = "\n".join(f"    {line}" for line in body.strip().splitlines())
    pytester.makepyfile(test_trial=TRIAL.format(body=indented))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:tpu")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("helper_s", "churned"),
    [
        # A tf.data pipeline's threads did 65 % of its rounds' work (pin_births.py shares).
        pytest.param(0.02, True, id="much: let go"),
        pytest.param(0.0, False, id="none: pinned"),
    ],
)
def test_a_round_s_churn_decides_alone_where_it_is_much_or_none(pytester, helper_s, churned):
    body = f"""
pin, seen = first_pinned_round({helper_s}, lambda: call(0.02, 0.02))
pin.release()
assert pin.churned is {churned} and seen == []  # no untimed call
"""
    trial(pytester, body)


def test_some_churn_lets_go_where_untimed_calls_ran_slower_pinned(pytester):
    # model.predict: threads it starts did 6 % of a round, and pinned, its calls took 160-170 ms
    # against 80-100 ms unpinned. Here the untimed calls' helper does as much as the caller: on
    # the calling thread's one core, they take turns.
    trial(
        pytester,
        """
pin, seen = first_pinned_round(0.001, lambda: call(0.02, 0.02))
try:
    assert pin.churned is True
    assert seen == [EVERY, CORE] * 3  # unpinned and pinned in turn, three of each
    assert os.sched_getaffinity(0) == CORE  # placed again as before them
finally:
    pin.release()
assert os.sched_getaffinity(0) == EVERY
""",
    )


def test_some_churn_stays_pinned_where_untimed_calls_ran_as_fast_pinned(pytester):
    # model.fit: threads it starts did 3 % of a round, and its calls took as long pinned.
    trial(
        pytester,
        """
pin, seen = first_pinned_round(0.001, lambda: call(0.02, 0.001))
pin.release()
assert pin.churned is False and len(seen) == 6
""",
    )


def test_an_untimed_call_that_raises_ends_the_trial_pinned_without_failing_the_test(pytester):
    # Only the timed rounds are the user's: what a call of ours raised is not theirs to see.
    trial(
        pytester,
        """
def once_only():
    raise RuntimeError("this resource may be used once")

pin, seen = first_pinned_round(0.001, once_only)
try:
    assert pin.churned is False and len(seen) == 1
    assert os.sched_getaffinity(0) == CORE  # placed again as before it
finally:
    pin.release()
""",
    )
