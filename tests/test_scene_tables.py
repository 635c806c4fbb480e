"""ParsedScan -> scans/objects/rooms/frames tables: schema, flags, boxes, fps resampling, determinism."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import shapely

from pipeline import schemas
from pipeline.config import Config
from pipeline.scene.readers import read_scan
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan, SceneObject
from pipeline.scene.tables import resample_by_time, scene_tables
from pipeline.storage import parquet_bytes
from tests.scannet_factory import linked_fixture, make_box_room


def _conforms(tables):
    for name, df in tables.items():
        assert df.schema == schemas.empty(name).schema, name
        schemas.to_arrow(name, df)


@pytest.fixture(scope="module")
def fixture_tables(fixtures_dir, tmp_path_factory):
    folder = linked_fixture(tmp_path_factory.mktemp("fx"), fixtures_dir)
    parsed = read_scan(folder, Config())
    return parsed, scene_tables(parsed, Config())


def test_fixture_tables(fixture_tables):
    parsed, tables = fixture_tables
    _conforms(tables)
    scans, objects, rooms, frames = (tables[n] for n in ("scans", "objects", "rooms", "frames"))
    scan = scans.row(0, named=True)
    assert scan["key"] == "scannet/scene0000_00" and scan["has_frames"] is False and scan["has_mesh"] is True
    assert (scan["vertex_count"], scan["frame_count"], scan["source_frame_count"]) == (81369, 0, 0)
    assert scan["checksum"] == parsed.checksum and any("dishrack" in w for w in scan["warnings"])
    assert objects.height == 55 and objects["object_id"].is_sorted()
    assert set(objects["box_source"]) == {"mesh"}
    assert objects.filter(pl.col("raw_label") == "wall")["structural"].all()
    assert objects.filter(pl.col("raw_label") == "floor")["structural"].all()
    assert not objects.filter(pl.col("raw_label") == "bed")["structural"].any()
    small = sorted(set(objects.filter(pl.col("small_object"))["raw_label"]))
    assert small == ["backpack", "clock", "guitar", "scale", "tissue box", "toaster", "toaster oven"]
    assert objects.filter(~pl.col("label_mapped"))["raw_label"].sort().to_list() == ["dishrack"] + ["trashcan"] * 3
    assert (objects["vertical_axis"] == 2).all()
    assert objects["triangle_count"].sum() == int((parsed.mesh.triangle_object_ids >= 0).sum())
    assert rooms["kind"].to_list() == ["scene", "main"] and rooms["room_id"].to_list() == [0, 1]
    polygon = shapely.from_wkb(rooms["polygon_wkb"][0])
    assert polygon.area == pytest.approx(rooms["area_m2"][0])
    assert frames.height == 0


def test_tables_are_deterministic(fixture_tables):
    parsed, tables = fixture_tables
    again = scene_tables(read_scan(parsed.source_uri, Config()), Config())
    for name in tables:
        assert parquet_bytes(name, tables[name]) == parquet_bytes(name, again[name]), name


def test_box_rows_match_the_obb(fixture_tables):
    parsed, tables = fixture_tables
    row = tables["objects"].filter(pl.col("raw_label") == "bed").row(0, named=True)
    obj = next(o for o in parsed.objects if o.object_id == row["object_id"])
    box = OrientedBox(np.array(row["center"]), np.array(row["extent"]), np.array(row["rotation"]).reshape(3, 3))
    pts = parsed.mesh.vertices[obj.vertex_indices]
    assert box.contains(pts, tol=1e-6).mean() >= 0.99
    assert row["vertex_count"] == len(obj.vertex_indices)


def _frames(timestamps, invalid=()):
    out = []
    for i, ts in enumerate(timestamps):
        pose = np.full((4, 4), np.nan) if i in invalid else np.eye(4)
        out.append(Frame(i, ts, pose, np.eye(3), 640, 480))
    return out


def test_resample_30_to_10_fps():
    frames = _frames([i / 30 for i in range(30)])
    assert sorted(resample_by_time(frames, 10.0)) == list(range(0, 30, 3))


def test_resample_skips_invalid_frames():
    frames = _frames([i / 30 for i in range(12)], invalid=(0, 3, 4))
    # Slots of 0.1 s from the first valid frame (1/30 s): [1,2,3], [4,5,6], [7,8,9], [10,11]
    assert sorted(resample_by_time(frames, 10.0)) == [1, 5, 7, 10]


def test_resample_slower_source_keeps_everything():
    frames = _frames([0.0, 0.5, 1.0, 1.5])
    assert sorted(resample_by_time(frames, 10.0)) == [0, 1, 2, 3]
    assert resample_by_time(_frames([0.0], invalid=(0,)), 10.0) == set()


def test_frames_table_from_stream(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=10, nan_frames=(3,))
    parsed = read_scan(folder, Config())
    tables = scene_tables(parsed, Config())
    _conforms(tables)
    frames = tables["frames"]
    assert frames["frame_index"].to_list() == list(range(10))
    assert frames["valid"].to_list() == [i != 3 for i in range(10)]
    # 30 fps -> 10 fps: ticks at frames 0, 3, 6, 9; frame 3 is invalid, so its tick keeps the nearest
    # valid frame within half a period (frames 2 and 4 tie; the earlier wins).
    assert frames.filter(pl.col("in_all_frame"))["frame_index"].to_list() == [0, 2, 6, 9]
    scan = tables["scans"].row(0, named=True)
    assert (scan["source_frame_count"], scan["frame_count"], scan["dropped_frames"]) == (10, 4, 1)
    assert (scan["fps"], scan["source_fps"], scan["image_width"], scan["image_height"]) == (10.0, 30.0, 640, 480)
    assert scan["has_frames"] and scan["scene_type"] == "Office"
    assert frames["intrinsics"][0].to_list() == pytest.approx([500, 0, 322, 0, 500, 242, 0, 0, 1])


def test_config_fps(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=10)
    config = Config()
    config.frames.fps = 5.0
    tables = scene_tables(read_scan(folder, config), config)
    assert tables["frames"].filter(pl.col("in_all_frame"))["frame_index"].to_list() == [0, 6]


def test_annotated_boxes_and_empty_objects():
    vertices = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    mesh = Mesh(vertices=vertices, triangles=np.array([[0, 1, 2]], np.int32))
    mesh.triangle_object_ids = np.array([5], np.int32)
    vertical_first = np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]])
    annotated = OrientedBox(np.array([3.0, 3, 0.5]), np.array([0.2, 1.0, 0.4]), vertical_first)
    parsed = ParsedScan(
        dataset="synthetic",
        scene_id="synth0000_00",
        source_uri="mem://",
        mesh=mesh,
        objects=[
            SceneObject(9, "Mouse Pad", box=annotated),
            SceneObject(5, "Phone", vertex_indices=np.array([0, 1, 2, 3])),
            SceneObject(7, "wall", vertex_indices=np.array([], dtype=np.int64)),
        ],
    )
    tables = scene_tables(parsed, Config())
    _conforms(tables)
    objects = tables["objects"]
    assert objects["object_id"].to_list() == [5, 9]
    phone, pad = objects.row(0, named=True), objects.row(1, named=True)
    assert phone["box_source"] == "mesh" and phone["small_object"] and phone["triangle_count"] == 1
    assert phone["category"] == "Phone" and phone["label_mapped"] is False and phone["nyu40_id"] is None
    assert pad["box_source"] == "annotation" and pad["small_object"] and pad["vertex_count"] == 0
    assert pad["vertical_axis"] == 0 and pad["rotation"] == [0.0, 1, 0, 0, 0, 1, 1, 0, 0]
    warnings = tables["scans"]["warnings"][0].to_list()
    assert any("1 objects without vertices or box" in w and "7 ('wall')" in w for w in warnings)
    assert tables["rooms"].height == 0 and tables["scans"]["has_frames"][0] is False
