"""A release is self-consistent about dummy videos: every row of its ``dummy_videos`` names an mp4 it ships."""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.config import Config
from pipeline.release.build import build_release
from expectations.release_gate import release_gate
from pipeline.storage import read_table, upath
from tests.test_quality_gate import _tables

KEY = "synthetic/synth0000_00"
PLAYED = "videos/dummy/black/played.mp4"
UNPLAYED = "videos/dummy/query_drop/unplayed.mp4"


def test_released_dummy_rows_name_shipped_videos(tmp_path):
    out = tmp_path / "out"
    tables = _tables()
    dummy_question = tables["qa"].head(1).with_columns(
        pl.lit("q-dummy").alias("id"), pl.lit("black").alias("video_kind"), pl.lit(PLAYED).alias("video")
    )
    tables["qa"] = pl.concat([tables["qa"], dummy_question])
    tables["dummy_videos"] = schemas.from_rows(
        "dummy_videos",
        [
            # Two object sets served by one shared black video, and a query-drop video no question plays.
            {"key": KEY, "video_id": "played", "kind": "black", "object_ids": [0], "frame_indices": [-1] * 16,
             "path": PLAYED},
            {"key": KEY, "video_id": "played", "kind": "black", "object_ids": [1], "frame_indices": [-1] * 16,
             "path": PLAYED},
            {"key": KEY, "video_id": "unplayed", "kind": "query_drop", "object_ids": [2],
             "frame_indices": list(range(16)), "path": UNPLAYED},
        ],
    )
    tables["frame_samples"] = schemas.empty("frame_samples")  # the report's gallery looks frames up in these
    tables["visibility"] = schemas.empty("visibility")
    for rel in ("v.mp4", PLAYED, UNPLAYED):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"stand-in video")
    outcome = build_release(Config(output_root=str(out)), tables=tables, gate=release_gate)
    release = outcome.release.path
    released = read_table(upath(release / "tables" / "dummy_videos.parquet"), "dummy_videos")
    assert released.height == 2 and set(released["path"]) == {PLAYED}
    for path in released["path"].to_list():
        assert (release / path).is_file(), path
    assert not (release / UNPLAYED).exists()
    assert outcome.release.manifest["row_counts"]["dummy_videos"] == 2
