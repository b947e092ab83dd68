"""The timing helpers: sync before the clock is read, cold call kept apart from steady rounds.

A scripted clock makes every duration exact, so nothing here depends on wall-clock speed.
"""

from __future__ import annotations

import pytest

from pytest_tpu.timing import Measurement, SyncedRounds, measure, median, timed


class ScriptedClock:
    """Advances by the next step on every reading and logs each reading in ``events``."""

    def __init__(self, events: list[str], steps: list[float]) -> None:
        self.events, self.steps, self.now = events, list(steps), 0.0

    def __call__(self) -> float:
        self.events.append("clock")
        self.now += self.steps.pop(0) if self.steps else 1.0
        return self.now


def test_timed_syncs_before_the_clock_is_read():
    events: list[str] = []
    now = ScriptedClock(events, [0.0, 2.5])
    result, seconds = timed(
        lambda: events.append("work") or 7, sync=lambda: events.append("sync"), now=now
    )
    assert events == ["clock", "work", "sync", "clock"]
    assert (result, seconds) == (7, 2.5)


def test_synced_rounds_keep_the_cold_call_apart():
    events: list[str] = []
    # readings come in (start, end) pairs: durations 5, 1, 2, 3, 4
    now = ScriptedClock(events, [0, 5, 0, 1, 0, 2, 0, 3, 0, 4])
    runner = SyncedRounds(lambda: None, now=now)
    for _ in range(5):
        runner()
    assert runner.cold_s == 5
    assert runner.steady(3) == [2, 3, 4]
    assert runner.steady(10) == [1, 2, 3, 4]
    assert runner.steady(0) == []


def test_synced_rounds_without_a_call_have_no_cold_time():
    with pytest.raises(ValueError, match="no call"):
        _ = SyncedRounds(lambda: None).cold_s


def test_measure_discards_warmup_rounds():
    calls: list[int] = []
    now = ScriptedClock([], [0, 9, 0, 8, 0, 1, 0, 2, 0, 3])
    result = measure(lambda: calls.append(1), rounds=3, warmup=1, now=now)
    assert len(calls) == 1 + 1 + 3
    assert result == Measurement(cold_s=9, samples=(1, 2, 3))
    assert result.median_s == 2


@pytest.mark.parametrize(("rounds", "warmup"), [(0, 1), (1, -1)])
def test_measure_rejects_empty_or_negative_counts(rounds, warmup):
    with pytest.raises(ValueError, match="rounds"):
        measure(lambda: None, rounds=rounds, warmup=warmup)


@pytest.mark.parametrize(
    ("values", "expected"), [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0), ([4.0, 1.0, 2.0, 3.0], 2.5)]
)
def test_median(values, expected):
    assert median(values) == expected


def test_median_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no values"):
        median([])
