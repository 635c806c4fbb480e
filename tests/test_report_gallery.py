"""The report's question gallery shows the frames where a question's objects are seen, wherever the videos live."""

from __future__ import annotations

import re

import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.release.build import build_release
from expectations.release_gate import release_gate
from pipeline.storage import upath
from pipeline.frames.budgets import frame_budgets
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
    outcome = build_release(Config(output_root=str(out)), tables=_gallery_tables(), gate=release_gate)
    assert _images(outcome.report.read_text()) > 0


def test_gallery_shows_frames_from_videos_on_s3(tmp_path, s3_bucket):
    local = write_video(tmp_path / "video.mp4", frames=FRAMES)
    root = f"s3://{s3_bucket.name}/out"
    upath(f"{root}/{VIDEO}", s3_bucket.options).write_bytes(local.read_bytes())
    outcome = build_release(Config(output_root=root, storage_options=s3_bucket.options), tables=_gallery_tables(), gate=release_gate)
    html = upath(str(outcome.report), s3_bucket.options).read_text()
    assert _images(html) > 0


@pytest.mark.parametrize("on_s3", [False, True])
def test_gallery_without_the_video_lists_the_question(tmp_path, s3_bucket, on_s3):
    root = f"s3://{s3_bucket.name}/empty" if on_s3 else str(tmp_path / "out")
    options = s3_bucket.options if on_s3 else None
    outcome = build_release(Config(output_root=root, storage_options=options or {}), tables=_gallery_tables(), gate=release_gate)
    html = upath(str(outcome.report), options).read_text()
    assert _images(html) == 0 and "video is not available" in html


def _render(tables, video_file=lambda rel: None) -> str:
    from pipeline.release.report import render_report

    return render_report(tables, video_file=video_file, title="t", samples_per_type=2, budgets=frame_budgets(Config()))


def _video_getter(tmp_path):
    local = write_video(tmp_path / "v.mp4", frames=FRAMES)
    return lambda rel: local if rel == VIDEO else None


def test_counts_agree_with_the_charts_and_dummy_questions_are_counted_apart():
    tables = _gallery_tables()
    qa = tables["qa"]
    dummies = qa.head(3).with_columns(
        id=pl.format("d{}", pl.col("id")), budget=pl.lit("16"), video_kind=pl.lit("black"), video=pl.lit("videos/dummy/black/x.mp4")
    )
    tables["qa"] = pl.concat([qa, dummies])
    html = _render(tables)
    row = re.search(r"<td class=\"l\">revsi</td><td class=\"l\">object_rel_distance_closest</td>(.*?)</tr>", html).group(1)
    cells = re.findall(r"<td class=\"\">(\d+)</td>", row)
    assert cells == ["0", "0", "0", "8", "8", "3"]  # budgets 16, 32, 64, all (real videos), real total, dummy videos
    assert "revsi · object_rel_distance_closest (8)" in html  # the chart counts the same 8 real questions


def test_gallery_boxes_have_a_legend(tmp_path):
    tables = _gallery_tables()
    html = _render(tables, _video_getter(tmp_path))
    legend = re.search(r'<div class="legend"><b>Boxes:</b>(.*?)</div>', html).group(1)
    assert "object 0: chair" in legend and "object 3: tv" in legend
    assert legend.count('class="swatch"') == 4


def test_a_question_naming_no_object_shows_the_room_and_says_why(tmp_path):
    tables = _gallery_tables()
    room = tables["qa"].head(1).with_columns(
        id=pl.lit("room"), question_type=pl.lit("room_size_estimation"), options=pl.lit([], dtype=pl.List(pl.String)),
        ground_truth=pl.lit("20.5"), answer_value=pl.lit(20.5), used_obj_ids=pl.lit([], dtype=pl.List(pl.Int32)),
    )
    tables["qa"] = pl.concat([tables["qa"], room])
    html = _render(tables, _video_getter(tmp_path))
    item = html[html.index("room_size_estimation · video real"):]
    item = item[: item.index('<div class="q">')] if '<div class="q">' in item else item
    assert "no frame with the named objects" not in item
    assert "about the room as a whole" in item and re.search(r'<img alt="frame \d+ of the video"', item)


def test_scan_warnings_are_counted_and_shown():
    tables = _gallery_tables()
    tables["scans"] = tables["scans"].with_columns(
        warnings=pl.lit(["pose/3.txt: not finite, frame skipped", "label 'None' read as text"], dtype=pl.List(pl.String))
    )
    html = _render(tables)
    assert "1 of 1 scans with warnings" in html and "<h2>Scan warnings</h2>" in html
    assert "pose/3.txt: not finite, frame skipped" in html
    tables["scans"] = tables["scans"].with_columns(warnings=pl.lit([], dtype=pl.List(pl.String)))
    assert "None of the 1 scans has a warning" in _render(tables)


def test_frames_read_in_any_order_are_the_frames_a_fresh_seek_reads(tmp_path):
    """The gallery decodes each video forward in rank order; every frame must equal an open-and-seek read of it."""
    import cv2
    import numpy as np

    from pipeline.release.report import VideoFrames

    path = tmp_path / "v.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 4.0, (64, 48))
    rng = np.random.default_rng(0)
    for _ in range(40):  # noisy frames, so predicted frames differ from their keyframe
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()

    def fresh(rank):
        cap = cv2.VideoCapture(str(path))
        cap.set(cv2.CAP_PROP_POS_FRAMES, rank)
        ok, frame = cap.read()
        cap.release()
        return frame

    for ranks in ([0, 1, 5, 13, 14, 30, 39], [39, 2, 2, 27, 3, 26, 0], list(range(40))):
        frames = VideoFrames()
        try:
            for rank in ranks:
                assert np.array_equal(frames.read(path, rank), fresh(rank)), (ranks, rank)
        finally:
            frames.close()
