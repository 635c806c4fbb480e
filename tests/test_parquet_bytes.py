"""``storage.parquet_bytes`` casts one row group at a time and still writes what ``pq.write_table`` wrote."""

from __future__ import annotations

import io

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import schemas, storage


def whole_table_bytes(name: str, df: pl.DataFrame) -> bytes:
    """The serialisation before row groups were cast one by one: the whole frame cast, then ``write_table``."""
    buf = io.BytesIO()
    pq.write_table(schemas.to_arrow(name, df), buf, **storage.PARQUET_OPTIONS)
    return buf.getvalue()


def frame_samples(rows: int, offset: int = 0) -> pl.DataFrame:
    i = pl.int_range(offset, offset + rows, eager=True).alias("i")
    return schemas.conform("frame_samples", pl.DataFrame(i).select(
        key=pl.format("synthetic/s{}_00", (pl.col("i") // 7).cast(pl.String).str.zfill(5)),
        budget=pl.col("i").mod(4).replace_strict([0, 1, 2, 3], ["16", "32", "64", "all"], return_dtype=pl.String),
        rank=pl.col("i") % 64,
        frame_index=pl.when(pl.col("i") % 11 == 0).then(None).otherwise(pl.col("i")),
        timestamp=pl.col("i") / 10,
    ))


@pytest.mark.parametrize("chunks", [[0], [5], [3, 4, 1], [998, 5, 1500], [2500]])
def test_same_bytes_as_whole_table_write(monkeypatch, chunks):
    # Row groups of 1,000 rows stand for Arrow's 1 Mi rows, so several row groups (cut inside and across chunks)
    # are quick to write; the whole-table reference is cut at the same size.
    monkeypatch.setattr(storage, "ROW_GROUP_ROWS", 1000)
    df = pl.concat([frame_samples(n, sum(chunks[:i])) for i, n in enumerate(chunks)], rechunk=False)
    buf = io.BytesIO()
    pq.write_table(schemas.to_arrow("frame_samples", df), buf, row_group_size=1000, **storage.PARQUET_OPTIONS)
    got = storage.parquet_bytes("frame_samples", df)
    assert got == buf.getvalue()
    assert pq.read_metadata(io.BytesIO(got)).num_row_groups == max(1, -(-df.height // 1000))


@pytest.mark.slow  # a million rows: seconds on a quiet machine, more on a shared one
def test_same_bytes_at_the_real_row_group_size():
    df = frame_samples(storage.ROW_GROUP_ROWS + 3)
    assert storage.parquet_bytes("frame_samples", df) == whole_table_bytes("frame_samples", df)
    empty = schemas.empty("qa")
    assert storage.parquet_bytes("qa", empty) == whole_table_bytes("qa", empty)


def test_columns_checked_before_anything_is_written():
    with pytest.raises(ValueError, match="missing columns"):
        storage.parquet_bytes("frame_samples", frame_samples(3).drop("rank"))
