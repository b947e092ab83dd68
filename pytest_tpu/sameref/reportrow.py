"""Numbers out of a nested session's report rows (JSON: percent, possibly missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def number(data: Mapping[str, Any], key: str, scale: float = 1.0) -> float | None:
    """A report row's number under ``key``, divided by ``scale``; None if it has none."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) / scale


def confidence(row: Mapping[str, Any], scale: float = 1.0) -> float | None:
    """How sure a nested report row is of a slowdown (percent, divided by ``scale``): a row of one
    pair of processes keeps its rounds' figure apart from ``confidence_pct``, which it leaves
    null for users (``pair_confidence_pct``)."""
    found = number(row, "pair_confidence_pct", scale)
    return found if found is not None else number(row, "confidence_pct", scale)


def numbers(row: Mapping[str, Any], *keys: str) -> list[float] | None:
    """A report row's values under ``keys``, or None unless every one is a number."""
    found = [x for x in (number(row, key) for key in keys) if x is not None]
    return found if len(found) == len(keys) else None
