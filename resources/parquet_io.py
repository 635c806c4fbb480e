"""Parquet IO manager: every asset is a table of ``pipeline.schemas`` stored on UPath.

Layout under ``root`` (the output root's ``tables/``), asset name = table name:
``<root>/<asset>/<dataset>/<scene_id>.parquet`` for per-scan partitions (the
partition key ``"<dataset>/<scene_id>"`` is used literally as the relative path)
and ``<root>/<asset>.parquet`` for dataset-wide assets. Writes go through
``pipeline.storage.write_table``, which conforms the frame to its schema and
renames a finished temporary file into place, so a failed step never leaves a
truncated or half-replaced table behind. A dataset-wide asset reading a
per-scan table gets all partitions that exist, concatenated in key order (one
pyarrow dataset scan, ``pipeline.table_scan``): a scan whose partition failed is
left out rather than failing the whole dataset. An input annotated
``TableParts`` gets the files unread, for a step that reads them in batches; an
output given as ``TableFrames`` (the dataset-wide ``qa``) is written frame by frame
(``pipeline.storage.write_frames``), never held whole.
Each stored table is recorded with ``dagster/row_count``, its path (clickable
in the UI) and a Markdown preview of its first rows (``assets.catalog``).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import polars as pl
from upath import UPath

from pipeline.storage import read_table, release_freed_memory, upath, write_frames, write_table
from pipeline.table_scan import ScanTables, TableFrames, TableParts, existing
from resources.table_metadata import materialization_metadata


def _table_name(asset_key: dg.AssetKey) -> str:
    return asset_key.path[-1]


def _relative_partition_path(partition_key: str) -> str:
    parts = partition_key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"partition key {partition_key!r} is not a '<dataset>/<scene_id>' key")
    return partition_key


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores polars DataFrames as schema-conformed Parquet files under ``root`` (local or ``s3://``)."""

    root: str = "data/out/tables"
    storage_options: dict[str, Any] = {}

    def table_path(self, table: str, partition_key: str | None = None) -> UPath:
        base = upath(self.root, self.storage_options)
        if partition_key is None:
            return base / f"{table}.parquet"
        return base / table / f"{_relative_partition_path(partition_key)}.parquet"

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | TableFrames | ScanTables | None) -> None:
        if obj is None:
            return
        if isinstance(obj, ScanTables):
            self._write_scans(context, obj)
            return
        if isinstance(obj, TableFrames):
            table = _table_name(context.asset_key)
            path = self.table_path(table, context.asset_partition_key if context.has_asset_partitions else None)
            rows, head = write_frames(path, table, obj.frames)
            context.add_output_metadata(materialization_metadata(table, head, path, rows=rows))
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"asset {context.asset_key.to_user_string()} returned {type(obj).__name__}, expected a polars DataFrame")
        table = _table_name(context.asset_key)
        partition_key = context.asset_partition_key if context.has_asset_partitions else None
        path = self.table_path(table, partition_key)
        write_table(path, table, obj)
        if partition_key is None:  # a dataset-wide table: its write's buffers would stay for the next steps
            release_freed_memory()
        context.add_output_metadata(materialization_metadata(table, obj, path))

    def _write_scans(self, context: dg.OutputContext, tables: ScanTables) -> None:
        """A step over a range of scans: each scan's frame to its own partition's file, as a run of that scan
        alone writes it. Every partition of the range must have its frame (an empty one for a scan with no rows)."""
        table = _table_name(context.asset_key)
        keys = sorted(context.asset_partition_keys)
        missing = sorted(set(keys) - set(tables))
        if missing:
            raise ValueError(f"{table}: the step returned no table for {len(missing)} scans of its range "
                             f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})")
        for key in keys:
            write_table(self.table_path(table, key), table, tables[key])
        rows = {key: tables[key].height for key in keys}
        context.add_output_metadata({
            "scans": len(keys),
            "rows": sum(rows.values()),
            "rows per scan": dg.MetadataValue.json(rows),
            "path": dg.MetadataValue.path(str(self.table_path(table, keys[0]).parent.parent)),
        })

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | TableParts:
        table = _table_name(context.asset_key)
        # An input annotated ``TableParts`` is read by its step, in batches or row groups; any other gets the
        # whole table.
        wanted = getattr(context.dagster_type, "typing_type", None)
        if not context.has_asset_partitions:
            path = self.table_path(table)
            return TableParts(table, (path,)) if wanted is TableParts else read_table(path, table)
        keys = sorted(context.asset_partition_keys)
        if len(keys) == 1 and context.has_partition_key:
            return read_table(self.table_path(table, keys[0]), table)
        parts = TableParts(table, existing([self.table_path(table, key) for key in keys]))
        return parts if wanted is TableParts else parts.read()
