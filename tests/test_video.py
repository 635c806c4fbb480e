from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import FramesConfig
from pipeline.errors import ScanError
from pipeline.frames.budgets import mark_all_frame, sample_frames
from pipeline.frames.video import VideoFrameSource, video_frame, video_info, write_scan_videos, write_video

KEY = "synthetic/synth0000_00"


def numbered_image(i: int, width: int = 1296, height: int = 968) -> np.ndarray:
    """A flat image whose grey level encodes ``i`` (survives mp4 compression)."""
    img = np.full((height, width, 3), (i * 11) % 250, dtype=np.uint8)
    return img


def frames_table(n: int, invalid=(), width=1296, height=968) -> pl.DataFrame:
    rows = []
    for i in range(n):
        ok = i not in invalid
        rows.append(
            {
                "key": KEY,
                "frame_index": i,
                "timestamp": i / 30.0,
                "pose": (np.eye(4) if ok else np.full((4, 4), np.nan)).ravel().tolist(),
                "intrinsics": [1170.0, 0, 648, 0, 1170, 484, 0, 0, 1],
                "width": width,
                "height": height,
                "valid": ok,
                "in_all_frame": False,
            }
        )
    return mark_all_frame(schemas.from_rows("frames", rows), 10.0)


def test_video_round_trip_and_frame_source(tmp_path):
    frames = [video_frame(numbered_image(i, 320, 240), (320, 240)) for i in range(40)]
    n = write_video(str(tmp_path), "v/clip.mp4", frames, 10.0, (320, 240))
    info = video_info(tmp_path / "v/clip.mp4")
    assert n == 40 and info["frames"] == 40 and (info["width"], info["height"]) == (320, 240)
    with VideoFrameSource(tmp_path / "v/clip.mp4") as source:
        assert len(source) == 40
        for i in [0, 1, 2, 17, 5, 39, 38, 12]:
            img = source.read(i)
            assert img.shape == (240, 320, 3)
            assert abs(float(img.mean()) - (i * 11) % 250) < 5
        with pytest.raises(IndexError):
            source.read(40)
    assert not list((tmp_path / "v").glob(".*"))  # no temporary file left behind


def test_scan_videos_have_budget_frame_counts_and_skip_nan_poses(tmp_path):
    frames = frames_table(210, invalid=set(range(60, 90)) | {3}, width=660, height=490)
    samples = sample_frames(frames, FramesConfig())
    loaded = []

    def load(i):
        loaded.append(i)
        assert frames.filter(pl.col("frame_index") == i)["valid"][0]
        return numbered_image(i, 660, 490)

    small = FramesConfig(width=320, height=240)  # encoding time scales with the output size
    result = write_scan_videos(
        KEY, samples, frames, load, str(tmp_path), fps=10.0, frames_config=small
    )
    n_all = samples.filter(pl.col("budget") == "all").height
    assert result["frames"] == {"16": 16, "32": 32, "64": 64, "all": n_all}
    assert result["skipped_invalid_pose"] == 31
    assert sorted(loaded) == sorted(set(loaded))  # each source image decoded once
    for budget, rel in result["videos"].items():
        info = video_info(tmp_path / rel)
        assert info["frames"] == result["frames"][budget]
        assert (info["width"], info["height"]) == (320, 240)
    assert result["videos"]["16"] == "videos/16_frame/synthetic/synth0000_00.mp4"
    assert result["videos"]["all"] == "videos/all_frame/synthetic/synth0000_00.mp4"
    with VideoFrameSource(tmp_path / result["videos"]["16"]) as source:
        idx16 = samples.filter(pl.col("budget") == "16").sort("rank")["frame_index"].to_list()
        for rank, fi in enumerate(idx16):
            assert abs(float(source.read(rank).mean()) - (fi * 11) % 250) < 5


def test_short_scan_repeats_frames_in_budget_videos(tmp_path):
    frames = frames_table(30)  # 10 all-frame frames
    samples = sample_frames(frames, FramesConfig())
    result = write_scan_videos(
        KEY, samples, frames, numbered_image, str(tmp_path), fps=10.0, frames_config=FramesConfig(width=160, height=120)
    )
    assert result["frames"]["64"] == 64 and result["frames"]["all"] == 10
    assert video_info(tmp_path / result["videos"]["64"])["frames"] == 64


def test_portrait_and_rotated_frames(tmp_path):
    frames = frames_table(12, width=968, height=1296)
    samples = sample_frames(frames, FramesConfig())
    small = FramesConfig(width=160, height=120)
    portrait = lambda i: numbered_image(i, 968, 1296)  # noqa: E731
    result = write_scan_videos(KEY, samples, frames, portrait, str(tmp_path), fps=10.0, frames_config=small)
    assert result["size"] == [120, 160]
    rotated = write_scan_videos(
        KEY, samples, frames, portrait, str(tmp_path), fps=10.0, frames_config=small, image_rotation=90
    )
    assert rotated["size"] == [160, 120]
    info = video_info(tmp_path / rotated["videos"]["all"])
    assert (info["width"], info["height"]) == (160, 120)


def test_missing_or_unreadable_image_is_a_scan_error_and_leaves_no_video(tmp_path):
    frames = frames_table(30)
    samples = sample_frames(frames, FramesConfig())

    def load(i):
        if i == 9:
            raise FileNotFoundError(f"color/{i}.jpg")
        return numbered_image(i)

    with pytest.raises(ScanError, match=r"synthetic/synth0000_00: frame 9: image missing or unreadable"):
        write_scan_videos(KEY, samples, frames, load, str(tmp_path), fps=10.0)
    with pytest.raises(ScanError, match="frame 0"):
        write_scan_videos(KEY, samples, frames, lambda i: None, str(tmp_path), fps=10.0)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_videos_upload_to_s3_outputs(tmp_path, s3_bucket):
    from pipeline.storage import upath

    bucket, options = s3_bucket.name, s3_bucket.options
    frames = frames_table(30)
    samples = sample_frames(frames, FramesConfig())
    small = FramesConfig(width=160, height=120)
    result = write_scan_videos(
        KEY, samples, frames, numbered_image, f"s3://{bucket}/out", fps=10.0, frames_config=small,
        storage_options=options,
    )
    remote = upath(f"s3://{bucket}/out/{result['videos']['16']}", options)
    local = tmp_path / "16.mp4"
    local.write_bytes(remote.read_bytes())
    assert video_info(local)["frames"] == 16
