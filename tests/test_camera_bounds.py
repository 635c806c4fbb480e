"""Cameras within physical bounds (issue 27, item 4).

A finite, rigid pose can still be absurd: a translation of 1e308 m passed every
check, was sampled into every budget and overflowed to inf when the visibility
step cast its rays in float32. A camera more than ``MAX_CAMERA_DISTANCE_M``
outside the scene's bounding box now drops its frame with one warning, the way a
non-rigid pose does.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pipeline.config import Config
from pipeline.frames import frame_checks
from pipeline.frames.frame_checks import (
    MAX_CAMERA_DISTANCE_M,
    FrameFiles,
    check_frames,
    distance_outside,
    far_camera_problem,
    rigid_problem,
)
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan, SceneObject
from pipeline.scene.readers import read_scan
from pipeline.scene.tables import scene_tables
from pipeline.visibility.cast import compute_visibility
from tests.real_scans import write_scan

BOUNDS = (np.array([0.0, 0.0, 0.0]), np.array([4.0, 3.0, 2.5]))
NAMES = FrameFiles(lambda i: "intrinsic/intrinsic_color.txt", lambda i: f"pose/{i}.txt")


def at(x: float, y: float = 1.0, z: float = 1.5) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = [x, y, z]
    return pose


def scan_of(poses, mesh=True, boxes=()) -> ParsedScan:
    k = np.array([[100.0, 0, 64], [0, 100.0, 48], [0, 0, 1]])
    frames = [Frame(i, i / 10, pose, k, 128, 96) for i, pose in enumerate(poses)]
    corners = np.array([[x, y, z] for x in (0, 4) for y in (0, 3) for z in (0, 2.5)], float)
    geometry = Mesh(corners, np.array([[0, 1, 2]], np.int32)) if mesh else None
    objects = [SceneObject(n, "box", box=box) for n, box in enumerate(boxes)]
    return ParsedScan("synthetic", "synth0001_00", "", geometry, objects, frames=frames)


@pytest.fixture(autouse=True)
def runtime_warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def test_the_bound_is_distance_outside_the_box():
    assert distance_outside(np.array([2.0, 1.0, 1.0]), BOUNDS) == 0.0
    assert distance_outside(np.array([-3.0, 7.0, 1.0]), BOUNDS) == pytest.approx(5.0)
    assert far_camera_problem(at(4.0 + MAX_CAMERA_DISTANCE_M - 1), BOUNDS) is None
    problem = far_camera_problem(at(4.0 + MAX_CAMERA_DISTANCE_M + 1), BOUNDS)
    assert problem == "camera at (1005, 1, 1.5) is 1001 m outside the scene's bounding box (limit 1000 m)"


@pytest.mark.parametrize("x", [1e308, -1e308, 1e39, 1.7e308])
def test_huge_finite_positions_are_too_far_without_an_overflow_warning(x):
    problem = far_camera_problem(at(x, 1e308, -1e308), BOUNDS)
    assert problem and "outside the scene's bounding box" in problem


def test_a_rotation_whose_square_overflows_is_not_rigid_and_warns_nothing():
    pose = np.eye(4)
    pose[:3, :3] = 1e200
    assert "not a rotation" in rigid_problem(pose)
    pose[:3, :3] = np.diag([1e200, 1e-200, 1.0])  # RᵀR: one entry overflows to inf, one underflows to 0
    assert rigid_problem(pose) is not None


def test_far_cameras_drop_their_frames_with_one_counted_warning():
    scan = scan_of([at(1), at(1e308), at(2), at(5000), np.full((4, 4), np.nan)])
    check_frames(scan, NAMES)
    assert [f.valid for f in scan.frames] == [True, False, True, False, False]
    assert scan.warnings == [
        f"2 of 5 frames have a camera more than {MAX_CAMERA_DISTANCE_M:g} m outside the scene and are dropped "
        "(first: pose/1.txt: camera at (1e+308, 1, 1.5) is too far to measure (the distance overflows) outside "
        "the scene's bounding box (limit 1000 m))"
    ]


def test_non_rigid_and_far_poses_are_counted_apart():
    sheared = at(1)
    sheared[0, 1] = 0.5
    scan = scan_of([sheared, at(1e6), at(1)])
    check_frames(scan, NAMES)
    assert [w.split(" (first")[0] for w in scan.warnings] == [
        "1 of 3 frames have a pose that is not a rigid transform and are dropped",
        "1 of 3 frames have a camera more than 1000 m outside the scene and are dropped",
    ]


def test_without_a_mesh_the_objects_boxes_bound_the_scene():
    box = OrientedBox(np.array([2.0, 1.5, 1.0]), np.array([4.0, 3.0, 2.0]), np.eye(3))
    scan = scan_of([at(1), at(2000)], mesh=False, boxes=[box])
    check_frames(scan, NAMES)
    assert [f.valid for f in scan.frames] == [True, False]


def test_with_no_geometry_at_all_no_frame_is_judged_far():
    scan = scan_of([at(1), at(2000)], mesh=False)
    check_frames(scan, NAMES)
    assert all(f.valid for f in scan.frames) and not scan.warnings


def test_a_real_scan_with_far_poses_drops_them_and_casts_without_overflow(tmp_path):
    folder = write_scan(tmp_path / "scans", "synth0001_00", frames=8)
    far = at(1e308)
    for index in range(1, 8):
        np.savetxt(folder / "pose" / f"{index}.txt", far)
    config = Config(scans_root=str(tmp_path / "scans"))
    scan = read_scan(str(folder), config)
    assert [f.valid for f in scan.frames] == [True] + [False] * 7
    assert any(w.startswith("7 of 8 frames have a camera more than 1000 m outside") for w in scan.warnings)
    tables = scene_tables(scan, config)
    visibility = compute_visibility(scan.key, tables["frames"], scan.mesh, config)
    assert set(visibility["frame_index"].to_list()) <= {0}


def test_the_real_scan_check_above_would_see_the_overflow_without_the_bound(tmp_path, monkeypatch):
    """The end-to-end test above is not vacuous: with the bound lifted the far frames reach the ray cast."""
    monkeypatch.setattr(frame_checks, "MAX_CAMERA_DISTANCE_M", float("inf"))
    folder = write_scan(tmp_path / "scans", "synth0001_00", frames=8)
    for index in range(1, 8):
        np.savetxt(folder / "pose" / f"{index}.txt", at(1e308))
    config = Config(scans_root=str(tmp_path / "scans"))
    scan = read_scan(str(folder), config)
    tables = scene_tables(scan, config)
    with pytest.raises(RuntimeWarning, match="overflow"):
        compute_visibility(scan.key, tables["frames"], scan.mesh, config)
