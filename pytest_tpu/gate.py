"""Baselines and the regression gate as a pytest plugin object (registered only when used).

Placeholder: filled in by the baselines/gate work (issue 4).
"""

from __future__ import annotations

import pytest


class GatePlugin:
    """Saves baselines, compares with them and decides the regression verdict."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
