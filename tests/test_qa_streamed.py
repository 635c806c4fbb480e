"""The streamed qa step: decided on a few columns, written a batch at a time, the same table as in memory."""

from __future__ import annotations

import io

import polars as pl
import pyarrow.parquet as pq
import pytest
from upath import UPath

from pipeline import schemas, storage
from pipeline.qa import finalize_qa
from pipeline.qa.finalize import streamed_qa_parts
from tests.test_parquet_bytes import frame_samples
from tests.test_pinned_questions import SEED, candidates, unpinned  # noqa: F401  (module fixtures)
from tests.test_qa_finalize import _parts


def _written(tmp_path, frames, name: str = "qa") -> bytes:
    path = UPath(tmp_path / f"{name}.parquet")
    storage.write_frames(path, name, frames)
    return path.read_bytes()


def _released_bytes(data: bytes, name: str = "qa") -> bytes:
    """What a release writes for a table it read: ``read_table`` then ``parquet_bytes``."""
    return storage.parquet_bytes(name, pl.from_arrow(pq.read_table(io.BytesIO(data))))


@pytest.mark.parametrize("files_per_batch", [1, 4])
def test_streamed_rows_are_the_in_memory_table(tmp_path, candidates, unpinned, files_per_batch):  # noqa: F811
    accepted = set(unpinned[1]["id"].head(30).to_list()) | set(
        unpinned[0].filter(pl.col("video_kind") != "real")["id"].head(5).to_list()
    )
    for pins in (frozenset(), accepted):
        parts = _parts(tmp_path / f"parts{len(pins)}", candidates)
        whole_drops: list[pl.DataFrame] = []
        whole = finalize_qa(parts.read(), profile="revsi", seed=SEED, drops=whole_drops, pinned=pins)
        drops: list[pl.DataFrame] = []
        with streamed_qa_parts(parts, profiles=["revsi"], seed=SEED, files_per_batch=files_per_batch, drops=drops,
                               pinned=pins) as decided:
            data = _written(tmp_path, decided.frames())
            spill = decided._spill
            assert decided.counts["len"].sum() == whole.height
        assert spill is not None and not spill.exists()  # the spill folder goes with the step
        assert data == storage.parquet_bytes("qa", whole.rechunk())
        assert _released_bytes(data) == storage.parquet_bytes("qa", whole)
        assert pl.concat(drops).equals(pl.concat(whole_drops))


def test_an_id_in_two_scans_streams_the_whole_table(tmp_path, candidates):  # noqa: F811
    keys = sorted(set(candidates["key"]))
    stray = candidates.filter(pl.col("key") == keys[0]).head(5).with_columns(pl.lit(keys[1]).alias("key"))
    parts = _parts(tmp_path, pl.concat([candidates, stray]))
    with streamed_qa_parts(parts, profiles=["revsi"], seed=0, files_per_batch=1) as decided:
        assert decided._whole is not None
        data = _written(tmp_path, decided.frames())
    assert data == storage.parquet_bytes("qa", finalize_qa(parts.read(), profile="revsi", seed=0).rechunk())


@pytest.mark.parametrize("sizes", [[], [0], [5], [400, 0, 700, 1], [1000], [2500, 3]])
def test_written_frames_are_the_bytes_of_the_rows_as_one_chunk(monkeypatch, tmp_path, sizes):
    # Row groups of 1,000 rows stand for Arrow's 1 Mi rows: groups cut inside and across frames.
    monkeypatch.setattr(storage, "ROW_GROUP_ROWS", 1000)
    frames = [frame_samples(n, sum(sizes[:i])) for i, n in enumerate(sizes)]
    whole = pl.concat(frames).rechunk() if frames else schemas.empty("frame_samples")
    data = _written(tmp_path, iter(frames), "frame_samples")
    assert data == storage.parquet_bytes("frame_samples", whole)
    assert pq.read_metadata(io.BytesIO(data)).num_row_groups == max(1, -(-whole.height // 1000))


def test_a_failed_stream_leaves_no_file(tmp_path):
    def frames():
        yield frame_samples(3)
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        storage.write_frames(UPath(tmp_path / "frame_samples.parquet"), "frame_samples", frames())
    assert list(tmp_path.iterdir()) == []


def test_slices_are_chunked_as_a_whole_read(monkeypatch, tmp_path):
    """A released table written from the slices is the bytes of one written from ``read_table``: same chunks,
    one slice per chunk (a row group longer than a chunk comes in several slices)."""
    from pipeline.table_scan import READ_BATCH_ROWS, TableParts

    monkeypatch.setattr(storage, "ROW_GROUP_ROWS", READ_BATCH_ROWS + 5000)  # row groups longer than one chunk
    path = UPath(tmp_path / "frame_samples.parquet")
    df = frame_samples(2 * READ_BATCH_ROWS + 20000)
    storage.write_table(path, "frame_samples", df)
    whole = storage.read_table(path, "frame_samples")
    slices = list(TableParts("frame_samples", (path,)).slices())
    assert [s.height for s in slices] == [READ_BATCH_ROWS, 5000, READ_BATCH_ROWS, 5000, 10000]
    chunks = lambda frame: [len(c) for c in frame.to_arrow().column(0).chunks]  # noqa: E731
    assert [n for s in slices for n in chunks(s)] == chunks(whole)
    keep = pl.col("rank") % 3 != 0
    released, _ = storage.frames_bytes("frame_samples", (s.filter(keep) for s in slices), combine=False)
    assert released == storage.parquet_bytes("frame_samples", whole.filter(keep))


def test_an_empty_table_is_one_slice_with_its_columns(tmp_path):
    """A release of no question still hands the gate one (empty) slice with the table's columns."""
    from pipeline.table_scan import TableParts

    path = UPath(tmp_path / "qa.parquet")
    storage.write_table(path, "qa", schemas.empty("qa"))
    slices = list(TableParts("qa", (path,)).slices())
    assert len(slices) == 1 and slices[0].height == 0 and slices[0].schema == schemas.empty("qa").schema
