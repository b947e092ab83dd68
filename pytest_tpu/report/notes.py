"""The notes under a comparison table as a terminal prints them: a long note one clause a line,
and at the default verbosity only the notes of the rows a reader must read beside the table; and
the long lines on what new pairs of processes measured again, likewise (``progress_lines``).

Trial 69 read notes of 600-900 characters on one line each, one for every row, most of them
``unchanged`` rows saying how they were measured. The files ``--tpu-report`` writes keep
every note whole (``report.documents``); ``-v`` prints every row's here too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_tpu.gate.stats import TAIL
from pytest_tpu.report.comparison import noted, row_label, sort_comparison
from pytest_tpu.report.model import ComparisonRow

INDENT = "    "
SPLIT_FROM = 3  # clauses: a note of fewer stays on one line
NAMED_AT_MOST = 3  # rows the line on what ``unchanged`` means names, and how many more
_SECONDS = re.compile(r"^(?P<body>.*?)(?P<took> \[\d+ s\])$")


def needs_note(row: ComparisonRow) -> bool:
    """Whether a row's note must be read beside the table: every verdict but ``unchanged``
    (why slower, what an inconclusive row could have seen), and an ``unchanged`` row judged on
    the tail, whose figures are another statistic than the other rows'."""
    return row.verdict != "unchanged" or row.statistic == TAIL


def terminal_notes(rows: Sequence[ComparisonRow], every: bool) -> list[str]:
    """The lines of the notes: each note's rows, then its clauses a line each (where it has
    ``SPLIT_FROM`` or more). Without ``every``, only the notes of the rows that need one
    (``needs_note``), and a line that counts the rest and says how to see them."""
    shown = [row for row in rows if every or needs_note(row)]
    lines: list[str] = []
    for who, text in noted(shown):
        parts = clauses(text)
        # Two clauses read as one sentence ("failed on the base side (...); the head result
        # stands"); the long notes of trial 69 had three to five.
        whole = len(parts) < SPLIT_FROM
        lines += [f"{who}: {text}"] if whole else [f"{who}:", *(INDENT + part for part in parts)]
    if meaning := unchanged_is_not_none(rows):
        lines.append(meaning)
    if left := len(noted([row for row in rows if not (every or needs_note(row))])):
        lines.append(f"({left} note(s) on unchanged rows not shown: -v prints them)")
    return lines


def unchanged_is_not_none(rows: Sequence[ComparisonRow]) -> str:
    """What ``unchanged`` means, where the table shows it beside an interval that excludes zero:
    within the threshold either way, not no change. New-user trial 70 read a real slowdown of
    about 5 % at ``+4.7% [+0.7, +8.9] unchanged`` (a 10 % gate) as the tool missing it. The row's
    interval is named, not a change: one pair of processes' interval can exclude zero on an
    offset between its processes alone (the same trial's unchanged code: -4.6 % [-7.9, -1.2])."""
    names = [
        row_label(row)
        for row in sort_comparison(rows)
        if row.verdict == "unchanged"
        and row.ci_low is not None
        and row.ci_high is not None
        and (row.ci_low > 0 or row.ci_high < 0)
    ]
    if not names:
        return ""
    if len(names) > NAMED_AT_MOST:
        names = [*names[:NAMED_AT_MOST], f"{len(names) - NAMED_AT_MOST} more"]
    whose = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    their = "the intervals of" if len(names) > 1 else "the interval of"
    verb = "exclude" if len(names) > 1 else "excludes"
    meaning = "unchanged: within the threshold either way, not no change"
    return f"{meaning} ({their} {whose} {verb} zero)"


def clauses(text: str) -> list[str]:
    """``text`` cut at each ``"; "`` outside brackets and quotes: a note's clauses (why the
    verdict, what a new pair read, what the rounds detect) each read on its own."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif text.startswith("; ", i) and not depth and not quoted:
            parts.append(text[start:i])
            start = i + 2
    return [*parts, text[start:]]


def progress_lines(line: str) -> list[str]:
    """A line on what new pairs of processes measured again, as the terminal prints it: where it
    has ``SPLIT_FROM`` clauses or more, its first (what ran, and how it came out) with the
    seconds it took, then the others a line each (trial 69 read "re-measured 1 slowdown(s) ...;
    1 measured by a third pair; 1 that three pairs left open measured by 2 more (0 of 1 ...
    reach it) [32 s]" as one line, its outcome last)."""
    found = _SECONDS.match(line)
    body, took = (found["body"], found["took"]) if found else (line, "")
    parts = clauses(body)
    if len(parts) < SPLIT_FROM:
        return [line]
    return [parts[0] + took, *(INDENT + part for part in parts[1:])]
