"""One synthetic scene written in ScanNet's and ARKitScenes' layouts reads back as the same scan."""

from __future__ import annotations

import collections
import os
import shutil
from functools import partial

import numpy as np
import pytest

from pipeline.config import Config, FramesConfig
from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.geometry.turned_camera import rotated_camera
from pipeline.scene.readers import detect_dataset, read_scan
from pipeline.scene.readers.arkitscenes import (
    ARKitObject,
    triangles_in_boxes,
    SKY_ROTATION,
    annotation_name,
    frames_dir,
    mesh_name,
    read_sky_directions,
)
from pipeline.synth.arkitscenes_writer import arkitscenes_video_id, write_arkitscenes
from pipeline.synth.boxes import Box, mesh_box
from pipeline.synth.render import FrameRenderer
from pipeline.frames.video import rotate_image, scan_video_size
from tests.beside_scannet import mapped_category, read_beside_scannet
from tests.box_checks import box_error, sorted_corners
from tests.reader_errors import edit_json, scan_error

SEED = 11
FRAMES = 3
SKY = "Left"  # stored portrait, sky on the left: exercises the rotation path


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return read_beside_scannet(tmp_path_factory.mktemp("scans"), SEED, FRAMES, "arkitscenes", partial(write_arkitscenes, sky_direction=SKY))


def test_fixture_metadata_sky_directions(fixtures_dir):
    directions = read_sky_directions(fixtures_dir / "arkitscenes" / "metadata.csv")
    counts = collections.Counter(directions.values())
    assert len(directions) == 5071
    assert dict(counts) == {"Left": 2334, "Up": 1607, "Down": 1125, "NA": 4, "Right": 1}


def test_rotated_camera_matches_rotated_pixels():
    """A world point projects to the pixel the image rotation moves its original pixel to.

    Pixel centres are at integer coordinates, so turning 90° clockwise sends pixel (u, v) to (h - 1 - v, u),
    exactly where ``cv2.rotate`` puts it.
    """
    k = np.array([[500.0, 0.0, 310.0], [0.0, 480.0, 250.0], [0.0, 0.0, 1.0]])
    pose = np.eye(4)
    pose[:3, 3] = [0.3, -0.2, 1.0]
    point = np.array([0.7, 0.4, 3.5])
    u, v, w, h = *(k @ (point - pose[:3, 3]))[:2] / (point - pose[:3, 3])[2], 640, 480
    moved = {0: (u, v), 90: (h - 1 - v, u), 180: (w - 1 - u, h - 1 - v), 270: (v, w - 1 - u)}
    for degrees, expected in moved.items():
        p, kk, ww, hh = rotated_camera(pose, k, w, h, degrees)
        local = p[:3, :3].T @ (point - p[:3, 3])
        pixel = (kk @ local)[:2] / local[2]
        np.testing.assert_allclose(pixel, expected, atol=1e-9)
        assert (ww, hh) == ((w, h) if degrees % 180 == 0 else (h, w))
        back = rotated_camera(p, kk, ww, hh, (360 - degrees) % 360)
        np.testing.assert_allclose(back[0], pose, atol=1e-12)
        np.testing.assert_allclose(back[1], k, atol=1e-12)


def test_detected_as_arkitscenes_with_sky_rotation(written):
    parsed = written["parsed"]
    assert detect_dataset(str(written["folder"])) == "arkitscenes"
    assert parsed.key == f"arkitscenes/{arkitscenes_video_id(written['scene'])}" == "arkitscenes/90000000"
    assert parsed.image_rotation == SKY_ROTATION[SKY] == 90
    assert (parsed.frames[0].width, parsed.frames[0].height) == (480, 640)  # stored portrait
    assert scan_video_size(written["tables"]["frames"], FramesConfig(), parsed.image_rotation) == (640, 480)
    assert parsed.warnings == []


def test_objects_are_the_annotated_boxes_within_1cm(written):
    truth = {o["id"]: o for o in written["truth"]["objects"]}
    parsed = written["parsed"]
    assert [o.object_id for o in parsed.objects] == sorted(truth)
    for obj in parsed.objects:
        assert obj.raw_label == truth[obj.object_id]["label"]
        assert obj.category == mapped_category(obj.raw_label)  # the label map the generator writes beside the scans
        assert box_error(obj.box.center, obj.box.extent, obj.box.rotation, truth[obj.object_id]["box"]) <= 0.01
        # The writer annotates the gravity-aligned box of the object's vertices: read back bit for bit.
        fitted = gravity_aligned_obb(written["scene"].mesh.vertices[written["scene"].vertex_indices(obj.object_id)])
        for got, expected in zip((obj.box.center, obj.box.extent, obj.box.rotation), (fitted.center, fitted.extent, fitted.rotation)):
            assert np.array_equal(got, expected)


def test_triangles_in_boxes_reproduce_the_true_owners(written):
    """Box masks give the instance labels back, except on faces buried in the walls' and floor's slabs
    (which no camera sees; the five-layout test checks visibility itself)."""
    owners = written["parsed"].mesh.triangle_object_ids
    true_owners = written["reference"].mesh.triangle_object_ids
    agreement = float(np.mean(owners == true_owners))
    assert agreement >= 0.9999, agreement


def _box_mesh(center, extent, owner_id, skip_bottom=False, yaw=0.0):
    box = Box(center=tuple(center), extent=tuple(extent), yaw=yaw)
    vertices, triangles = mesh_box(box, 0.05, skip_bottom=skip_bottom)
    return vertices, triangles, np.full(len(triangles), owner_id), box


def test_surfaces_touching_a_box_from_outside_are_not_its_object():
    """Tabletop under a cup, floor under a sofa, wall behind a wardrobe: each faces into the tight box."""
    parts = [
        _box_mesh((0, 0, -0.05), (6, 6, 0.1), 0),  # floor slab
        _box_mesh((0, 3.05, 1.2), (6, 0.1, 2.4), 1),  # wall
        _box_mesh((0, 0, 0.375), (1.2, 0.8, 0.75), 2, skip_bottom=True),  # table
        _box_mesh((0.1, 0.1, 0.8), (0.08, 0.08, 0.1), 3, yaw=0.3),  # cup on the table
        _box_mesh((1.5, 1.0, 0.4), (2.0, 0.9, 0.8), 4, skip_bottom=True),  # sofa on the floor
        _box_mesh((-1.5, 2.7, 1.0), (1.0, 0.6, 2.0), 5, skip_bottom=True),  # wardrobe against the wall
    ]
    vertices, triangles, true_owner, objects, offset = [], [], [], [], 0
    for v, t, owner, box in parts:
        vertices.append(v)
        triangles.append(t + offset)
        true_owner.append(owner)
        offset += len(v)
        obb = box.to_oriented()
        objects.append(ARKitObject(object_id=int(owner[0]), raw_label=str(owner[0]), box=obb))
    vertices, triangles = np.concatenate(vertices), np.concatenate(triangles)
    owners = triangles_in_boxes(vertices, triangles, objects)
    true_owner = np.concatenate(true_owner)
    # The slab's own sides and underside lie in no other box; every triangle goes to its own object.
    assert np.array_equal(owners, true_owner)


def test_frames_turned_sky_up_are_the_synthetic_walk(written):
    scene, parsed = written["scene"], written["parsed"]
    renderer = FrameRenderer(scene)
    assert [f.frame_index for f in parsed.frames] == list(range(FRAMES))
    for i, frame in enumerate(parsed.frames):
        pose, k, w, h = rotated_camera(frame.pose, frame.intrinsics, frame.width, frame.height, parsed.image_rotation)
        np.testing.assert_allclose(pose, scene.poses[i], rtol=0, atol=1e-12)
        np.testing.assert_allclose(k, scene.intrinsics, rtol=0, atol=1e-9)
        assert (w, h) == (scene.width, scene.height)
        assert frame.timestamp == pytest.approx(i / scene.fps)
        image = rotate_image(parsed.load_image(i), parsed.image_rotation)
        assert np.array_equal(image, renderer.render(i).color_bgr)  # PNG is lossless


def test_scene_tables_equal_the_scannet_layout_except_ids(written):
    ref, got = written["reference_tables"], written["tables"]
    same_scan_columns = ["frame_count", "dropped_frames", "fps", "source_fps", "has_frames", "has_mesh"]
    same_scan_columns += ["vertex_count", "triangle_count"]
    assert ref["scans"].select(same_scan_columns).to_dicts() == got["scans"].select(same_scan_columns).to_dicts()
    same_object_columns = ["object_id", "raw_label", "vertical_axis", "structural", "small_object"]
    assert ref["objects"].select(same_object_columns).rows() == got["objects"].select(same_object_columns).rows()
    assert set(got["objects"]["box_source"]) == {"annotation"}
    for a, b in zip(ref["objects"].iter_rows(named=True), got["objects"].iter_rows(named=True)):
        corners_a = sorted_corners(a["center"], a["extent"], a["rotation"])
        corners_b = sorted_corners(b["center"], b["extent"], b["rotation"])
        assert np.abs(corners_a - corners_b).max() <= 1e-5, a["raw_label"]
    assert ref["frames"].select("frame_index", "valid", "in_all_frame").to_dicts() == got["frames"].select(
        "frame_index", "valid", "in_all_frame"
    ).to_dicts()
    np.testing.assert_allclose(ref["frames"]["timestamp"].to_numpy(), got["frames"]["timestamp"].to_numpy(), atol=1e-9)
    assert ref["rooms"]["kind"].to_list() == got["rooms"]["kind"].to_list()
    # Rooms are derived from the mesh (a seeded floor-point subsample); both layouts store the same vertices.
    np.testing.assert_allclose(ref["rooms"]["area_m2"].to_numpy(), got["rooms"]["area_m2"].to_numpy(), rtol=0.05)


@pytest.fixture
def scene_copy(written, tmp_path):
    """A copy of the scene (and metadata.csv) to damage; the mesh is hard-linked."""
    src = written["folder"]
    dst = tmp_path / src.name
    dst.mkdir()
    shutil.copytree(src / frames_dir(src.name), dst / frames_dir(src.name))
    shutil.copy(src / annotation_name(src.name), dst / annotation_name(src.name))
    os.link(src / mesh_name(src.name), dst / mesh_name(src.name))  # a hard link: symlinks out of the root are refused
    shutil.copy(src.parent / "metadata.csv", tmp_path / "metadata.csv")
    return dst


def _edit_annotation(folder, change):
    edit_json(folder / annotation_name(folder.name), change)


def test_missing_obb_is_a_scan_error(scene_copy, written):
    _edit_annotation(scene_copy, lambda d: d["data"][2]["segments"].pop("obbAligned"))
    message = scan_error(scene_copy, written["config"])
    assert annotation_name(scene_copy.name) in message and "data[2].segments lacks obbAligned" in message


def test_corrupt_annotation_json_is_a_scan_error(scene_copy, written):
    (scene_copy / annotation_name(scene_copy.name)).write_text('{"data": [{')
    assert annotation_name(scene_copy.name) in scan_error(scene_copy, written["config"])


def test_wrong_shape_axes_is_a_scan_error(scene_copy, written):
    _edit_annotation(scene_copy, lambda d: d["data"][0]["segments"]["obbAligned"]["normalizedAxes"].append(0.0))
    message = scan_error(scene_copy, written["config"])
    assert message.endswith(": data[0].segments.obbAligned.normalizedAxes: expected 9 finite numbers, got 10")


def test_short_trajectory_line_is_a_scan_error(scene_copy, written):
    traj = scene_copy / frames_dir(scene_copy.name) / "lowres_wide.traj"
    lines = traj.read_text().splitlines()
    lines[1] = " ".join(lines[1].split()[:6])
    traj.write_text("\n".join(lines) + "\n")
    message = scan_error(scene_copy, written["config"])
    assert "lowres_wide.traj" in message and "line 2 has 6 values" in message


def test_bad_pincam_is_a_scan_error(scene_copy, written):
    pincam = sorted((scene_copy / frames_dir(scene_copy.name) / "lowres_wide_intrinsics").glob("*.pincam"))[0]
    pincam.write_text("480 640 525.0 525.0 239.5\n")
    message = scan_error(scene_copy, written["config"])
    assert pincam.name in message and "'w h fx fy cx cy'" in message


def test_bad_sky_direction_is_a_scan_error(scene_copy, written):
    metadata = scene_copy.parent / "metadata.csv"
    metadata.write_text(metadata.read_text().replace(",Left,", ",Sideways,"))
    message = scan_error(scene_copy, written["config"])
    assert "metadata.csv" in message and "sky_direction 'Sideways'" in message


def test_na_sky_direction_reads_upright_with_a_warning(scene_copy, written):
    metadata = scene_copy.parent / "metadata.csv"
    metadata.write_text(metadata.read_text().replace(",Left,", ",NA,"))
    parsed = read_scan(str(scene_copy), written["config"])
    assert parsed.image_rotation == 0
    assert any("sky_direction is 'NA'" in w for w in parsed.warnings)


@pytest.mark.slow
def test_scan_on_s3_keeps_its_sky_direction(written, s3_bucket):
    """``read_scan`` copies ``metadata.csv`` from the scans root along with a remote scene."""
    folder = written["folder"]
    scans = s3_bucket.upload(folder.parent, "scans")
    config = Config(scans_root=scans, storage_options=s3_bucket.options)
    parsed = read_scan(f"{scans}/{folder.name}", config)
    assert parsed.image_rotation == SKY_ROTATION[SKY]
    assert parsed.warnings == []
    assert len(parsed.frames) == FRAMES
