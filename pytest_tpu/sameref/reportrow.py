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


def numbers(row: Mapping[str, Any], *keys: str) -> list[float] | None:
    """A report row's values under ``keys``, or None unless every one is a number."""
    found = [x for x in (number(row, key) for key in keys) if x is not None]
    return found if len(found) == len(keys) else None
