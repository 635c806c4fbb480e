"""Visibility on whole scenes: the synthetic generator's renders and the real ScanNet fixture mesh."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.frames.budgets import mark_all_frame, sample_frames
from pipeline.visibility.cast import compute_visibility, object_visibility


def look_at(eye, target):
    z = np.asarray(target, float) - np.asarray(eye, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = x, np.cross(z, x), z, eye
    return pose


@pytest.mark.slow
def test_visible_ids_equal_the_synthetic_renderer_pixel_for_pixel():
    from pipeline.scene.tables import scene_tables
    from pipeline.synth.render import FrameRenderer
    from pipeline.synth.scene import generate_scene

    scene = generate_scene(seed=7, scene_index=0, frames=30)
    parsed = scene.to_parsed_scan()
    config = Config()
    config.visibility.cast = "full"  # every row exact (the adaptive cast's exact rows: tests/test_visibility_adaptive.py)
    frames = scene_tables(parsed, config)["frames"]
    vis = compute_visibility(parsed.key, frames, parsed.mesh, config)
    renderer = FrameRenderer(scene)
    kept = frames.filter(pl.col("in_all_frame"))["frame_index"].to_list()
    assert kept
    for i in kept[::3]:
        ids = renderer.render(i).object_ids
        present, counts = np.unique(ids[ids >= 0], return_counts=True)
        rows = vis.filter(pl.col("frame_index") == i).sort("object_id")
        assert rows["object_id"].to_list() == present.tolist()
        assert rows["visible_pixels"].to_list() == counts.tolist()
        for r in rows.iter_rows(named=True):
            ys, xs = np.nonzero(ids == r["object_id"])
            assert r["bbox"] == [xs.min(), ys.min(), xs.max(), ys.max()]


def scannet_walk(key: str, center: np.ndarray, frames: int = 72) -> pl.DataFrame:
    """Two circles of radius 1.5 m at 1.5 m height around the scene centre, looking outward, down then up."""
    K = [577.87, 0.0, 319.5, 0.0, 577.87, 239.5, 0.0, 0.0, 1.0]
    rows = []
    for i in range(frames):
        a = 4 * np.pi * i / frames
        eye = np.array([center[0] + 1.5 * np.cos(a), center[1] + 1.5 * np.sin(a), 1.5])
        target = eye + np.array([np.cos(a), np.sin(a), -0.5 if i < frames // 2 else 0.15])
        rows.append(
            {"key": key, "frame_index": i, "timestamp": i / 10.0, "pose": look_at(eye, target).ravel().tolist(),
             "intrinsics": K, "width": 640, "height": 480, "valid": True, "in_all_frame": False}
        )
    return mark_all_frame(schemas.from_rows("frames", rows), 10.0)


@pytest.mark.slow
def test_scannet_fixture_furniture_is_seen_from_a_camera_walk(fixtures_dir):
    from pipeline.scene.readers import read_scan
    from pipeline.scene.tables import scene_tables

    config = Config(label_map=str(fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv"))
    parsed = read_scan(fixtures_dir / "scannet" / "scene0000_00", config)
    objects = scene_tables(parsed, config)["objects"]
    v = parsed.mesh.vertices
    center = (v.min(axis=0) + v.max(axis=0)) / 2
    frames = scannet_walk(parsed.key, center)
    vis = compute_visibility(parsed.key, frames, parsed.mesh, config)
    decisions = object_visibility(parsed.key, vis, sample_frames(frames, config), objects, config=config)
    furniture = objects.filter(~pl.col("structural"))
    seen_any = set(vis["object_id"].to_list()) & set(furniture["object_id"].to_list())
    rule_visible = decisions.filter((pl.col("budget") == "all") & pl.col("visible"))
    seen_rule = set(rule_visible["object_id"].to_list()) & set(furniture["object_id"].to_list())
    print(
        f"\nscene0000_00: {len(seen_any)}/{furniture.height} furniture objects with a visible pixel, "
        f"{len(seen_rule)}/{furniture.height} visible by the SPEC §3 rule (all-frame budget), "
        f"{vis.height} visibility rows over {frames.height} frames"
    )
    assert len(seen_any) >= 0.8 * furniture.height
