"""One synthetic scene written in ScanNet's and ScanNet++'s layouts reads back as the same scan."""

from __future__ import annotations

import os
import shutil

import numpy as np
import polars as pl
import pytest

from pipeline.scene.readers import detect_dataset
from pipeline.scene.readers.scannetpp import ANNOTATION_PATH, MESH_PATH, POSES_PATH, SEGMENTS_PATH
from pipeline.synth.scannetpp_writer import ID_OFFSET, VIDEO_NAME, write_scannetpp
from tests.beside_scannet import mapped_category, read_beside_scannet
from tests.box_checks import box_error, sorted_corners
from tests.reader_errors import edit_json, scan_error

SEED = 11
FRAMES = 3


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return read_beside_scannet(tmp_path_factory.mktemp("scans"), SEED, FRAMES, "scannetpp", write_scannetpp)


def test_detected_as_scannetpp(written):
    assert detect_dataset(str(written["folder"])) == "scannetpp"
    parsed = written["parsed"]
    assert parsed.key == f"scannetpp/{written['scene'].scene_id}"
    assert parsed.source_fps == pytest.approx(60.0)
    assert parsed.warnings == []


def test_objects_match_the_truth_within_1cm(written):
    # ScanNet++ object ids start at 1 (the toolkit keeps 0 for "no object"): generator id + 1.
    truth = {o["id"] + ID_OFFSET: o for o in written["truth"]["objects"]}
    parsed = written["parsed"]
    assert [o.object_id for o in parsed.objects] == sorted(truth)
    for obj in parsed.objects:
        assert obj.raw_label == truth[obj.object_id]["label"]
        assert obj.category == mapped_category(obj.raw_label)  # the label map the generator writes beside the scans
        box = obj.annotated_box  # the segments_anno obb, row axes turned into columns
        assert box_error(box.center, box.extent, box.rotation, truth[obj.object_id]["box"]) <= 0.01
        # The truth file rounds to 8 decimals (scannet_writer), so a value agrees to half of 1e-8.
        np.testing.assert_allclose(box.rotation, truth[obj.object_id]["box"]["rotation"], rtol=0, atol=5e-9)
    for row in written["tables"]["objects"].iter_rows(named=True):
        assert box_error(row["center"], row["extent"], row["rotation"], truth[row["object_id"]]["box"]) <= 0.01


def test_triangle_owners_match_the_scannet_layout(written):
    reference = written["reference"].mesh.triangle_object_ids
    expected = np.where(reference >= 0, reference + ID_OFFSET, -1)
    assert np.array_equal(written["parsed"].mesh.triangle_object_ids, expected)


def test_all_frame_sequence_is_the_synthetic_walk(written):
    scene, parsed = written["scene"], written["parsed"]
    frames = written["tables"]["frames"]
    assert frames.height == 6 * FRAMES  # the 60 fps stream repeats each 10 fps frame 6 times
    kept = frames.filter(pl.col("in_all_frame"))
    assert kept["frame_index"].to_list() == [6 * i for i in range(FRAMES)]
    for i, frame_index in enumerate(kept["frame_index"]):
        frame = parsed.frames[frame_index]
        np.testing.assert_allclose(frame.pose, scene.poses[i], rtol=0, atol=1e-6)
        np.testing.assert_allclose(frame.intrinsics, scene.intrinsics, rtol=0, atol=1e-9)
        assert frame.timestamp == pytest.approx(i / scene.fps)
        assert (frame.width, frame.height) == (scene.width, scene.height)


def test_video_frames_decode_close_to_the_render(written):
    from pipeline.synth.render import FrameRenderer

    parsed = written["parsed"]
    rendered = FrameRenderer(written["scene"]).render(1).color_bgr
    decoded = parsed.load_image(6)
    assert decoded.shape == rendered.shape
    assert np.abs(decoded.astype(int) - rendered.astype(int)).mean() < 12  # mp4v is lossy


def test_scene_tables_equal_the_scannet_layout_except_ids(written):
    ref, got = written["reference_tables"], written["tables"]
    same_scan_columns = ["frame_count", "dropped_frames", "fps", "image_width", "image_height", "has_frames"]
    same_scan_columns += ["has_mesh", "vertex_count", "triangle_count"]
    assert ref["scans"].select(same_scan_columns).to_dicts() == got["scans"].select(same_scan_columns).to_dicts()
    same_object_columns = ["raw_label", "vertical_axis", "vertex_count", "triangle_count", "structural"]
    same_object_columns += ["small_object", "box_source"]
    assert ref["objects"].select(same_object_columns).rows() == got["objects"].select(same_object_columns).rows()
    assert (got["objects"]["object_id"] - ID_OFFSET).to_list() == ref["objects"]["object_id"].to_list()
    for a, b in zip(ref["objects"].iter_rows(named=True), got["objects"].iter_rows(named=True)):
        corners_a = sorted_corners(a["center"], a["extent"], a["rotation"])
        corners_b = sorted_corners(b["center"], b["extent"], b["rotation"])
        assert np.abs(corners_a - corners_b).max() <= 1e-5, a["raw_label"]
    kept = got["frames"].filter(pl.col("in_all_frame"))
    for column in ("timestamp", "pose", "intrinsics"):
        expected, found = np.array(ref["frames"][column].to_list()), np.array(kept[column].to_list())
        np.testing.assert_allclose(found, expected, rtol=0, atol=1e-6)
    assert ref["frames"].select("width", "height", "valid").rows() == kept.select("width", "height", "valid").rows()
    assert ref["rooms"]["kind"].to_list() == got["rooms"]["kind"].to_list()
    # Rooms are derived from the mesh (a seeded floor-point subsample); both layouts store the same vertices.
    np.testing.assert_allclose(ref["rooms"]["area_m2"].to_numpy(), got["rooms"]["area_m2"].to_numpy(), rtol=0.05)


@pytest.fixture
def scene_copy(written, tmp_path):
    """A copy of the scene to damage: JSON files copied, mesh and video hard-linked."""
    src = written["folder"]
    dst = tmp_path / src.name
    (dst / "scans").mkdir(parents=True)
    (dst / "iphone").mkdir()
    for rel in (SEGMENTS_PATH, ANNOTATION_PATH, POSES_PATH):
        shutil.copy(src / rel, dst / rel)
    for rel in (MESH_PATH, VIDEO_NAME):
        os.link(src / rel, dst / rel)  # a hard link: symlinks out of the scans root are refused
    return dst


def test_missing_seg_indices_is_a_scan_error(scene_copy, written):
    edit_json(scene_copy / SEGMENTS_PATH, lambda d: d.pop("segIndices"))
    message = scan_error(scene_copy, written["config"])
    assert SEGMENTS_PATH in message and "segIndices" in message


def test_corrupt_annotation_json_is_a_scan_error(scene_copy, written):
    (scene_copy / ANNOTATION_PATH).write_text('{"segGroups": [')
    assert ANNOTATION_PATH in scan_error(scene_copy, written["config"])


def test_annotation_without_label_is_a_scan_error(scene_copy, written):
    edit_json(scene_copy / ANNOTATION_PATH, lambda d: d["segGroups"][3].pop("label"))
    message = scan_error(scene_copy, written["config"])
    assert ANNOTATION_PATH in message and "segGroups[3] lacks label" in message


def test_wrong_shape_obb_axes_is_a_scan_error(scene_copy, written):
    edit_json(scene_copy / ANNOTATION_PATH, lambda d: d["segGroups"][0]["obb"]["normalizedAxes"].pop())
    message = scan_error(scene_copy, written["config"])
    assert ANNOTATION_PATH in message
    assert message.endswith(": segGroups[0].obb.normalizedAxes: expected 9 finite numbers, got 8")


def test_wrong_shape_pose_is_a_scan_error(scene_copy, written):
    edit_json(scene_copy / POSES_PATH, lambda d: d["frame_000007"]["aligned_pose"].pop())
    message = scan_error(scene_copy, written["config"])
    assert POSES_PATH in message and "frame_000007.aligned_pose has 12 values" in message


def test_missing_intrinsic_is_a_scan_error(scene_copy, written):
    edit_json(scene_copy / POSES_PATH, lambda d: d["frame_000002"].pop("intrinsic"))
    message = scan_error(scene_copy, written["config"])
    assert POSES_PATH in message and "frame_000002 lacks intrinsic" in message
