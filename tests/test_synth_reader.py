"""Synthetic scans read back through the real ScanNet reader give back the generator's ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import Config
from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.scene.readers import read_scan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scene import generate_scene

SEED = 11
FRAMES = 3


def _round_trips(root, indices):
    out = []
    for index in indices:
        scene = generate_scene(SEED, index, FRAMES)
        folder = write_scannet(scene, root)
        out.append((scene, read_scan(str(folder), Config(scans_root=str(root)))))
    return out


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory):
    # One scene in the default run: parsing a 0.5M-triangle PLY takes seconds; more scenes under -m slow.
    return _round_trips(tmp_path_factory.mktemp("scans"), (0,))


def _horizontal(extent: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, float]:
    vertical = int(np.argmax(np.abs(rotation[2, :])))
    return np.sort(np.delete(extent, vertical)), float(extent[vertical])


def test_reader_boxes_match_the_truth_within_2cm(round_trips):
    _check_boxes(round_trips)


@pytest.mark.slow
def test_reader_boxes_match_the_truth_on_more_scenes(tmp_path):
    _check_boxes(_round_trips(tmp_path, (1, 2, 3, 4)))


def _check_boxes(round_trips):
    for scene, scan in round_trips:
        by_id = {o.object_id: o for o in scan.objects}
        assert sorted(by_id) == [o.object_id for o in scene.objects]
        for truth in scene.objects:
            read = by_id[truth.object_id]
            assert read.raw_label == truth.label
            obb = gravity_aligned_obb(scan.mesh.vertices[read.vertex_indices])
            box = truth.box.to_oriented()
            assert np.linalg.norm(obb.center - box.center) <= 0.02, (scene.scene_id, truth.label)
            read_xy, read_h = _horizontal(obb.extent, obb.rotation)
            true_xy, true_h = _horizontal(box.extent, box.rotation)
            assert np.abs(read_xy - true_xy).max() <= 0.02, (scene.scene_id, truth.label, read_xy, true_xy)
            assert abs(read_h - true_h) <= 0.02, (scene.scene_id, truth.label)


def test_reader_triangle_owners_match(round_trips):
    for scene, scan in round_trips:
        assert np.array_equal(scan.mesh.triangle_object_ids, scene.mesh.triangle_object_ids)


def test_poses_and_intrinsics_round_trip(round_trips):
    for scene, scan in round_trips:
        assert len(scan.frames) == FRAMES
        for i, frame in enumerate(scan.frames):
            np.testing.assert_allclose(frame.pose, scene.poses[i], rtol=0, atol=1e-9)
            np.testing.assert_array_equal(frame.intrinsics, scene.intrinsics)
            assert (frame.width, frame.height) == (scene.width, scene.height)
            assert frame.timestamp == pytest.approx(i / scene.fps)
        assert scan.dataset == "synthetic" and scan.scene_type == scene.scene_type


def test_a_multi_room_scan_read_back_has_a_main_room_smaller_than_the_scene(tmp_path):
    """Seed 0: scene 0 is a two-room flat, scene 1 a single bathroom (issue 38, item 7: main was the whole flat)."""
    import shapely

    def areas(scan):
        return {room.kind: room.polygon.area for room in scan.rooms}

    flat = generate_scene(0, 0, FRAMES)
    assert flat.scene_type == "Apartment" and len(flat.room_plans) == 2
    read = read_scan(str(write_scannet(flat, tmp_path)), Config(scans_root=str(tmp_path)))
    derived = areas(read)
    assert derived["main"] < derived["scene"] - 5.0
    # The main room is the plan room the camera is in most, give or take its walls (0.1 m thick).
    centres = flat.poses[:, :3, 3]
    plan = max(flat.room_plans.values(), key=lambda kp: shapely.contains_xy(kp[1], centres[:, 0], centres[:, 1]).sum())[1]
    main = next(r.polygon for r in read.rooms if r.kind == "main")
    assert plan.area <= main.area <= plan.buffer(0.2, join_style="mitre").area
    assert next(r.polygon for r in flat.rooms if r.kind == "main").equals(plan)  # the in-memory scan agrees

    single = generate_scene(0, 1, FRAMES)
    assert len(single.room_plans) == 1
    read = read_scan(str(write_scannet(single, tmp_path)), Config(scans_root=str(tmp_path)))
    assert areas(read)["main"] == areas(read)["scene"]
