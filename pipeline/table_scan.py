"""One table stored as many per-scan files, read in one pyarrow dataset scan.

A dataset-wide step reads each per-scan table from every partition. Opening,
decoding and conforming thousands of files one at a time costs more than the
data; one dataset scan over the file list reads them with pyarrow's threads and
casts to the table's schema in the same pass. Each file stays one chunk of the
result, as ``pl.concat`` of per-file reads gave: the Parquet writer's pages
follow chunk boundaries, so tables written from the result are the same bytes.

Whatever the scan cannot take as it is (an unreadable file, a file whose
columns are not the schema's, a file split into several batches) is read again
file by file with ``storage.read_table``, whose errors name the file, so bad
input fails exactly as it did before.

``TableParts`` is the unread form: a step over millions of rows reads it in
batches of whole files instead of holding every column of every scan at once.
``TableFrames`` is the matching output form: a dataset-wide table handed to the
IO manager as successive frames, written one row group at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa
from upath import UPath

from pipeline import schemas, storage

_MAX_BATCH_ROWS = 1 << 30  # a file is never split into several batches by the scanner
READ_BATCH_ROWS = 128 * 1024  # the chunk length of ``pq.read_table`` (the dataset scanner's default batch size)


@dataclass(frozen=True)
class TableParts:
    """A per-scan table as its files, in key order; nothing is read until asked."""

    name: str
    paths: tuple[UPath, ...]
    keep: pl.Expr | None = field(default=None, compare=False)  # only the rows it is true on (``where``)
    held: pl.DataFrame | None = field(default=None, compare=False, repr=False)  # some columns, already read

    def where(self, keep: pl.Expr | None) -> TableParts:
        """The same files, read with only the rows ``keep`` is true on (None: every row)."""
        return TableParts(self.name, self.paths, keep)

    def holding(self, columns: pl.DataFrame) -> TableParts:
        """The same rows, with ``columns`` (exactly the rows a read would give, in order) already in memory:
        a read of only those columns returns them instead of reading the files again (the release holds the
        qa table's narrow columns while its gate reads some of them)."""
        return TableParts(self.name, self.paths, self.keep, columns)

    def _kept(self, df: pl.DataFrame) -> pl.DataFrame:
        return df if self.keep is None else df.filter(self.keep)

    def read(self, columns: Sequence[str] | None = None) -> pl.DataFrame:
        if columns is not None and self.held is not None and set(columns) <= set(self.held.columns):
            return self.held.select(columns)
        if self.keep is None:
            return read_tables(self.paths, self.name, columns)
        if columns is None:
            return self._kept(read_tables(self.paths, self.name))
        order = list(schemas.schema(self.name).names)
        needed = set(columns) | set(self.keep.meta.root_names())  # the columns asked for and those keep reads
        return self._kept(read_tables(self.paths, self.name, [c for c in order if c in needed])).select(columns)

    def batches(self, files: int) -> Iterator[pl.DataFrame]:
        """The table in slices of ``files`` whole files (so no scan is split between two slices)."""
        for start in range(0, len(self.paths), max(files, 1)):
            yield self._kept(read_tables(self.paths[start : start + files], self.name))

    def slices(self) -> Iterator[pl.DataFrame]:
        """The table one chunk of ``pq.read_table`` (``READ_BATCH_ROWS`` rows of a row group) at a time, in row
        order, each conformed: for a table too large to hold whole (``expectations.checks.SlicedView``, the
        release's qa). A slice is one chunk, so frames written from them keep ``pq.read_table``'s chunks (and
        bytes); a whole row group (a million rows of every column) at once cost gigabytes."""
        import pyarrow.parquet as pq

        schema = schemas.schema(self.name)
        for path in self.paths:
            if storage.is_local(path):
                source = path.path
            else:
                with storage.reaching(path), path.open("rb") as fh:
                    source = pa.BufferReader(fh.read())
            try:
                groups = pq.ParquetFile(source)
            except (OSError, ValueError) as exc:
                raise storage.TableError(f"{path}: not a readable Parquet table ({str(exc).splitlines()[0]})") from None
            given = 0
            for index in range(groups.num_row_groups):
                for batch in groups.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=[index]):
                    frame = pl.from_arrow(pa.Table.from_batches([batch], schema=groups.schema_arrow))
                    given += 1
                    yield self._kept(frame if batch.schema.equals(schema) else schemas.conform(self.name, frame))
            del groups, source
            storage.release_freed_memory()
            if not given:  # an empty table (no row group, or one of no rows) is still one slice, with its columns
                yield schemas.empty(self.name)

    def __len__(self) -> int:
        return len(self.paths)

    def only(self, keys) -> TableParts:
        """The files of the scans ``keys`` (``<dataset>/<scene_id>``), in the same order: what a release holds."""
        wanted = set(keys)
        return TableParts(self.name, tuple(p for p in self.paths if scan_key_of(p) in wanted), self.keep)  # held: not these rows


@dataclass(frozen=True)
class TableFrames:
    """A table too large to hold whole, as its frames in row order (``storage.write_frames`` writes them).

    The ``qa`` step returns its question table this way: the rows of one batch of scans at a time.
    """

    name: str
    frames: Iterable[pl.DataFrame]


class ScanTables(dict):
    """One per-scan table for several scans, scan key -> that scan's frame: a step run over a range of scan
    partitions returns this, and each scan's frame is stored as that scan's own file."""


def scan_key_of(path: UPath) -> str:
    """``<dataset>/<scene_id>`` of a per-scan table file ``.../<table>/<dataset>/<scene_id>.parquet``."""
    return f"{path.parent.name}/{path.name.removesuffix('.parquet')}"


def existing(paths: Sequence[UPath]) -> tuple[UPath, ...]:
    """The paths that exist, in order; on an object store one listing per folder instead of a request per file."""
    if not paths:
        return ()
    if storage.is_local(paths[0]):
        return tuple(p for p in paths if os.path.exists(p.path))
    listed: dict[str, set[str]] = {}
    kept = []
    for path in paths:
        folder = path.parent
        if folder.path not in listed:
            with storage.reaching(folder):
                try:
                    listed[folder.path] = {entry.rstrip("/") for entry in folder.fs.ls(folder.path, detail=False)}
                except FileNotFoundError:
                    listed[folder.path] = set()
        if path.path in listed[folder.path]:
            kept.append(path)
    return tuple(kept)


def _filesystem(path: UPath):
    import pyarrow.fs as pafs

    if storage.is_local(path):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(path.fs))


def read_files(paths: Sequence[UPath], table_name: str) -> pl.DataFrame:
    """The file-by-file read: each file conformed on its own, then concatenated."""
    frames = [storage.read_table(path, table_name) for path in paths]
    return pl.concat(frames, how="vertical") if frames else schemas.empty(table_name)


def _scan(paths: Sequence[UPath], table_name: str, columns: Sequence[str] | None) -> pl.DataFrame | None:
    """All files in one scan, or None when the scan would not give what per-file reads give."""
    # pyarrow.dataset imports pandas (~0.5 CPU-s): only the dataset-wide steps that scan tables pay for it.
    import pyarrow.dataset as ds

    schema = schemas.schema(table_name)
    dataset = ds.dataset([p.path for p in paths], schema=schema, format="parquet", filesystem=_filesystem(paths[0]))
    non_empty = 0
    for fragment in dataset.get_fragments():
        # A scan with an explicit schema fills a missing column with nulls and drops extra ones;
        # conform refuses both, so such files take the per-file path and its error.
        if sorted(fragment.physical_schema.names) != sorted(schema.names):
            return None
        non_empty += fragment.metadata.num_rows > 0
    # Each batch (one per file) becomes polars as it arrives, so Arrow never holds the whole table too.
    batches = dataset.to_batches(columns=list(columns) if columns is not None else None, batch_size=_MAX_BATCH_ROWS)
    frames = [pl.from_arrow(batch) for batch in batches if batch.num_rows]
    # A file of several row groups comes as several batches, chunked unlike ``pq.read_table``; that matters
    # only for a whole table, which may be written again. A read of some columns (a step deciding on them) takes
    # the scan's batches: falling back would read every column of the file, gigabytes for the dataset-wide qa.
    if columns is None and len(frames) != non_empty:
        return None
    if not frames:
        empty = schemas.empty(table_name)
        return empty.select(columns) if columns is not None else empty
    return pl.concat(frames, how="vertical", rechunk=False)


def read_tables(paths: Sequence[UPath], table_name: str, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """Every file of one table, conformed, rows in path order (``columns``: only those, in that order)."""
    df = None
    if paths:
        try:
            with storage.reaching(paths[0]):
                df = _scan(paths, table_name, columns)
        except storage.StorageUnreachable:
            raise
        except (OSError, ValueError, pa.ArrowException):
            df = None  # the per-file read below names the file that caused it
    if df is None:
        df = read_files(paths, table_name)
        df = df.select(columns) if columns is not None else df
    if len(paths) > 1:
        storage.release_freed_memory()  # a dataset-wide read: its transient buffers would outlive the step
    return df
