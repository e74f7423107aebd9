"""Reports: records → pandas → tables, significance, plots and pages."""

from __future__ import annotations

from dmlbench.report.board import write_reports
from dmlbench.report.tables import (
    MixedProtocolsError,
    records_frame,
    render_markdown,
    summary_table,
)

__all__ = [
    "MixedProtocolsError",
    "records_frame",
    "render_markdown",
    "summary_table",
    "write_reports",
]
