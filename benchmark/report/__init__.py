"""Reports: records → pandas → tables (and, later, plots)."""

from __future__ import annotations

from dmlbench.report.tables import (
    MixedProtocolsError,
    records_frame,
    render_markdown,
    summary_table,
    write_reports,
)

__all__ = [
    "MixedProtocolsError",
    "records_frame",
    "render_markdown",
    "summary_table",
    "write_reports",
]
