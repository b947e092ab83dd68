"""Every timed round of a benchmark under ``--compare-ref``, on either side: its turn, its pin,
and where a short call needs it, an untimed call before it.

Both sides wrap their ``BenchmarkFixture`` the same way (``wrap_runner``), so a round is taken,
placed and warmed alike in the head's process and the base's.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable
from typing import Any

from pytest_tpu.sameref import collector, layout, resolve
from pytest_tpu.sameref.pinning import Pin
from pytest_tpu.sameref.sizing import size_rounds_on_turns
from pytest_tpu.timing import size_rounds_on_a_steady_call

# Calls shorter than this get an untimed call before most timed ones in their turn: the other
# side's round has just left the caches cold and this side's thread pools asleep. A 34 µs numpy
# function made 30 % slower (plain runs) read +23 to +27 % without it, +28 to +29 % with it. Up to
# 1 ms until new-user trial 36: a 5 ms Keras inference call (a Conv1D made wider, +17 % alternated
# in one process) read +5.0 to +7.7 % in five same-job sessions, caught at 10 % in 2; with an
# untimed call up to 10 ms, +7.1 to +10.0 %, caught in 4 (the same calls one at a time after a
# 6 ms sleep, pinned as here: +5.3 %; back to back, pinned: +9.0 %). A 1.2 ms Keras MLP step read
# the same either way (trial 32: +9.3 to +10.3 % against +9.6 to +11.3 %).
WARM_BELOW_S = 0.01
# ... but not before every one: with an untimed call before each timed call, the timed calls were
# every other call, and a function slow on every 40th call (a tf.function retracing) was slow only
# in untimed calls -- `unchanged`, "detects 1.4 %", on a mean 57 % slower (trial 19). A round has
# its untimed call where this sequence says so, the same for the i-th round on both sides (so a
# pair is warm or cold on both), so which calls are timed no longer follows their count.
WARM_SHARE = 0.75
_SEQUENCE = random.Random(20261125)  # one generator: its draws, not its first draw repeated
_WARM_TURNS = tuple(_SEQUENCE.random() < WARM_SHARE for _ in range(4096))


def wrap_runner(
    fixture: Any,
    take_turn: Callable[[bool | None], bool],
    pin: Pin,
    factor: float,
    settle: Callable[[float], float],
    fewest: int = 0,
) -> None:
    """Before every round of one BenchmarkFixture instance: wait for the turn, then pin.

    ``take_turn`` is given what this side's first pinned round showed (``Pin.churned``) and
    returns whether either side's made it want to let go (``turns``).

    ``factor`` times the rounds: more in a session that resolves rows the first pair could not,
    fewer in a new pair that checks what a first pair resolved far finer than the threshold;
    ``fewest``, where known, is how many rounds the session's first pair paired (``nested``).
    ``settle`` makes both sides size ``benchmark(fn)``'s rounds alike (``sizing``).
    """
    layout.shuffle()  # before the test's first round, on each side: see layout.py
    resolve.scale_rounds(fixture, factor, fewest)
    size_rounds_on_a_steady_call(fixture)  # innermost: its doubled first call takes one turn
    # The hand-overs count (a 75 µs function's round costs more), and both sides run the head's
    # number of rounds.
    size_rounds_on_turns(fixture, settle)
    original = getattr(fixture, "_make_runner", None)
    if not callable(original):
        return
    same_arguments = _pedantic_arguments_repeat(fixture)
    # The previous call's time, across runners (pedantic makes one per round): the calibrating
    # call and the first round are never doubled. And this side's count of runner calls.
    last = [math.inf]
    count = [0]

    def make_runner(function: Any, args: Any, kwargs: Any) -> Any:
        if not count[0]:  # before the first round (and its turn): see collector.py
            collector.freeze()
        runner = original(function, args, kwargs)
        # A call may be made twice only on arguments a call does not use up: benchmark(fn)'s, and
        # pedantic's without a setup (which may make arguments one call consumes) or a teardown
        # (which may expect one call before it).
        plain = str(getattr(fixture, "_mode", "")).startswith("benchmark(")
        repeatable = plain or same_arguments == [True]

        def taking_turns(*call_args: Any) -> Any:
            pin.before_round(take_turn(pin.churned))
            count[0] += 1
            if repeatable and last[0] < WARM_BELOW_S and warm_turn(count[0]):
                runner(*call_args)  # untimed: warms the caches the other side's round took
            timed = runner(*call_args)  # pedantic's single call: (duration, result)
            last[0] = seconds(timed)
            pin.after_round((lambda: seconds(runner(*call_args))) if repeatable else None)
            return timed

        return taking_turns

    fixture._make_runner = make_runner


def seconds(timed: Any) -> float:
    """A runner call's duration: pedantic's runner returns it with the call's result."""
    return float(timed[0] if isinstance(timed, tuple) else timed)


def warm_turn(index: int) -> bool:
    """Whether this side's ``index``-th runner call gets an untimed call before it."""
    return _WARM_TURNS[index % len(_WARM_TURNS)]


def _pedantic_arguments_repeat(fixture: Any) -> list[bool]:
    """A box that says, once ``benchmark.pedantic`` is called, whether every round gets the same
    arguments and nothing runs between rounds (no ``setup``, no ``teardown``)."""
    box: list[bool] = []
    raw = getattr(fixture, "_raw_pedantic", None)
    if not callable(raw):
        return box

    def raw_pedantic(*args: Any, **kwargs: Any) -> Any:
        from pytest_tpu.measure import USER_SETUP_ATTR

        try:
            given = inspect.signature(raw).bind_partial(*args, **kwargs).arguments
        except TypeError:  # pytest-benchmark says what is wrong with the call
            return raw(*args, **kwargs)
        setup = given.get("setup")
        setup = getattr(setup, USER_SETUP_ATTR, setup)  # a device test's, under our bookkeeping
        box[:] = [setup is None and given.get("teardown") is None]
        return raw(*args, **kwargs)

    fixture._raw_pedantic = raw_pedantic
    return box
