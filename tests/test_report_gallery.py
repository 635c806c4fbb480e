"""The report's question gallery shows the frames where a question's objects are seen, wherever the videos live."""

from __future__ import annotations

import re

import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.release.build import build_release
from pipeline.storage import upath
from pipeline.frames.video_paths import budget_video_path
from tests.test_quality_gate import _tables
from tests.test_scoring_support import write_video

KEY = "synthetic/synth0000_00"
VIDEO = budget_video_path("all", KEY)
FRAMES = 4


def _gallery_tables() -> dict[str, pl.DataFrame]:
    tables = _tables()
    tables["qa"] = tables["qa"].with_columns(video=pl.lit(VIDEO))
    tables["frame_samples"] = schemas.from_rows(
        "frame_samples",
        [{"key": KEY, "budget": "all", "rank": r, "frame_index": r, "timestamp": r / 10} for r in range(FRAMES)],
    )
    tables["visibility"] = schemas.from_rows(
        "visibility",
        [
            {"key": KEY, "frame_index": f, "object_id": o, "visible_pixels": 50 + 10 * f + o, "frame_fraction": 0.1,
             "bbox": [2, 2, 20, 16]}
            for f in range(FRAMES) for o in range(4)
        ],
    )
    return tables


def _images(html: str) -> int:
    return len(re.findall(r'<img alt="frame \d+" src="data:image/jpeg;base64,', html))


def test_gallery_shows_frames_from_local_videos(tmp_path):
    out = tmp_path / "out"
    write_video(out / VIDEO, frames=FRAMES)
    outcome = build_release(Config(output_root=str(out)), tables=_gallery_tables())
    assert _images(outcome.report.read_text()) > 0


def test_gallery_shows_frames_from_videos_on_s3(tmp_path, s3_bucket):
    local = write_video(tmp_path / "video.mp4", frames=FRAMES)
    root = f"s3://{s3_bucket.name}/out"
    upath(f"{root}/{VIDEO}", s3_bucket.options).write_bytes(local.read_bytes())
    outcome = build_release(Config(output_root=root, storage_options=s3_bucket.options), tables=_gallery_tables())
    html = upath(str(outcome.report), s3_bucket.options).read_text()
    assert _images(html) > 0


@pytest.mark.parametrize("on_s3", [False, True])
def test_gallery_without_the_video_lists_the_question(tmp_path, s3_bucket, on_s3):
    root = f"s3://{s3_bucket.name}/empty" if on_s3 else str(tmp_path / "out")
    options = s3_bucket.options if on_s3 else None
    outcome = build_release(Config(output_root=root, storage_options=options or {}), tables=_gallery_tables())
    html = upath(str(outcome.report), options).read_text()
    assert _images(html) == 0 and "video is not available" in html
