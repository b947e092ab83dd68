"""Terminal tables and report files after a session that ran benchmarks.

Placeholder: filled in by the reports work (issue 5).
"""

from __future__ import annotations

import pytest


class SummaryPlugin:
    """Prints speedup/comparison tables and writes --report / --report-plot files."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
