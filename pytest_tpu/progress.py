"""Where a long benchmark is: round k of n and the time left, while it runs.

A benchmark that has run for ``SHOW_AFTER`` seconds starts showing one line: on a terminal it
is rewritten in place (at most every ``TTY_INTERVAL`` seconds); in a log (not a TTY) a new line
is printed per round, but at most one every ``LOG_INTERVAL`` seconds, so a thousand short rounds
make a handful of lines. Nothing is shown under ``-q`` or on a pytest-xdist worker, which has no
terminal. The estimate of the time left is the mean time of the rounds so far times the rounds
left (warm-up included: it costs the same).

The counting is pure (``Progress`` takes a clock and a writer); ``terminal_writer`` binds it to
pytest's terminal reporter.
"""

from __future__ import annotations

import shutil
from typing import Any, Protocol

from pytest_tpu.timing import Clock, clock

SHOW_AFTER = 3.0  # seconds: short benchmarks stay silent
TTY_INTERVAL = 0.5
LOG_INTERVAL = 15.0


class Writer(Protocol):
    def __call__(self, text: str, *, in_place: bool, final: bool) -> None: ...


def format_seconds(seconds: float) -> str:
    """``8 s``, ``2 min 05 s``, ``1 h 02 min``: precise enough for an estimate."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Counts the rounds of one benchmark and writes where it is, rate-limited.

    ``rounds``/``warmup`` are the measured and warm-up rounds (``rounds=None`` when
    pytest-benchmark chooses the count itself, as ``benchmark(fn)`` does: then the line counts
    calls and gives no estimate).
    """

    def __init__(
        self,
        label: str,
        write: Writer,
        *,
        rounds: int | None,
        warmup: int = 0,
        tty: bool,
        now: Clock = clock,
    ) -> None:
        self.label, self.write, self.rounds, self.warmup = label, write, rounds, warmup
        self.tty, self.now = tty, now
        self.started: float | None = None
        self.done = 0
        self.shown = False
        self._last_write = float("-inf")

    @property
    def total(self) -> int | None:
        return None if self.rounds is None else self.rounds + self.warmup

    def start(self) -> None:
        if self.started is None:
            self.started = self.now()

    def step(self) -> None:
        """One more round done; write a line if it is time to."""
        self.start()
        self.done += 1
        now = self.now()
        assert self.started is not None
        elapsed = now - self.started
        interval = TTY_INTERVAL if self.tty else LOG_INTERVAL
        if elapsed < SHOW_AFTER or now - self._last_write < interval:
            return
        if self.total is not None and self.done >= self.total:
            return  # the last round: ``finish`` says so
        self._last_write = now
        self.shown = True
        self.write(self.describe(elapsed), in_place=self.tty, final=False)

    def describe(self, elapsed: float) -> str:
        """``test_x[cpu]: round 3/10 (warm-up done), 12 s, about 28 s left``."""
        total = self.total
        if total is None:
            return f"{self.label}: call {self.done}, {format_seconds(elapsed)}"
        if self.done <= self.warmup:
            where = f"warm-up {self.done}/{self.warmup}"
        else:
            where = f"round {self.done - self.warmup}/{self.rounds}"
        left = elapsed / self.done * (total - self.done) if self.done else None
        eta = f", about {format_seconds(left)} left" if left is not None else ""
        return f"{self.label}: {where} done, {format_seconds(elapsed)}{eta}"

    def finish(self) -> None:
        """Close the line, but only if one was shown (short benchmarks stay silent)."""
        if not self.shown or self.started is None:
            return
        elapsed = self.now() - self.started
        if self.total is None:
            counted = f"{self.done} calls"
        else:
            counted = f"{self.rounds} rounds" + (f" + {self.warmup} warm-up" if self.warmup else "")
        self.write(f"{self.label}: {counted} in {format_seconds(elapsed)}", in_place=self.tty,
                   final=True)  # fmt: skip


def silent(text: str, *, in_place: bool, final: bool) -> None:
    """The writer under ``-q``, on xdist workers, and without a terminal."""


def terminal_writer(config: Any) -> tuple[Writer, bool]:
    """A writer on pytest's terminal (capture suspended, as live logging does) and whether the
    terminal is a TTY; ``silent`` under ``-q``, on xdist workers, or without a terminal."""
    manager = config.pluginmanager
    reporter = manager.get_plugin("terminalreporter")
    capture = manager.get_plugin("capturemanager")
    if reporter is None or capture is None or config.get_verbosity() < 0:
        return silent, False
    if hasattr(config, "workerinput"):
        return silent, False
    tty = bool(getattr(reporter, "isatty", False))
    width = max(20, shutil.get_terminal_size().columns - 1)
    state = {"open": False}

    def write(text: str, *, in_place: bool, final: bool) -> None:
        line = f"    {text}"
        with capture.global_and_fixture_disabled():
            if in_place:
                if not state["open"]:
                    reporter.ensure_newline()
                reporter.write("\r" + line[:width].ljust(width), flush=True)
                state["open"] = not final
                if final:
                    reporter.write("\n", flush=True)
            else:
                reporter.ensure_newline()
                reporter.write_line(line)

    return write, tty
