"""MultiScan reader: the real annotation fixture, both schemas, a synthetic scan round trip, and bad input."""

from __future__ import annotations

import re

import json
import shutil

import numpy as np
import pytest

from pipeline.config import Config
from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.scene.readers import detect_dataset, read_scan
from pipeline.scene.readers.multiscan import (
    ARKIT_TO_OPENCV,
    ARKIT_Y_UP_TO_Z_UP,
    raw_label,
    read_camera_stream,
    read_multiscan_annotations,
)
from pipeline.scene.readers.rscan import sky_up_rotation
from pipeline.scene.tables import scene_tables
from pipeline.formats.ply import write_ply
from pipeline.synth.multiscan_writer import mesh_to_arkit, write_multiscan
from pipeline.synth.scene import generate_scene
from pipeline.frames.video import VideoWriter
from tests.reader_errors import scan_error

SEED = 7


# --- the real fixture -------------------------------------------------------------------------


def test_fixture_parses_28_objects_with_the_files_own_bounds(fixtures_dir):
    path = fixtures_dir / "multiscan" / "scene_00000_00.annotations.json"
    objects = read_multiscan_annotations(path)
    data = json.loads(path.read_text())["objects"]
    assert len(objects) == 28
    assert [o.object_id for o in objects] == list(range(1, 29))  # old schema: numbered in file order
    for obj, raw in zip(objects, data):
        assert obj.name == raw["label"]
        corners = obj.box.corners()
        # Rows convention: the file's min/max are exactly the bounds of the box's corners.
        assert np.allclose(corners.min(axis=0), raw["obb"]["min"], atol=1e-9)
        assert np.allclose(corners.max(axis=0), raw["obb"]["max"], atol=1e-9)
        assert np.allclose(obj.box.center, raw["obb"]["centroid"])
        rows = np.reshape(raw["obb"]["normalizedAxes"], (3, 3))
        if "up" not in raw["obb"]:
            assert obj.up is None
            continue
        # front and up each lie along one box axis (a row), and are perpendicular
        assert np.abs(rows @ obj.up).max() == pytest.approx(1.0)
        assert np.abs(rows @ obj.front).max() == pytest.approx(1.0)
        assert abs(float(obj.front @ obj.up)) < 1e-9
    labels = {o.name: o.label for o in objects}
    assert labels["wall_cabinet.1"] == "wall cabinet" and labels["bag.1"] == "bag" and labels["remove"] == "remove"


def test_fixture_boxes_read_as_columns_would_miss_the_bounds(fixtures_dir):
    """The column reading is wrong for this file: its corners miss the recorded min/max by up to ~1 m."""
    raw = json.loads((fixtures_dir / "multiscan" / "scene_00000_00.annotations.json").read_text())["objects"]
    worst = 0.0
    for entry in raw:
        obb = entry["obb"]
        cols = np.reshape(obb["normalizedAxes"], (3, 3))
        signs = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], dtype=float)
        corners = np.asarray(obb["centroid"]) + (signs * np.asarray(obb["axesLengths"]) / 2) @ cols.T
        worst = max(worst, float(np.abs(corners.min(axis=0) - obb["min"]).max()))
    assert worst > 0.5


def test_fixture_camera_stream_is_60_fps_column_major_and_sideways(fixtures_dir):
    stream = read_camera_stream(fixtures_dir / "multiscan" / "camera-info-example.jsonl", "multiscan/example")
    assert len(stream) == 354
    stamps = np.array([ts for ts, _, _ in stream])
    assert np.median(np.diff(stamps)) / 1e9 == pytest.approx(1 / 60, rel=1e-3)  # nanoseconds at 60 fps
    k = stream[0][1]
    assert k[0, 2] == pytest.approx(941.38, abs=0.01) and k[2, 0] == 0 and k[2, 2] == 1  # cx in the last column
    transform = stream[0][2]
    assert np.allclose(transform[3], [0, 0, 0, 1], atol=1e-6)  # translation in the last column, not row
    poses = [ARKIT_Y_UP_TO_Z_UP @ t @ ARKIT_TO_OPENCV for _, _, t in stream]
    assert sky_up_rotation(poses) == 90  # the iPad was held upright: the landscape video is turned


def test_new_schema_uses_object_ids(tmp_path):
    path = tmp_path / "scene_00001_00.annotations.json"
    obb = {"centroid": [1, 2, 0.5], "axesLengths": [2, 1, 1], "normalizedAxes": [0, 1, 0, 0, 0, 1, 1, 0, 0]}
    objects = [{"objectId": 7, "label": "office_chair.2", "partIds": [1, 2], "obb": obb}]
    path.write_text(json.dumps({"scanId": "scene_00001_00", "objects": objects}))
    (obj,) = read_multiscan_annotations(path)
    assert (obj.object_id, obj.label) == (7, "office chair")
    assert np.allclose(obj.box.rotation[:, 0], [0, 1, 0])  # first row is the first box axis


def test_raw_label():
    assert raw_label("wall_cabinet.12") == "wall cabinet"
    assert raw_label("remove") == "remove"
    assert raw_label("v1.5_thing") == "v1.5 thing"


# --- a synthetic scan written in MultiScan's layout --------------------------------------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    scene = generate_scene(SEED, 0, 3)
    root = tmp_path_factory.mktemp("multiscan")
    folder = write_multiscan(scene, root)
    return scene, folder, read_scan(str(folder), Config())


def test_synthetic_scan_is_detected_and_named(synthetic):
    scene, folder, scan = synthetic
    assert folder.name == "scene_90000_00"
    assert detect_dataset(str(folder)) == "multiscan"
    assert scan.key == "multiscan/scene_90000_00"
    assert scan.warnings == [] and scan.checksum


def test_synthetic_objects_keep_multiscan_ids_and_boxes(synthetic):
    scene, _, scan = synthetic
    by_id = {o.object_id: o for o in scan.objects}
    assert sorted(by_id) == [o.object_id + 1 for o in scene.objects]  # ids start at 1, 0 = unannotated
    for truth in scene.objects:
        read = by_id[truth.object_id + 1]
        assert read.raw_label == truth.label and read.box is None
        obb = gravity_aligned_obb(scan.mesh.vertices[read.vertex_indices])
        assert np.linalg.norm(obb.center - truth.box.to_oriented().center) <= 0.01
    owners = scan.mesh.triangle_object_ids
    assert np.array_equal(owners, np.where(scene.mesh.triangle_object_ids >= 0, scene.mesh.triangle_object_ids + 1, -1))


def test_synthetic_poses_come_back_from_arkit_axes_exactly(synthetic):
    scene, folder, scan = synthetic
    assert len(scan.frames) == 6 * len(scene.poses)  # 60 fps video, each 10 fps frame held 6 times
    for i, pose in enumerate(scene.poses):
        assert np.abs(scan.frames[6 * i].pose - pose).max() < 1e-9
        assert scan.frames[6 * i].timestamp == pytest.approx(i / 10.0, abs=1e-9)
    stored = json.loads((folder / "scene_90000_00.jsonl").read_text().splitlines()[0])["transform"]
    arkit = np.reshape(stored, (4, 4)).T
    assert np.allclose(arkit, mesh_to_arkit(scene) @ scene.poses[0] @ ARKIT_TO_OPENCV)
    assert not np.allclose(arkit, scene.poses[0], atol=1e-3)
    assert np.allclose(scan.frames[0].intrinsics, scene.intrinsics)
    assert scan.image_rotation == 0 and scan.source_fps == 60.0


def test_resampling_to_10_fps_keeps_the_synthetic_frames(synthetic):
    scene, _, scan = synthetic
    frames = scene_tables(scan, Config())["frames"]
    kept = frames.filter(frames["in_all_frame"])["frame_index"].to_list()
    assert kept == [6 * i for i in range(len(scene.poses))]


def test_synthetic_images_decode_at_the_stored_size(synthetic):
    scene, _, scan = synthetic
    image = scan.load_image(6)
    assert image.shape == (scene.height, scene.width, 3)


# --- small hand-built scans: old schema, sky direction, bad input -------------------------------


def _tiny_scan(root, *, face_ids=True, frames=2):
    """Two unit squares as one mesh (faces 0-1 object 1, faces 2-3 object 2), old or new schema."""
    scan = root / "scene_00042_00"
    scan.mkdir(parents=True)
    v = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    vertices = np.concatenate([v, v + [3, 0, 0]])
    faces = np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]])
    colors = np.full((8, 3), 128, dtype=np.uint8)
    props = {"objectId": np.array([1, 1, 2, 2], dtype=np.int32)} if face_ids else None
    write_ply(scan / f"{scan.name}.ply", vertices, faces, colors, face_properties=props, comment=None)
    obb = {"centroid": [0.5, 0.5, 0], "axesLengths": [1, 1, 0.01], "normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}
    objects = [{"label": "rug.1", "obb": obb}, {"label": "rug.2", "obb": dict(obb, centroid=[3.5, 0.5, 0])}]
    if face_ids:
        for n, o in enumerate(objects, start=1):
            o["objectId"] = n
    else:
        semseg = {"scanId": scan.name, "triIndices": {"rug.1": [0, 1], "rug.2:rug.1": [2, 3]}}
        (scan / f"{scan.name}.semseg.json").write_text(json.dumps(semseg))
    (scan / f"{scan.name}.annotations.json").write_text(json.dumps({"scanId": scan.name, "objects": objects}))
    k = [50.0, 0, 0, 0, 50.0, 0, 32.0, 24.0, 1.0]
    pose = np.eye(4)
    pose[:3, 3] = [0.5, 1.5, 3.0]
    transform = list(pose.T.reshape(-1))
    entries = [{"timestamp": 10**9 + j * 16666667, "intrinsics": k, "transform": transform} for j in range(frames)]
    lines = [json.dumps(e) for e in entries]
    (scan / f"{scan.name}.jsonl").write_text("\n".join(lines) + "\n")
    writer = VideoWriter(scan / f"{scan.name}.mp4", 60, (64, 48))
    writer.write(np.zeros((48, 64, 3), dtype=np.uint8), times=frames)
    writer.close()
    return scan


@pytest.mark.parametrize("face_ids", [True, False])
def test_tiny_scan_assigns_faces_in_both_schemas(tmp_path, face_ids):
    scan = read_scan(str(_tiny_scan(tmp_path, face_ids=face_ids)), Config())
    assert [o.object_id for o in scan.objects] == [1, 2]
    assert scan.mesh.triangle_object_ids.tolist() == [1, 1, 2, 2]
    assert sorted(scan.objects[1].vertex_indices.tolist()) == [4, 5, 6, 7]
    assert any("align.json" in w for w in scan.warnings)  # no alignment: only ARKit y-up -> z-up


def test_sky_up_rotation_reads_where_world_up_points():
    upright = np.eye(4)
    upright[:3, :3] = [[1, 0, 0], [0, 0, 1], [0, -1, 0]]  # camera looks along +y, image y points down (-z)
    turned_ccw = upright.copy()
    turned_ccw[:3, :3] = upright[:3, :3] @ np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]])
    assert sky_up_rotation([upright]) == 0
    assert sky_up_rotation([turned_ccw]) == 90
    assert sky_up_rotation([upright @ np.diag([-1, -1, 1, 1])]) == 180


def _expect(scan, pattern):
    message = scan_error(scan)
    assert re.search(pattern, message), (pattern, message)
    assert message.startswith("multiscan/scene_00042_00: ")


def test_bad_annotation_files(tmp_path):
    scan = _tiny_scan(tmp_path)
    ann = scan / f"{scan.name}.annotations.json"
    good = json.loads(ann.read_text())
    ann.write_text(json.dumps({"objects": "none"}))
    _expect(scan, r"scene_00042_00\.annotations\.json: no objects list")
    broken = json.loads(json.dumps(good))
    del broken["objects"][1]["obb"]["normalizedAxes"]
    ann.write_text(json.dumps(broken))
    _expect(scan, r"annotations\.json: objects\[1\] \(rug\.2\) obb\.normalizedAxes: missing$")
    broken = json.loads(json.dumps(good))
    broken["objects"][0]["objectId"] = "x"
    ann.write_text(json.dumps(broken))
    _expect(scan, r"annotations\.json: objects\[0\] \(rug\.1\) has a non-integer objectId")
    ann.write_text("{")
    _expect(scan, r"annotations\.json: unreadable JSON")


def test_bad_camera_stream_and_alignment(tmp_path):
    scan = _tiny_scan(tmp_path)
    jsonl = scan / f"{scan.name}.jsonl"
    good = jsonl.read_text()
    jsonl.write_text(good.splitlines()[0] + "\n" + json.dumps({"timestamp": 2, "intrinsics": [1] * 9}) + "\n")
    _expect(scan, r"scene_00042_00\.jsonl: line 2 lacks transform")
    jsonl.write_text(json.dumps({"timestamp": 2, "intrinsics": [1] * 4, "transform": [0] * 16}) + "\n")
    _expect(scan, r"\.jsonl: line 1 intrinsics needs 9 finite numbers")
    jsonl.write_text(good)
    (scan / f"{scan.name}.align.json").write_text(json.dumps({"version": "multiscan@0.0.1"}))
    _expect(scan, r"scene_00042_00\.align\.json: lacks coordinate_transform")


def test_bad_mesh_files(tmp_path):
    scan = _tiny_scan(tmp_path, face_ids=False)
    (scan / f"{scan.name}.semseg.json").unlink()
    _expect(scan, r"scene_00042_00\.ply: faces lack objectId and there is no \.semseg\.json")
    shutil.rmtree(scan)
    scan = _tiny_scan(tmp_path, face_ids=False)
    (scan / f"{scan.name}.semseg.json").write_text(json.dumps({"triIndices": {"sofa.1": [0]}}))
    _expect(scan, r"semseg\.json: triIndices label 'sofa\.1' names no annotated object")
    (scan / f"{scan.name}.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 3\n")
    _expect(scan, r"scene_00042_00\.ply: unreadable PLY")
