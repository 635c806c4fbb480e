"""What a stored table records in the Dagster catalog: row count, path and a preview of its first rows.

Here, not in ``assets/catalog.py``, because the IO manager (``resources/parquet_io.py``) records it and resources
sit below assets; ``assets.catalog`` imports these for the assets that record paths themselves.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

PREVIEW_ROWS = 5
PREVIEW_CELL = 40  # characters per preview cell


def _cell(value: Any) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= PREVIEW_CELL else text[: PREVIEW_CELL - 1] + "…"


def preview(df, rows: int = PREVIEW_ROWS) -> str:
    """The first rows of a polars frame as a small Markdown table (long cells cut)."""
    if df.width == 0:
        return "(no columns)"
    head = df.head(rows)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in head.iter_rows()]
    if df.height > rows:
        lines.append(f"\n… {df.height - rows:,} more rows")
    elif df.height == 0:
        lines.append("\n(no rows)")
    return "\n".join(lines)


def path_value(path) -> dg.MetadataValue:
    """A clickable location: a local path, or the URL of an object-store location."""
    text = str(path)
    return dg.MetadataValue.url(text) if "://" in text and not text.startswith("file://") else dg.MetadataValue.path(text)


def materialization_metadata(table: str, df, path, rows: int | None = None) -> dict[str, Any]:
    """What the IO manager records per stored table: row count, path, preview and the columns written.

    ``rows``: the table's row count when ``df`` is only its first rows (a table written frame by frame)."""
    return {
        "dagster/row_count": dg.MetadataValue.int(df.height if rows is None else rows),
        "path": path_value(path),
        "preview": dg.MetadataValue.md(preview(df)),
    }
