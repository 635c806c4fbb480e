from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import FramesConfig
from pipeline.frames.dummy_videos import make_dummy_videos, plan_dummy_videos, query_drop_frames
from pipeline.errors import ScanError
from pipeline.frames.budgets import mark_all_frame
from pipeline.frames.video import video_info

KEY = "synthetic/synth0000_00"
SMALL = FramesConfig(width=160, height=120)


def frames_table(n=90):
    rows = [
        {
            "key": KEY,
            "frame_index": i,
            "timestamp": i / 30.0,
            "pose": np.eye(4).ravel().tolist(),
            "intrinsics": [500.0, 0, 320, 0, 500, 240, 0, 0, 1],
            "width": 640,
            "height": 480,
            "valid": True,
            "in_all_frame": False,
        }
        for i in range(n)
    ]
    return mark_all_frame(schemas.from_rows("frames", rows), 10.0)  # frames 0, 3, ..., 87


def visibility_table():
    rows = []
    for f in range(0, 90, 3):
        if f < 45:
            rows.append((f, 1, 500))  # object 1 in the first half
        if f % 9 == 0:
            rows.append((f, 2, 20))  # object 2 every third all-frame frame
        rows.append((f, 3, 1000))  # object 3 everywhere
    return schemas.from_rows(
        "visibility",
        [
            {"key": KEY, "frame_index": f, "object_id": o, "visible_pixels": px, "frame_fraction": px / 307200,
             "bbox": [0, 0, 1, 1]}
            for f, o, px in rows
        ],
    )


def image(i):
    return np.full((480, 640, 3), (i * 5) % 250, dtype=np.uint8)


def test_query_drop_frames_never_show_a_queried_object():
    frames, vis = frames_table(), visibility_table()
    picked = query_drop_frames(KEY, [1, 2], vis, frames)
    assert len(picked) == 16
    shown = set(vis.filter(pl.col("object_id").is_in([1, 2]))["frame_index"].to_list())
    assert not set(picked.tolist()) & shown
    candidates = [f for f in range(0, 90, 3) if f not in shown]
    assert picked.tolist() == [candidates[i] for i in np.linspace(0, len(candidates) - 1, 16, dtype=int)]
    assert query_drop_frames(KEY, [3], vis, frames).size == 0


def test_plan_rows_kinds_and_ids_are_stable():
    frames, vis = frames_table(), visibility_table()
    plan = plan_dummy_videos(KEY, [[2, 1], [1, 2], [3]], vis, frames)
    assert plan["kind"].to_list() == ["query_drop", "first_frame", "black", "black"]
    qd = plan.filter(pl.col("kind") == "query_drop").row(0, named=True)
    ff = plan.filter(pl.col("kind") == "first_frame").row(0, named=True)
    assert qd["object_ids"] == [1, 2] and ff["frame_indices"] == [qd["frame_indices"][0]] * 16
    blacks = plan.filter(pl.col("kind") == "black")
    assert blacks["frame_indices"].to_list() == [[-1] * 16, [-1] * 16]
    assert plan.equals(plan_dummy_videos(KEY, [[3], [1, 2]], vis, frames))
    # Videos are named by what they show: both object sets' black videos are one file.
    assert blacks["video_id"].n_unique() == 1 and blacks["path"].n_unique() == 1
    assert plan["video_id"].n_unique() == 3
    assert qd["path"] == f"videos/dummy/query_drop/{qd['video_id']}.mp4"


def test_make_dummy_videos_writes_decodable_16_frame_videos(tmp_path):
    frames, vis = frames_table(), visibility_table()
    table = make_dummy_videos(KEY, [[1, 2]], vis, frames, image, str(tmp_path), frames_config=SMALL)
    assert table.height == 3
    for row in table.iter_rows(named=True):
        info = video_info(tmp_path / row["path"])
        assert info["frames"] == 16 and (info["width"], info["height"]) == (160, 120)
    black = table.filter(pl.col("kind") == "black")["path"][0]
    import cv2

    cap = cv2.VideoCapture(str(tmp_path / black))
    ok, first = cap.read()
    cap.release()
    assert ok and first.max() <= 2


def test_missing_image_is_a_scan_error(tmp_path):
    frames, vis = frames_table(), visibility_table()

    def broken(i):
        raise OSError("cannot read color/45.jpg")

    with pytest.raises(ScanError, match="image missing or unreadable"):
        make_dummy_videos(KEY, [[1]], vis, frames, broken, str(tmp_path), frames_config=SMALL)


def test_identical_frame_lists_are_encoded_once(tmp_path, monkeypatch):
    """Sets whose videos show the same frames share one file; every row names a file that was written."""
    import pipeline.frames.dummy_videos as dummy

    frames, vis = frames_table(), visibility_table()
    encoded: list[str] = []
    real_write = dummy.write_video

    def counting_write(output_root, relative, *args, **kwargs):
        encoded.append(relative)
        return real_write(output_root, relative, *args, **kwargs)

    monkeypatch.setattr(dummy, "write_video", counting_write)
    # Object 2 shows in a third of the frames and object 4 in none: with object 1 they give different lists,
    # but {1} and {1, 4} hide in exactly the same frames.
    table = make_dummy_videos(KEY, [[1], [1, 4], [1, 2], [3]], vis, frames, image, str(tmp_path), frames_config=SMALL)
    assert table.height == 3 + 3 + 3 + 1
    assert sorted(encoded) == sorted(set(table["path"].to_list())) and len(encoded) == len(set(encoded))
    by_set = {(r["kind"], tuple(r["object_ids"])): r["path"] for r in table.iter_rows(named=True)}
    assert by_set[("query_drop", (1,))] == by_set[("query_drop", (1, 4))] != by_set[("query_drop", (1, 2))]
    assert by_set[("first_frame", (1,))] == by_set[("first_frame", (1, 4))]
    assert len({p for (kind, _), p in by_set.items() if kind == "black"}) == 1
    assert len(encoded) == 1 + 2 + 2  # one black, two query-drop lists, two first frames (45 and 48)
    for path in encoded:
        assert video_info(tmp_path / path)["frames"] == 16
