"""``@pytest.mark.regression_threshold(time="10%", memory="2%")``: a benchmark's own thresholds.

Its own module, light to import: the plugin checks every marked test's marker at collection, and
``--compare-ref`` reads them, without loading the gate.
"""

from __future__ import annotations

import pytest

from pytest_tpu.parsers import GATED_METRICS, parse_percent

MARKER = "regression_threshold"


def marker_thresholds(item: pytest.Item) -> dict[str, float]:
    """``@pytest.mark.regression_threshold(time="10%", memory="2%")``: percent per metric.

    The closest marker wins, so one on a class or module (``pytestmark``) sets a group's.
    """
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return {}
    if marker.args or not marker.kwargs:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{MARKER} takes metric=percent keywords, "
            f"from: {', '.join(GATED_METRICS)}"
        )
    found = {}
    for metric, value in marker.kwargs.items():
        if metric not in GATED_METRICS:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER}({metric}=...): valid metrics are "
                f"{', '.join(GATED_METRICS)}"
            )
        try:
            found[metric] = parse_percent(str(value))
        except Exception as exc:  # argparse's error type: the message names the valid values
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{MARKER}: {exc}") from None
    return found
