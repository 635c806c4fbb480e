"""Frame, video and visibility assets on small ScanNet-layout scans: tables, videos and per-scan failures."""

from __future__ import annotations

import dagster as dg
import numpy as np
import pytest

from assets import frames as frame_assets
from assets import scene as scene_assets
from assets import visibility as visibility_assets
from runs.in_process import materialize_quietly
from pipeline.config import load_config
from pipeline.frames.budgets import frame_budgets
from pipeline.storage import read_table, upath
from pipeline.frames.video import video_info
from pipeline.frames.video_paths import budget_video_path
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.scannet_factory import make_box_room

ASSETS = [scene_assets.scene, frame_assets.frame_samples, frame_assets.scan_videos, visibility_assets.visibility,
          visibility_assets.object_visibility, visibility_assets.dummy_videos]


def look_down_poses(folder, n):
    """Rewrite the factory's poses so the cameras look down at the table from 1.5 m."""
    for i in range(n):
        pose = np.eye(4)
        pose[:3, :3] = np.diag([1.0, -1.0, -1.0])  # OpenCV camera looking along -z
        pose[:3, 3] = [1.2 + 0.05 * i, 1.3, 1.5]
        if (folder / "pose" / f"{i}.txt").exists():
            np.savetxt(folder / "pose" / f"{i}.txt", pose, fmt="%f")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vis_assets")
    root = tmp / "scans"
    good = make_box_room(root, "scene0990_00", frames="stream", n_frames=12, nan_frames=(4,))
    look_down_poses(good, 12)
    (good / "pose" / "4.txt").write_text(" ".join(["nan"] * 16))
    no_image = make_box_room(root, "scene0991_00", frames="stream", n_frames=12)
    (no_image / "color" / "6.jpg").unlink()
    corrupt = make_box_room(root, "scene0992_00", frames="stream", n_frames=12)
    # Header and end marker intact (the reader's cheap check passes: bytes that are not a JPEG at all drop their
    # frame with a warning instead, tests/test_bad_input_corpus.py), but no image data: it fails when decoded.
    sof = b"\xff\xc0\x00\x0b\x08\x00\x60\x00\x80\x01\x01\x11\x00"
    (corrupt / "color" / "3.jpg").write_bytes(b"\xff\xd8" + sof + b"garbage" * 10 + b"\xff\xd9")
    config = load_config(None, scans_root=str(root), output_root=str(tmp / "out"))
    storage = StorageResource.from_config(config)
    instance = dg.DagsterInstance.ephemeral()
    keys = ["scannet/scene0990_00", "scannet/scene0991_00", "scannet/scene0992_00"]
    instance.add_dynamic_partitions("scans", keys)
    outcome = {
        key: materialize_quietly(ASSETS, None, default_resources(storage), instance, partition_key=key) for key in keys
    }
    return tmp, config, outcome


def test_good_scan_gets_tables_and_videos(built):
    tmp, config, outcome = built
    assert outcome["scannet/scene0990_00"] == (True, "")
    tables = upath(config.tables_root)
    vis = read_table(tables / "visibility" / "scannet" / "scene0990_00.parquet", "visibility")
    frames = read_table(tables / "frames" / "scannet" / "scene0990_00.parquet", "frames")
    samples = read_table(tables / "frame_samples" / "scannet" / "scene0990_00.parquet", "frame_samples")
    decisions = read_table(tables / "object_visibility" / "scannet" / "scene0990_00.parquet", "object_visibility")
    assert 4 not in vis["frame_index"].to_list()  # the NaN-pose frame is never cast
    assert vis.height > 0
    assert set(samples["budget"].to_list()) == set(frame_budgets(config))
    assert decisions.filter(decisions["budget"] == "all")["visible"].any()
    n_all = int(frames["in_all_frame"].sum())
    for budget, expected in (("16", 16), ("64", 64), ("all", n_all)):
        info = video_info(tmp / "out" / budget_video_path(budget, "scannet/scene0990_00"))
        assert info["frames"] == expected and (info["width"], info["height"]) == (640, 480)


def test_missing_image_fails_only_its_scan(built):
    _, _, outcome = built
    ok, message = outcome["scannet/scene0991_00"]
    assert not ok
    assert message.startswith("scannet/scene0991_00:") and "6" in message
    assert outcome["scannet/scene0990_00"][0]


def test_unreadable_image_fails_only_its_scan_when_videos_are_written(built):
    tmp, _, outcome = built
    ok, message = outcome["scannet/scene0992_00"]
    assert not ok
    assert message.startswith("scannet/scene0992_00: ") and "3" in message
    assert not (tmp / "out" / budget_video_path("all", "scannet/scene0992_00")).exists()


def test_dummy_videos_cover_the_visible_objects(built):
    tmp, config, _ = built
    table = read_table(upath(config.tables_root) / "dummy_videos" / "scannet" / "scene0990_00.parquet", "dummy_videos")
    assert table.height > 0 and "black" in table["kind"].to_list()
    for row in table.iter_rows(named=True):
        info = video_info(tmp / "out" / row["path"])
        assert info["frames"] == 16 == len(row["frame_indices"])
