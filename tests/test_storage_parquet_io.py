"""Parquet IO manager: layout, schema conformance, partition fan-in, atomic rewrites."""

import os

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

import pipeline.storage
from pipeline import schemas
from pipeline.storage import read_table
from resources.parquet_io import ParquetIOManager

parts = dg.DynamicPartitionsDefinition(name="scans")
KEYS = ["scannet/scene0000_00", "synthetic/synth0001_00"]


def frame_samples_for(key: str) -> pl.DataFrame:
    return schemas.from_rows(
        "frame_samples",
        [{"key": key, "budget": "16", "rank": r, "frame_index": 10 * r, "timestamp": r / 10} for r in range(3)],
    )


@dg.asset(partitions_def=parts)
def frame_samples(context: dg.AssetExecutionContext) -> pl.DataFrame:
    if context.partition_key.endswith("broken"):
        raise RuntimeError("broken scan")
    # Columns out of order: the IO manager must conform them to the schema.
    return frame_samples_for(context.partition_key).select(["timestamp", "frame_index", "rank", "budget", "key"])


@dg.asset(partitions_def=parts)
def dummy_videos(frame_samples: pl.DataFrame) -> pl.DataFrame:
    """Per-scan downstream: reads back its own partition only."""
    return schemas.from_rows(
        "dummy_videos",
        [{"key": frame_samples["key"][0], "video_id": "v", "kind": "black", "object_ids": [],
          "frame_indices": frame_samples["frame_index"].to_list(), "path": "videos/x.mp4"}],
    )


@dg.asset
def qa(frame_samples: pl.DataFrame) -> pl.DataFrame:
    """Dataset-wide downstream: reads every partition that exists."""
    keys = sorted(set(frame_samples["key"].to_list()))
    return schemas.from_rows("qa", [{"id": k, "key": k} for k in keys])


@pytest.fixture
def instance():
    inst = dg.DagsterInstance.ephemeral()
    inst.add_dynamic_partitions("scans", KEYS + ["scannet/broken"])
    return inst


def test_partitioned_and_dataset_wide_layout(tmp_path, instance):
    io = ParquetIOManager(root=str(tmp_path / "tables"))
    assets = [frame_samples, dummy_videos, qa]
    for key in KEYS:
        assert dg.materialize(assets, selection=[frame_samples, dummy_videos], partition_key=key,
                              instance=instance, resources={"io_manager": io}).success
    failed = dg.materialize(assets, selection=[frame_samples], partition_key="scannet/broken",
                            instance=instance, resources={"io_manager": io}, raise_on_error=False)
    assert not failed.success
    assert dg.materialize(assets, selection=[qa], instance=instance, resources={"io_manager": io}).success

    for key in KEYS:
        dataset, scene_id = key.split("/")
        path = tmp_path / "tables" / "frame_samples" / dataset / f"{scene_id}.parquet"
        assert pq.read_schema(path).equals(schemas.schema("frame_samples"), check_metadata=False)
        assert read_table(pipeline.storage.upath(path), "frame_samples").equals(frame_samples_for(key))
        videos = pl.read_parquet(tmp_path / "tables" / "dummy_videos" / dataset / f"{scene_id}.parquet")
        assert videos["frame_indices"].to_list() == [[0, 10, 20]]
    assert not (tmp_path / "tables" / "frame_samples" / "scannet" / "broken.parquet").exists()
    # The dataset-wide table is unpartitioned, and the failed partition is simply absent from it.
    qa_table = pl.read_parquet(tmp_path / "tables" / "qa.parquet")
    assert qa_table["key"].to_list() == KEYS


def test_dataset_wide_input_with_no_partitions_is_empty(tmp_path):
    inst = dg.DagsterInstance.ephemeral()
    inst.add_dynamic_partitions("scans", ["scannet/none"])
    io = ParquetIOManager(root=str(tmp_path))
    assert dg.materialize([frame_samples, qa], selection=[qa], instance=inst, resources={"io_manager": io}).success
    assert pl.read_parquet(tmp_path / "qa.parquet").height == 0


def test_same_rows_give_identical_bytes(tmp_path, instance):
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        dg.materialize([frame_samples], partition_key=KEYS[0], instance=instance,
                       resources={"io_manager": ParquetIOManager(root=str(root))})
    paths = [root / "frame_samples" / "scannet" / "scene0000_00.parquet" for root in roots]
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_failed_rewrite_keeps_previous_file_and_leaves_no_temp(tmp_path, instance, monkeypatch):
    io = ParquetIOManager(root=str(tmp_path))
    dg.materialize([frame_samples], partition_key=KEYS[0], instance=instance, resources={"io_manager": io})
    target = tmp_path / "frame_samples" / "scannet" / "scene0000_00.parquet"
    good = target.read_bytes()

    def fail_mid_write(fd):
        raise OSError("disk full")

    # The new bytes are already in the temporary file when the flush to disk fails.
    monkeypatch.setattr(pipeline.storage.os, "fsync", fail_mid_write)
    result = dg.materialize([frame_samples], partition_key=KEYS[0], instance=instance,
                            resources={"io_manager": io}, raise_on_error=False)
    assert not result.success
    assert target.read_bytes() == good
    assert sorted(os.listdir(target.parent)) == ["scene0000_00.parquet"]


def test_rejects_non_dataframe_and_unknown_tables(tmp_path, instance):
    @dg.asset(name="frame_samples", partitions_def=parts)
    def not_a_frame():
        return {"rows": 1}

    @dg.asset
    def not_a_table() -> pl.DataFrame:
        return pl.DataFrame({"x": [1]})

    io = ParquetIOManager(root=str(tmp_path))
    bad = dg.materialize([not_a_frame], partition_key=KEYS[0], instance=instance,
                         resources={"io_manager": io}, raise_on_error=False)
    assert not bad.success
    unknown = dg.materialize([not_a_table], instance=instance, resources={"io_manager": io}, raise_on_error=False)
    assert not unknown.success
    assert not any(tmp_path.rglob("*.parquet"))


def test_partition_keys_cannot_escape_the_root(tmp_path):
    io = ParquetIOManager(root=str(tmp_path))
    with pytest.raises(ValueError):
        io.table_path("frames", "../etc")
    assert str(io.table_path("frames", "scannet/scene0000_00")).endswith("frames/scannet/scene0000_00.parquet")
    assert str(io.table_path("qa")).endswith("qa.parquet")


def test_one_scan_over_many_files_reads_what_file_by_file_reads_give(tmp_path):
    from pipeline.errors import TableError
    from pipeline.storage import parquet_bytes, upath, write_table
    from pipeline.table_scan import existing, read_files, read_tables

    paths = []
    for i in range(5):
        path = upath(tmp_path / "frame_samples" / "synthetic" / f"s{i}.parquet")
        write_table(path, "frame_samples", frame_samples_for(f"synthetic/s{i}") if i != 2 else schemas.empty("frame_samples"))
        paths.append(path)
    missing = upath(tmp_path / "frame_samples" / "synthetic" / "gone.parquet")
    assert existing([*paths, missing]) == tuple(paths)
    scanned, one_by_one = read_tables(paths, "frame_samples"), read_files(paths, "frame_samples")
    assert scanned.equals(one_by_one) and scanned["key"].unique(maintain_order=True).to_list()[0] == "synthetic/s0"
    assert parquet_bytes("frame_samples", scanned) == parquet_bytes("frame_samples", one_by_one)
    assert read_tables(paths, "frame_samples", ["rank", "key"]).columns == ["rank", "key"]
    # A file without one of the schema's columns fails naming that file, as a per-file read does.
    pq.write_table(schemas.to_arrow("frame_samples", frame_samples_for("synthetic/s9")).drop(["timestamp"]),
                   str(tmp_path / "frame_samples" / "synthetic" / "s9.parquet"))
    with pytest.raises(TableError, match="s9.parquet"):
        read_tables([*paths, upath(tmp_path / "frame_samples" / "synthetic" / "s9.parquet")], "frame_samples")
