"""Annotation-only inputs: ReVSI boxes JSON and VSI-Bench meta-info into objects/rooms/visibility tables."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import shapely

from pipeline.errors import ScanError
from pipeline.scene.readers.annotations import read_annotations


def test_revsi_demo_boxes_keep_rotation_columns_and_any_vertical_axis(fixtures_dir):
    path = fixtures_dir / "revsi" / "scene0088_01_boxes.json"
    raw = json.loads(path.read_text())["objects"]
    (scene,) = read_annotations(path)
    assert scene.key == "scannet/scene0088_01"
    objects = scene.objects
    assert sorted(objects["object_id"]) == sorted(int(k) for k in raw)
    row = objects.filter(pl.col("object_id") == 0).row(0, named=True)
    rotation = np.asarray(row["rotation"]).reshape(3, 3)
    given = np.asarray(raw["0"]["obb"]["rotation"])
    assert np.allclose(rotation, given, atol=2e-3)  # snapped to orthonormal, columns unchanged
    assert np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-9)
    # chair 0 has its vertical axis in rotation column 1 (third row, second column is -0.994)
    assert row["vertical_axis"] == 1
    assert len(set(objects["vertical_axis"])) > 1
    vis = scene.object_visibility
    assert set(vis["budget"]) == {"all"} and vis["visible"].all()
    assert scene.rooms.is_empty()


def test_all_revsi_fixtures_read(fixtures_dir):
    for path in sorted((fixtures_dir / "revsi").glob("*_boxes.json")):
        (scene,) = read_annotations(path)
        assert scene.objects.height == len(json.loads(path.read_text())["objects"])
    (scene,) = read_annotations(fixtures_dir / "revsi" / "27dd4da69e_boxes.json")
    assert scene.key == "scannetpp/27dd4da69e"


def test_full_revsi_shape_with_polygon(tmp_path):
    data = {
        "dataset": "ScanNet",
        "scene_id": "scene0001_00",
        "objects": [
            {"id": 3, "name": "chair", "obb": {"center": [1, 1, 0.5], "extent": [0.5, 1.0, 0.4],
                                                "rotation": [[1, 0, 0], [0, 0, -1], [0, 1, 0]]}},
        ],
        "scene_area_2d_polygon": [[0, 0], [4, 0], [4, 3], [0, 3]],
        "scene_area_type": "single",
    }
    path = tmp_path / "scene0001_00.json"
    path.write_text(json.dumps(data))
    (scene,) = read_annotations(path)
    row = scene.objects.row(0, named=True)
    assert row["object_id"] == 3 and row["vertical_axis"] == 1
    rooms = {r["kind"]: r for r in scene.rooms.iter_rows(named=True)}
    assert set(rooms) == {"scene", "main"}
    assert rooms["scene"]["area_m2"] == pytest.approx(12.0)
    assert shapely.from_wkb(rooms["scene"]["polygon_wkb"]).area == pytest.approx(12.0)


def test_vsibench_meta_transposes_normalized_axes_and_keeps_counts(fixtures_dir):
    path = fixtures_dir / "vsibench" / "scannetpp_meta_info_val.json"
    raw = json.loads(path.read_text())
    scenes = read_annotations(path)
    assert len(scenes) == len(raw) == 50
    scene = scenes[0]
    sid = scene.scene_id
    assert scene.key == f"scannetpp/{sid}"
    first_cat = sorted(raw[sid]["object_bbox"])[0]
    box = raw[sid]["object_bbox"][first_cat][0]
    row = scene.objects.filter(pl.col("object_id") == 0).row(0, named=True)
    assert row["category"] == first_cat
    rotation = np.asarray(row["rotation"]).reshape(3, 3)
    axes_rows = np.asarray(box["normalizedAxes"]).reshape(3, 3)
    assert np.allclose(rotation, axes_rows.T, atol=1e-6)
    assert np.allclose(row["extent"], box["axesLengths"])
    counts = scene.objects.group_by("category").len()
    assert {r["category"]: r["len"] for r in counts.iter_rows(named=True)} == raw[sid]["object_counts"]
    room = scene.rooms.row(0, named=True)
    assert room["polygon_wkb"] is None and room["area_m2"] == pytest.approx(raw[sid]["room_size"])
    assert room["source"] == "annotated"


def test_all_288_vsibench_scenes_read_with_boxes_as_rows(fixtures_dir):
    """Every meta-info box, as read, has corners whose bounds are the file's own ``min``/``max``."""
    scenes, checked, worst = 0, 0, 0.0
    for name in ("arkitscenes", "scannet", "scannetpp"):
        path = fixtures_dir / "vsibench" / f"{name}_meta_info_val.json"
        raw = json.loads(path.read_text())
        read = read_annotations(path)
        scenes += len(read)
        for scene in read:
            boxes = [b for category in sorted(raw[scene.scene_id]["object_bbox"]) for b in raw[scene.scene_id]["object_bbox"][category]]
            rows = scene.objects.sort("object_id")
            assert rows.height == len(boxes)
            for row, box in zip(rows.iter_rows(named=True), boxes):
                rotation = np.asarray(row["rotation"]).reshape(3, 3)
                signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
                corners = np.asarray(row["center"]) + (signs * np.asarray(row["extent"]) / 2) @ rotation.T
                worst = max(worst, float(np.abs(corners.min(axis=0) - box["min"]).max()), float(np.abs(corners.max(axis=0) - box["max"]).max()))
                checked += 1
    assert scenes == 288
    assert checked == 3197 and worst <= 1e-9, (checked, worst)


def test_vsibench_count_conflicts_are_reported(fixtures_dir):
    scenes = read_annotations(fixtures_dir / "vsibench" / "scannet_meta_info_val.json")
    by_id = {s.scene_id: s for s in scenes}
    assert by_id["scene0378_01"].count_conflicts == ("printer",)
    assert sum(1 for s in scenes if s.count_conflicts) == 11


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "not readable JSON"),
        ('{"objects": {"x": {"name": "chair", "obb": {}}}}', "id is not an integer"),
        ('{"objects": {"1": {"name": "chair", "obb": {"center": [0, 0], "extent": [1, 1, 1], '
         '"rotation": [[1,0,0],[0,1,0],[0,0,1]]}}}}', "center: expected 3 numbers"),
        ('{"objects": {"1": {"name": "chair", "obb": {"center": [0, 0, 0], "extent": [1, 1, 1], '
         '"rotation": [[1,0,0],[0,2,0],[0,0,1]]}}}}', "not orthonormal"),
        ('{"a": 1}', "neither a ReVSI annotation"),
        ('{"scene0002_00": {"object_bbox": {"chair": [{"centroid": [0, 0, 0], "axesLengths": [1, -1, 1], '
         '"normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}]}}}',
         "object_bbox['chair'][0].axesLengths: expected lengths of 0 or more, got -1 at [1]"),
        ('{"scene0002_00": {"object_bbox": {"chair": [{"centroid": [0, 0, 0], "axesLengths": [1, 1, 1], '
         '"normalizedAxes": [1, 0, 0, 0, 1, 0]}]}}}',
         "object_bbox['chair'][0].normalizedAxes: expected 9 finite numbers, got 6"),
    ],
)
def test_bad_annotations_fail_with_one_line_naming_scene_file_problem(tmp_path, content, problem):
    path = tmp_path / "scene0002_00_boxes.json"
    path.write_text(content)
    with pytest.raises(ScanError) as err:
        read_annotations(path)
    message = str(err.value)
    assert "\n" not in message and problem in message and str(path) in message
    assert message.startswith("scannet/scene0002_00") or message.startswith("scene0002_00")
