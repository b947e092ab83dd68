"""Results → speedup tables, comparison tables, Markdown and JSON.

Pure: plain data in, strings and dicts out; no pytest import (``BenchResult`` is only read
through its attributes), so every builder is tested on hand-made rows without TensorFlow.
``model`` holds what they are made of, ``tables`` the speedup tables, ``comparison`` the
comparison table, ``notes`` its notes as a terminal prints them, ``documents`` the files, and
``layout`` what fits a table to a terminal.
"""

from __future__ import annotations

from pytest_tpu.report.comparison import (
    comparison_blocks,
    comparison_counts,
    comparison_notes,
    comparison_summary,
    comparison_table,
    legend_for,
    row_details,
    sort_comparison,
    verdict_text,
)
from pytest_tpu.report.documents import gate_text, to_json, to_markdown
from pytest_tpu.report.layout import fit
from pytest_tpu.report.model import (
    MAX_WIDTH,
    MEMORY_FIELD,
    Cell,
    ComparisonRow,
    Row,
    WorkloadTable,
    legend,
    verdict_word,
)
from pytest_tpu.report.notes import terminal_notes
from pytest_tpu.report.tables import (
    build_tables,
    config_of,
    cross_table,
    format_bytes,
    kind_sort_key,
    label_of,
    missing_line,
    speedup_table,
    table_notes,
    varying_fields,
    workload_of,
)

__all__ = [
    "MAX_WIDTH",
    "MEMORY_FIELD",
    "Cell",
    "ComparisonRow",
    "Row",
    "WorkloadTable",
    "build_tables",
    "comparison_blocks",
    "comparison_counts",
    "comparison_notes",
    "comparison_summary",
    "comparison_table",
    "config_of",
    "cross_table",
    "fit",
    "format_bytes",
    "gate_text",
    "kind_sort_key",
    "label_of",
    "legend",
    "legend_for",
    "missing_line",
    "row_details",
    "sort_comparison",
    "speedup_table",
    "table_notes",
    "terminal_notes",
    "to_json",
    "to_markdown",
    "varying_fields",
    "verdict_text",
    "verdict_word",
    "workload_of",
]
