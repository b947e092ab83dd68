"""A pytest plugin for ``freeze_ab.py`` only: turns the same-job ``gc.freeze`` off.

Loaded through ``PYTEST_PLUGINS``, so that the base session the head starts (and any nested one)
loads it too; it replaces ``pytest_tpu.sameref.collector``'s freeze and thaw with nothing.
"""

from __future__ import annotations

import pytest_tpu.sameref.collector as collector


def _nothing() -> None:
    pass


collector.freeze = _nothing
collector.thaw = _nothing
