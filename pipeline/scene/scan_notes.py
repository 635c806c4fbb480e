"""What a build says about its scans beyond "ok": per-scan warnings, and what it left out of the release and why.

A reader that goes on past odd input (a label that is not in the label map, a
dropped frame, a duplicated object id) records a warning in the ``scans``
table; a scan that fails, or a folder discovery skips, is left out. Both must
reach the person building the benchmark without opening Parquet files, so
``scan2qa build`` prints them (``warning_lines``, ``excluded_lines``), the
release manifest lists the excluded scans (``checks.excluded_scans``: the
scans the Dagster instance says were not built, ``pipeline.release.membership``,
and the folders the build's discovery skipped, ``skipped_folders.json`` under
the output root), and the reviewer report shows both (``notes_html``).
"""

from __future__ import annotations

import html
import json
from typing import Any

import polars as pl

from pipeline import storage

SKIPPED_FILE = "skipped_folders.json"
FIRST_WARNINGS = 3  # warnings printed per scan; all of them stay in the scans table


def _skipped_uri(output_root: str) -> str:
    return f"{output_root.rstrip('/')}/{SKIPPED_FILE}"


def write_skipped(output_root: str, storage_options: dict | None, skipped: list[str]) -> None:
    """Record the folders this build's discovery skipped (rewritten by every build, so never stale).

    Only a note for the reviewer: which scans a release holds comes from the Dagster instance
    (``pipeline.release.membership``), never from this file.
    """
    path = storage.upath(_skipped_uri(output_root), storage_options)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage.write_bytes_atomic(path, json.dumps({"skipped_folders": list(skipped)}, indent=1, sort_keys=True).encode())


def read_skipped(output_root: str, storage_options: dict | None = None) -> list[str]:
    """The folders the last build skipped; none when no build recorded them (runs launched by a deployment)."""
    path = storage.upath(_skipped_uri(output_root), storage_options)
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [str(line) for line in data.get("skipped_folders", [])] if isinstance(data, dict) else []


def read_scan_warnings(tables_root: str, keys: list[str], storage_options: dict | None = None) -> dict[str, list[str]]:
    """``key -> warnings`` from each scan's own ``scans`` table (the partitions just built)."""
    found: dict[str, list[str]] = {}
    for key in sorted(keys):
        path = storage.upath(f"{tables_root.rstrip('/')}/scans/{key}.parquet", storage_options)
        try:
            table = storage.read_table(path, "scans")
        except Exception:  # noqa: BLE001 - a scan without a scans table has nothing to say here
            continue
        warnings = [w for ws in table["warnings"].to_list() if ws for w in ws]
        if warnings:
            found[key] = warnings
    return found


def warning_lines(warnings: dict[str, list[str]], first: int = FIRST_WARNINGS) -> list[str]:
    """Per scan: the count, then the first warnings, one line each."""
    if not warnings:
        return []
    total = sum(len(w) for w in warnings.values())
    lines = [f"warnings: {total} in {len(warnings)} scan{'s' if len(warnings) != 1 else ''} "
             f"(first {first} per scan; all in the scans table's warnings column)"]
    for key in sorted(warnings):
        items = warnings[key]
        lines.append(f"  {key}: {len(items)} warning{'s' if len(items) != 1 else ''}")
        lines += [f"    WARNING {key}: {w}" for w in items[:first]]
        if len(items) > first:
            lines.append(f"    ... and {len(items) - first} more")
    return lines


def excluded_lines(failed: dict[str, str], skipped: list[str]) -> list[str]:
    if not failed and not skipped:
        return []
    return [f"excluded from the release: {len(failed)} failed scan{'s' if len(failed) != 1 else ''} and "
            f"{len(skipped)} skipped folder{'s' if len(skipped) != 1 else ''} (skipped folders listed at the start, "
            f"failed scans below; also in the release manifest's checks.excluded_scans)"]


def notes_html(scans: pl.DataFrame | None, excluded: dict[str, Any] | None) -> str:
    """The reviewer report's section: excluded scans and folders, and every scan's warnings."""
    esc = html.escape
    parts = []
    excluded = excluded or {}
    failed, skipped = excluded.get("failed_scans", []), excluded.get("skipped_folders", [])
    if failed or skipped:
        parts.append("<h2>Excluded scans</h2><ul>")
        parts += [
            f"<li><code>{esc(f['key'])}</code>{' (' + esc(f['state'].replace('_', ' ')) + ')' if f.get('state') else ''}: "
            f"{esc(f['error'])}</li>"
            for f in failed
        ]
        parts += [f"<li>skipped folder {esc(line)}</li>" for line in skipped]
        parts.append("</ul>")
    if scans is not None and scans.height and "warnings" in scans.columns:
        rows = [(k, ws) for k, ws in zip(scans["key"].to_list(), scans["warnings"].to_list()) if ws]
        if rows:
            parts.append("<h2>Scan warnings</h2><ul>")
            for key, ws in sorted(rows):
                items = "".join(f"<li>{esc(w)}</li>" for w in ws)
                parts.append(f"<li><code>{esc(key)}</code>: {len(ws)}<ul>{items}</ul></li>")
            parts.append("</ul>")
    return "".join(parts)
