"""3RScan reader: a synthetic scan round trip (rotated sequence, row boxes, objectIds) and bad input."""

from __future__ import annotations

import re

import json

import numpy as np
import pytest

from pipeline.config import Config
from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.scene.readers import detect_dataset, read_scan
from pipeline.geometry.turned_camera import rotated_camera
from pipeline.scene.readers.rscan import read_seg_groups
from pipeline.scene.tables import scene_tables
from pipeline.formats.ply import write_ply
from pipeline.synth.rscan_writer import rscan_scan_id, write_3rscan
from pipeline.synth.scene import generate_scene
from pipeline.frames.video import rotate_image
from tests.reader_errors import scan_error

SEED = 7
IDENTITY16 = "1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    scene = generate_scene(SEED, 0, 3)
    folder = write_3rscan(scene, tmp_path_factory.mktemp("3rscan"))
    return scene, folder, read_scan(str(folder), Config())


def test_synthetic_scan_is_detected_under_its_uuid(synthetic):
    scene, folder, scan = synthetic
    assert folder.name == rscan_scan_id(scene) and len(folder.name) == 36
    assert detect_dataset(str(folder)) == "3rscan"
    assert scan.key == f"3rscan/{folder.name}"
    assert scan.warnings == [] and scan.checksum


def test_objects_keep_3rscan_ids_and_boxes(synthetic):
    scene, folder, scan = synthetic
    by_id = {o.object_id: o for o in scan.objects}
    assert sorted(by_id) == [o.object_id + 1 for o in scene.objects]
    for truth in scene.objects:
        read = by_id[truth.object_id + 1]
        assert read.raw_label == truth.label and read.box is None
        box = truth.box.to_oriented()
        obb = gravity_aligned_obb(scan.mesh.vertices[read.vertex_indices])
        assert np.linalg.norm(obb.center - box.center) <= 0.01
    # semseg.v2.json boxes are rows: read back they equal the generator's boxes.
    for object_id, label, annotated in read_seg_groups(folder / "semseg.v2.json", scan.key):
        truth = scene.objects[object_id - 1].box.to_oriented()
        assert label == scene.objects[object_id - 1].label
        assert np.allclose(annotated.rotation, truth.rotation) and np.allclose(annotated.center, truth.center)
    expected = np.where(scene.mesh.triangle_object_ids >= 0, scene.mesh.triangle_object_ids + 1, -1)
    assert np.array_equal(scan.mesh.triangle_object_ids, expected)


def test_rotated_sequence_gives_back_the_upright_camera(synthetic):
    scene, _, scan = synthetic
    assert scan.image_rotation == 90  # stored turned counter-clockwise: 90 degrees clockwise to sky-up
    for i, frame in enumerate(scan.frames):
        assert (frame.width, frame.height) == (scene.height, scene.width)
        pose, k, w, h = rotated_camera(frame.pose, frame.intrinsics, frame.width, frame.height, scan.image_rotation)
        assert np.abs(pose - scene.poses[i]).max() < 1e-12
        assert np.allclose(k, scene.intrinsics) and (w, h) == (scene.width, scene.height)
        assert frame.timestamp == pytest.approx(i / 4.0)
    upright = rotate_image(scan.load_image(0), scan.image_rotation)
    assert upright.shape == (scene.height, scene.width, 3)


def test_all_frames_are_kept_at_4_fps(synthetic):
    scene, _, scan = synthetic
    tables = scene_tables(scan, Config())
    assert tables["frames"]["in_all_frame"].to_list() == [True] * len(scene.poses)
    assert tables["scans"]["fps"].to_list() == [4.0]


# --- small hand-built scans for bad input --------------------------------------------------------


def _tiny_scan(root):
    scan = root / "0cac7578-8d6f-2d13-8c2d-bfa7a04f8af3"
    seq = scan / "sequence"
    seq.mkdir(parents=True)
    v = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    vertices = np.concatenate([v, v + [3, 0, 0]])
    faces = np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]])
    owner = np.array([1, 1, 1, 1, 2, 2, 2, 2], dtype=np.uint16)
    ply = scan / "labels.instances.annotated.v2.ply"
    write_ply(ply, vertices, faces, None, vertex_properties={"objectId": owner}, comment=None)
    obb = {"centroid": [0.5, 0.5, 0], "axesLengths": [1, 1, 0.01], "normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}
    groups = [{"id": 1, "objectId": 1, "label": "rug", "segments": [1], "obb": obb}]
    groups.append({"id": 2, "objectId": 2, "label": "mat", "segments": [2], "obb": dict(obb, centroid=[3.5, 0.5, 0])})
    (scan / "semseg.v2.json").write_text(json.dumps({"scan_id": scan.name, "segGroups": groups}))
    k = "877.5 0 479.75 0 0 877.5 269.75 0 0 0 1 0 0 0 0 1"
    info = f"m_colorWidth = 960\nm_colorHeight = 540\nm_calibrationColorIntrinsic = {k}\n"
    (seq / "_info.txt").write_text(info)
    for i in range(2):
        (seq / f"frame-{i:06d}.pose.txt").write_text("1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n")
        (seq / f"frame-{i:06d}.color.jpg").write_bytes(b"")
    return scan


def test_tiny_scan_reads(tmp_path):
    scan = read_scan(str(_tiny_scan(tmp_path)), Config())
    assert [(o.object_id, o.raw_label) for o in scan.objects] == [(1, "rug"), (2, "mat")]
    assert scan.mesh.triangle_object_ids.tolist() == [1, 1, 2, 2]
    assert len(scan.frames) == 2 and scan.frames[0].width == 640  # 960x540 scaled to the 640x480 output


def _expect(scan, pattern):
    message = scan_error(scan)
    assert re.search(pattern, message), (pattern, message)
    assert message.startswith(f"3rscan/{scan.name}: ")


def test_bad_semseg(tmp_path):
    scan = _tiny_scan(tmp_path)
    path = scan / "semseg.v2.json"
    good = json.loads(path.read_text())
    path.write_text(json.dumps({"segGroups": {}}))
    _expect(scan, r"semseg\.v2\.json: no segGroups list")
    bad = json.loads(json.dumps(good))
    bad["segGroups"][1]["objectId"] = "two"
    bad["segGroups"][1].pop("id")
    path.write_text(json.dumps(bad))
    _expect(scan, r"semseg\.v2\.json: segGroup 1 has a missing or non-integer objectId")
    bad = json.loads(json.dumps(good))
    bad["segGroups"][0]["obb"]["normalizedAxes"] = [1, 0, 0]
    path.write_text(json.dumps(bad))
    _expect(scan, r"semseg\.v2\.json: segGroup 0 obb\.normalizedAxes: expected 9 finite numbers, got 3$")
    bad = json.loads(json.dumps(good))
    del bad["segGroups"][0]["label"]
    path.write_text(json.dumps(bad))
    _expect(scan, r"semseg\.v2\.json: segGroup 0 lacks label")


def test_bad_mesh_and_sequence(tmp_path):
    scan = _tiny_scan(tmp_path)
    ply = scan / "labels.instances.annotated.v2.ply"
    good = ply.read_bytes()
    v = np.zeros((3, 3))
    write_ply(ply, v, np.array([[0, 1, 2]]), None, comment=None)
    _expect(scan, r"labels\.instances\.annotated\.v2\.ply: vertex element lacks objectId")
    ply.write_bytes(good)
    info = scan / "sequence" / "_info.txt"
    info.write_text("m_colorWidth = 960\nm_colorHeight = 540\n")
    _expect(scan, r"sequence/_info\.txt: missing m_calibrationColorIntrinsic")
    info.write_text("m_colorWidth = 960\nm_colorHeight = 540\nm_calibrationColorIntrinsic = 1 2 3\n")
    _expect(scan, r"sequence/_info\.txt: m_calibrationColorIntrinsic is not 16 finite numbers")
    info.write_text(f"m_colorHeight = 540\nm_calibrationColorIntrinsic = {IDENTITY16}\n")
    _expect(scan, r"sequence/_info\.txt: missing m_colorWidth")
    info.write_text(f"m_colorWidth = 960\nm_colorHeight = 540\nm_calibrationColorIntrinsic = {IDENTITY16}\n")
    (scan / "sequence" / "frame-000001.pose.txt").write_text("1 0 0\n")
    _expect(scan, r"sequence/frame-000001\.pose\.txt: pose has 3 numbers, expected 16")
    (scan / "sequence" / "frame-000001.pose.txt").write_text("1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n")
    (scan / "sequence" / "frame-000001.color.jpg").unlink()
    _expect(scan, r"sequence/frame-000001\.color\.jpg: colour image missing")
