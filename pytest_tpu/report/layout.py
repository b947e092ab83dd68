"""Plain-text tables that fit a terminal: tabulate's columns, names shortened to a width."""

from __future__ import annotations

from collections.abc import Callable

from pytest_tpu.report.model import MAX_WIDTH


def tabulate_rows(rows: list[list[str]], headers: list[str], fmt: str, label_cols: int = 1) -> str:
    import tabulate

    align = ["left"] * label_cols + ["right"] * (len(headers) - label_cols)
    # tabulate widens every column to its header plus two spaces; the column gap already
    # separates them, and those spaces cost a nine-column table its 100-column budget.
    saved, tabulate.MIN_PADDING = tabulate.MIN_PADDING, 0
    try:
        return tabulate.tabulate(rows, headers, tablefmt=fmt, colalign=align, disable_numparse=True)
    finally:
        tabulate.MIN_PADDING = saved


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width``: names of one file share their start and differ
    at the end (``test_train_loop`` and ``test_train_loop_pedantic``, ``[cpu-512]``)."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def widest(text: str) -> int:
    return max(map(len, text.splitlines()), default=0)


def fit(
    rows: list[list[str]],
    headers: list[str],
    fmt: str,
    label_cols: int = 1,
    shorten: Callable[[str, int], str] = shorten,
    width: int = MAX_WIDTH,
) -> str:
    """The table, its first column shortened until every line fits ``width`` columns.

    Only the terminal needs this; Markdown tables wrap in the browser and keep full labels.
    """
    text = tabulate_rows(rows, headers, fmt, label_cols)
    over = widest(text) - width
    if over <= 0 or fmt != "simple" or not rows:
        return text
    width = max(12, max(len(r[0]) for r in rows) - over)
    short = [[shorten(r[0], width), *r[1:]] for r in rows]
    return tabulate_rows(short, headers, fmt, label_cols)
