"""Local paths and object storage behind one API, with atomic writes.

Scans and outputs live on a local disk by default and on ``s3://`` through
s3fs; ``UPath`` hides the difference. Writes go to a temporary name and are
renamed into place, so a failed rewrite never truncates or replaces the
previous good file (on S3 a single PUT is already all-or-nothing).

Outputs are meant to be shared (a web server, a colleague): every file and
folder written here gets the modes the user's umask gives a plain ``open`` or
``mkdir`` (0644 and 0755 under the usual 022), never the owner-only 0600/0700
that ``tempfile`` uses for its temporary names.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import os
import posixpath
import tempfile
import uuid
from collections.abc import Callable, Iterable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from pipeline import schemas
from pipeline.errors import UNREACHABLE, StorageUnreachable, TableError, unreachable_reason  # noqa: F401 - re-exported

def upath(uri: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> UPath:
    if isinstance(uri, UPath):
        return uri
    uri = str(uri)
    if "://" in uri:
        return UPath(uri, **(storage_options or {}))
    return UPath(os.path.abspath(uri))


def is_local(path: UPath) -> bool:
    return path.protocol in ("", "file", "local")


@contextmanager
def reaching(uri: str | os.PathLike):
    """Turn "the store did not answer" inside the block into one ``StorageUnreachable`` line naming ``uri``."""
    try:
        yield
    except StorageUnreachable:
        raise
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        raise StorageUnreachable(str(uri), reason) from None


def current_umask() -> int:
    """The process umask, read without changing it where the OS tells it (Linux: /proc/self/status)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once (not thread-safe, but only read here)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """What a plain ``open(path, "w")`` creates under the current umask (0644 under 022)."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """What a plain ``mkdir`` creates under the current umask (0755 under 022)."""
    return 0o777 & ~current_umask()


def make_shareable(path: str | os.PathLike) -> None:
    """Give a file we wrote (a video from ``tempfile.mkstemp``, 0600) the modes a plain ``open`` would have.

    Only bits are added, never taken away, and only on files this user owns:
    a hard link shares its inode with the source, which is ours as well.
    """
    st = os.stat(path)
    wanted = dir_mode() if os.path.isdir(path) else file_mode()
    if st.st_uid == getattr(os, "getuid", lambda: st.st_uid)() and (st.st_mode & wanted) != wanted:
        os.chmod(path, (st.st_mode & 0o7777) | wanted)


def write_bytes_atomic(path: UPath, data: bytes) -> None:
    if not is_local(path):
        with reaching(path):
            path.write_bytes(data)  # one PUT: the object appears whole or not at all
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp.path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp.path, path.path)
    except OSError as exc:
        # A full disk's write() names no file ("[Errno 28] No space left on device"); the temporary name means
        # nothing to a user either: name the file being written.
        if exc.errno is None or exc.filename not in (None, tmp.path):
            raise
        raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), path.path) from None
    finally:
        if os.path.exists(tmp.path):
            os.remove(tmp.path)


ROW_GROUP_ROWS = 1024 * 1024  # Arrow's default largest row group (``pq.write_table`` without ``row_group_size``)
PARQUET_OPTIONS = {"compression": "zstd", "write_statistics": True, "store_schema": True}


def parquet_bytes(table_name: str, df: pl.DataFrame) -> bytes:
    """Serialise deterministically: same rows and schema give the same bytes.

    The bytes are those of ``pq.write_table`` over the whole frame cast to the table's schema, but the cast (a
    copy of every string) is made one row group at a time: a dataset-wide table of millions of rows is never
    held twice in Arrow's string layout. ``write_table`` cuts its row groups from the cast table at the same
    offsets and the cast keeps chunk boundaries, so every row group sees the same chunks either way.
    """
    sch = schemas.schema(table_name)
    table = schemas.selected_arrow(table_name, df)  # polars' own buffers, shared: nothing copied yet
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, sch, **PARQUET_OPTIONS) as writer:
        if table.num_rows == 0:
            writer.write_table(table.cast(sch))  # one empty row group, as write_table writes
        for start in range(0, table.num_rows, ROW_GROUP_ROWS):
            writer.write_table(table.slice(start, ROW_GROUP_ROWS).cast(sch), row_group_size=ROW_GROUP_ROWS)
    del table
    return buf.getvalue()


def write_table(path: UPath, table_name: str, df: pl.DataFrame) -> None:
    write_bytes_atomic(path, parquet_bytes(table_name, df))


def write_frames(
    path: UPath, table_name: str, frames: Iterable[pl.DataFrame], *, combine: bool = True
) -> tuple[int, pl.DataFrame]:
    """Write a table given as successive frames (in row order); (rows written, the first rows).

    For a table too large to hold whole (the dataset-wide ``qa``): frames are gathered only until a row group
    is full, so at most one row group (``ROW_GROUP_ROWS``) and one frame are in memory. With ``combine`` each
    row group is one contiguous chunk, so the file is the bytes ``write_table`` gives for the same rows held
    as one chunk; without it every frame stays its own chunk, the bytes ``write_table`` gives for the frames
    concatenated as they are (``tests/test_qa_streamed.py``). The file appears whole or not at all: written
    to a temporary file beside it (locally) or uploaded from one in a single put.
    """
    rows, first = 0, None
    with tempfile.TemporaryDirectory(prefix="scan2qa-table-") if not is_local(path) else nullcontext() as tmp_dir:
        if is_local(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = os.path.join(os.path.dirname(path.path), f".{path.name}.{uuid.uuid4().hex}.tmp")
        else:
            tmp = os.path.join(tmp_dir, path.name)
        try:
            rows, first = _write_frames_to(tmp, table_name, frames, combine)
            if is_local(path):
                with open(tmp, "rb+") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, path.path)
            else:
                with reaching(path):
                    path.fs.put_file(tmp, path.path)  # one put: the object appears whole or not at all
        finally:
            if is_local(path) and os.path.exists(tmp):
                os.remove(tmp)
    return rows, first


def frames_bytes(table_name: str, frames: Iterable[pl.DataFrame], *, combine: bool = True) -> tuple[bytes, int]:
    """``write_frames`` into memory: (the file's bytes, rows). A compressed table is a fraction of its rows."""
    buf = io.BytesIO()
    rows, _ = _write_frames_to(buf, table_name, frames, combine)
    return buf.getvalue(), rows


def _write_frames_to(sink, table_name: str, frames: Iterable[pl.DataFrame], combine: bool) -> tuple[int, pl.DataFrame]:
    sch = schemas.schema(table_name)
    rows, first = 0, None
    with pq.ParquetWriter(sink, sch, **PARQUET_OPTIONS) as writer:
        pending: list[pa.Table] = []
        held = 0

        def flush(count: int) -> None:
            nonlocal pending, held
            table = pa.concat_tables(pending)
            group, rest = table.slice(0, count), table.slice(count)
            writer.write_table(group.combine_chunks() if combine else group, row_group_size=ROW_GROUP_ROWS)
            pending, held = ([rest] if rest.num_rows else []), rest.num_rows

        for df in frames:
            if first is None:
                first = df.head(20)
            table = schemas.selected_arrow(table_name, df).cast(sch)  # cast on arrival: the frame can go now
            del df
            if table.num_rows:
                pending.append(table)
                held += table.num_rows
                rows += table.num_rows
            del table
            while held >= ROW_GROUP_ROWS:
                flush(ROW_GROUP_ROWS)
        if held:
            flush(held)
        if rows == 0:
            writer.write_table(sch.empty_table())  # one empty row group, as write_table writes
    release_freed_memory()  # the row groups just written were the largest buffers of the step
    return rows, first if first is not None else schemas.empty(table_name)



def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None  # glibc only (musl, macOS: nothing to trim)
    except OSError:
        return None


_LIBC = _libc()


def release_freed_memory() -> None:
    """Give back the pages Arrow's allocator and the C heap keep after a large read or write.

    Arrow's pool (mimalloc) holds freed pages for reuse and never returns them on its own, while polars' allocator
    does after a few seconds; in a dataset-wide run, steps follow one another in one process, so each step's
    transient Arrow buffers (a scan of thousands of per-scan files, a row group being written) would stay
    resident through every later step. Called where those happen: after a multi-file scan
    (``table_scan.read_tables``), a file's slices (``TableParts.slices``), a streamed write (``write_frames``,
    ``frames_bytes``), the IO manager's write of a dataset-wide table, and once the release has counted its
    churn against the previous release's qa ids (read whole, then let go).

    The C heap is trimmed too: a scan of 10,000 small files leaves glibc's arenas holding freed metadata (0.5 GB
    of 1.3 GB resident after reading three per-scan tables at 10,000 scans) that no later step reuses.
    """
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def read_table(path: UPath, table_name: str | None = None) -> pl.DataFrame:
    """Read a Parquet table (conformed to its schema when named); unreadable files are a one-line TableError."""
    # Arrow gets the bytes, not the Python file object: such an object handed to Arrow was freed by an Arrow
    # thread while the interpreter shut down, aborting ~1 process in 25 after its work was done.
    try:
        with reaching(path), path.open("rb") as fh:
            data = fh.read()
        table = pq.read_table(pa.BufferReader(data))
    except (FileNotFoundError, StorageUnreachable):
        raise
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise TableError(f"{path}: not a readable Parquet table ({str(exc).splitlines()[0]})") from None
    df = pl.from_arrow(table)
    if not table_name:
        return df
    if table.schema.equals(schemas.schema(table_name)):
        return df  # written from a conformed frame: conforming again would copy every column twice for nothing
    try:
        return schemas.conform(table_name, df)
    except (ValueError, pl.exceptions.PolarsError) as exc:
        raise TableError(f"{path}: does not match the {table_name!r} schema: {str(exc).splitlines()[0]}") from None


def local_file_getter(root: UPath, cache_dir: os.PathLike) -> Callable[[str], Path | None]:
    """Relative path under ``root`` -> a local file to open with libraries that need one (OpenCV), or None if absent.

    On disk that is the file itself; on an object store the file is downloaded once into ``cache_dir``.
    """
    local = is_local(root)
    fetched: dict[str, Path | None] = {}

    def get(relative: str) -> Path | None:
        if relative not in fetched:
            source = root / relative
            if local:
                fetched[relative] = Path(source.path) if source.exists() else None
            else:
                target = Path(cache_dir) / relative
                try:
                    data = source.read_bytes()
                except FileNotFoundError:
                    fetched[relative] = None
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    fetched[relative] = target
        return fetched[relative]

    return get


def within_root(root: str, uri: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``uri`` is the scans root or a folder below it (by path components, after normalising ``..``).

    A location handed to a step (a run tag, a recorded source) is only trusted inside the configured
    root, so a stale or mistyped tag cannot make a partition read some other folder.
    """
    base, folder = upath(root, storage_options), upath(uri, storage_options)
    if is_local(base) != is_local(folder) or (not is_local(base) and base.protocol != folder.protocol):
        return False
    top = posixpath.normpath(base.path.rstrip("/") or "/")
    path = posixpath.normpath(folder.path.rstrip("/") or "/")
    return path == top or path.startswith(top.rstrip("/") + "/")
