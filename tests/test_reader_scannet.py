"""ScanNet reader on the real scene0000_00 fixture (ScanNet v1 release) and on small hand-made scenes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.config import Config
from pipeline.geometry.obb import gravity_aligned_obb, is_rotation_about_z
from pipeline.scene.readers import checksum, detect_dataset, read_scan
from pipeline.scene.readers.scannet import aggregation_version
from tests.scannet_factory import SCENE, V1_MAP, linked_fixture, make_box_room, replace_file, write_frames
from tests.reader_errors import scan_error

KEY = f"scannet/{SCENE}"


@pytest.fixture(scope="module")
def fixture_scene(fixtures_dir, tmp_path_factory):
    folder = linked_fixture(tmp_path_factory.mktemp("fx"), fixtures_dir)
    return folder, read_scan(folder, Config())


def _segments(fixtures_dir):
    agg = json.loads((fixtures_dir / "scannet" / SCENE / f"{SCENE}.aggregation.json").read_text())
    segs = json.loads((fixtures_dir / "scannet" / SCENE / f"{SCENE}_vh_clean_2.0.010000.segs.json").read_text())
    return agg, np.asarray(segs["segIndices"])


def test_one_object_per_seg_group(fixture_scene, fixtures_dir):
    _, parsed = fixture_scene
    agg, seg_indices = _segments(fixtures_dir)
    assert aggregation_version(agg) == "v1"
    assert parsed.key == KEY and parsed.dataset == "scannet"
    assert len(parsed.objects) == len(agg["segGroups"]) == 55
    by_id = {o.object_id: o for o in parsed.objects}
    for group in agg["segGroups"]:
        obj = by_id[group["objectId"]]
        assert obj.raw_label == group["label"]
        expected = np.flatnonzero(np.isin(seg_indices, group["segments"]))
        np.testing.assert_array_equal(obj.vertex_indices, expected)
    assert parsed.scene_type == "Bedroom / Hotel"
    assert not parsed.has_frames and parsed.frames == []
    assert any("no camera frames" in w for w in parsed.warnings)
    assert any("no axisAlignment" in w for w in parsed.warnings)


def test_labels_mapped_or_reported(fixture_scene):
    _, parsed = fixture_scene
    unmapped = sorted({o.raw_label for o in parsed.objects if not o.label_mapped})
    # ScanNet v1 spellings that the v2 map does not know.
    assert unmapped == ["dishrack", "trashcan"]
    assert sum(not o.label_mapped for o in parsed.objects) == 4
    for label in unmapped:
        assert any(f"label {label!r}" in w and "not in scannetv2-labels.combined.tsv" in w for w in parsed.warnings)
    mapped = {o.raw_label: o for o in parsed.objects if o.label_mapped}
    assert (mapped["couch"].category, mapped["couch"].nyu40_id, mapped["couch"].scannet200_id) == ("couch", 6, 6)
    assert mapped["tv"].nyu40_id == 25 and mapped["wall"].scannet200_id == 1
    assert all(o.nyu40_id is None and o.category == o.raw_label for o in parsed.objects if not o.label_mapped)


def test_v1_label_map_columns(tmp_path, fixtures_dir):
    folder = linked_fixture(tmp_path, fixtures_dir, label_maps=(V1_MAP,))
    parsed = read_scan(folder, Config())
    assert sorted({o.raw_label for o in parsed.objects if not o.label_mapped}) == ["dishrack"]
    trashcan = next(o for o in parsed.objects if o.raw_label == "trashcan")
    assert trashcan.label_mapped and trashcan.nyu40_id == 39


def test_obbs_contain_their_vertices(fixture_scene):
    _, parsed = fixture_scene
    fractions = []
    for obj in parsed.objects:
        pts = parsed.mesh.vertices[obj.vertex_indices]
        box = gravity_aligned_obb(pts)
        assert is_rotation_about_z(box.rotation)
        fractions.append(box.contains(pts, tol=1e-6).mean())
    assert min(fractions) >= 0.99


def test_triangle_object_ids(fixture_scene):
    _, parsed = fixture_scene
    mesh = parsed.mesh
    owner = mesh.triangle_object_ids
    assert owner.shape == (len(mesh.triangles),) and owner.dtype == np.int32
    vertex_owner = np.full(len(mesh.vertices), -1)
    for obj in parsed.objects:
        vertex_owner[obj.vertex_indices] = obj.object_id
    tri_owner = vertex_owner[mesh.triangles]
    all_same = (tri_owner[:, 0] == tri_owner[:, 1]) & (tri_owner[:, 1] == tri_owner[:, 2])
    np.testing.assert_array_equal(owner, np.where(all_same, tri_owner[:, 0], -1))
    assert (owner >= 0).sum() > 0.5 * len(owner) and (owner == -1).any()


def test_rooms_derived(fixture_scene):
    _, parsed = fixture_scene
    assert [(r.kind, r.source) for r in parsed.rooms] == [("scene", "derived"), ("main", "derived")]
    area = parsed.rooms[0].polygon.area
    hull = parsed.rooms[0].polygon.convex_hull.area
    assert 20 < area <= hull


def test_v2_aggregation_header(tmp_path, fixtures_dir, fixture_scene):
    folder = linked_fixture(tmp_path, fixtures_dir)
    agg, _ = _segments(fixtures_dir)
    agg.update(
        sceneId=f"scannet.{SCENE}",
        appId="Aggregator.v2",
        segmentsFile=f"scannet.{SCENE}_vh_clean_2.0.010000.segs.json",
    )
    assert aggregation_version(agg) == "v2"
    replace_file(folder, f"{SCENE}.aggregation.json", json.dumps(agg))
    parsed = read_scan(folder, Config())
    reference = fixture_scene[1]
    assert [(o.object_id, o.raw_label, len(o.vertex_indices)) for o in parsed.objects] == [
        (o.object_id, o.raw_label, len(o.vertex_indices)) for o in reference.objects
    ]
    assert not any("names scene" in w for w in parsed.warnings)


def test_vh_clean_aggregation_name(tmp_path):
    folder = make_box_room(tmp_path)
    (folder / f"{folder.name}.aggregation.json").rename(folder / f"{folder.name}_vh_clean.aggregation.json")
    assert [o.raw_label for o in read_scan(folder, Config()).objects] == ["floor", "table", "book"]


def test_axis_alignment_moves_mesh(tmp_path, fixtures_dir, fixture_scene):
    folder = linked_fixture(tmp_path, fixtures_dir)
    c, s = np.cos(0.3), np.sin(0.3)
    align = np.array([[c, -s, 0, 1.5], [s, c, 0, -2.0], [0, 0, 1, -0.1], [0, 0, 0, 1]])
    meta = (fixtures_dir / "scannet" / SCENE / f"{SCENE}.txt").read_text()
    meta += "axisAlignment = " + " ".join(repr(float(v)) for v in align.ravel()) + "\n"
    replace_file(folder, f"{SCENE}.txt", meta)
    parsed = read_scan(folder, Config())
    raw = fixture_scene[1].mesh.vertices
    expected = raw @ align[:3, :3].T + align[:3, 3]
    np.testing.assert_allclose(parsed.mesh.vertices, expected, atol=1e-9)
    assert not np.allclose(parsed.mesh.vertices, raw)
    assert not any("axisAlignment" in w for w in parsed.warnings)


def test_axis_alignment_moves_poses(tmp_path):
    align = np.array([[0, -1, 0, 2.0], [1, 0, 0, 0.0], [0, 0, 1, 0.0], [0, 0, 0, 1]])
    folder = make_box_room(tmp_path, alignment=align, frames="stream", n_frames=6, nan_frames=(2,))
    parsed = read_scan(folder, Config())
    assert parsed.has_frames
    f1 = parsed.frames[1]
    raw = np.eye(4)
    raw[:3, 3] = [0.6, 0.5, 1.5]
    np.testing.assert_allclose(f1.pose, align @ raw, atol=1e-6)
    assert not parsed.frames[2].valid
    assert [f.timestamp for f in parsed.frames] == pytest.approx([i / 30 for i in range(6)])
    assert parsed.load_image(5).shape == (480, 640, 3)
    # 128x96 frames upscaled 5x: f = 100 * 5; pixel centres at integer coordinates move c to (c + 0.5) * 5 - 0.5.
    np.testing.assert_allclose(f1.intrinsics, [[500, 0, 322], [0, 500, 242], [0, 0, 1]])


def test_stream_fps_from_metadata(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=4)
    meta = folder / f"{folder.name}.txt"
    meta.write_text(meta.read_text() + "fps = 10\n")
    parsed = read_scan(folder, Config())
    assert [f.timestamp for f in parsed.frames] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert parsed.source_fps == 10.0
    meta.write_text(meta.read_text() + "fps = fast\n")
    assert "fps must be a positive number" in scan_error(folder)


def test_sens_preferred_over_stream(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=4)
    write_frames(folder, "sens", 5, timestamps_us=[200_000 * i for i in range(5)])
    parsed = read_scan(folder, Config())
    assert len(parsed.frames) == 5 and parsed.frames[1].timestamp == pytest.approx(0.2)


def test_label_map_from_config(tmp_path):
    folder = make_box_room(tmp_path)
    elsewhere = tmp_path / "maps" / "my_map.tsv"
    elsewhere.parent.mkdir()
    (tmp_path / "scannetv2-labels.combined.tsv").rename(elsewhere)
    parsed = read_scan(folder, Config(label_map=str(elsewhere)))
    assert all(o.label_mapped for o in parsed.objects)
    assert [o.nyu40_id for o in parsed.objects] == [2, 7, 23]


def test_detect_dataset(tmp_path, fixtures_dir):
    assert detect_dataset(fixtures_dir / "scannet" / SCENE) == "scannet"
    assert detect_dataset(make_box_room(tmp_path / "a", scene="synth0003_00")) == "synthetic"
    assert detect_dataset(tmp_path) is None
    assert detect_dataset(tmp_path / "nowhere") is None
    parsed = read_scan(tmp_path / "a" / "synth0003_00", Config())
    assert parsed.key == "synthetic/synth0003_00"


def test_checksum_covers_inputs_only(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=3)
    first = read_scan(folder, Config()).checksum
    assert len(first) == 64 and read_scan(folder, Config()).checksum == first
    (folder / f"{folder.name}.scan2qa_truth.json").write_text("{}")  # generator sidecar: not an input
    assert read_scan(folder, Config()).checksum == first
    np.savetxt(folder / "pose" / "1.txt", np.eye(4), fmt="%f")
    assert read_scan(folder, Config()).checksum != first


def test_checksum_is_stable_across_locations(tmp_path):
    a = make_box_room(tmp_path / "a")
    b = make_box_room(tmp_path / "b")
    files = sorted(a.iterdir()) + [a.parent / "scannetv2-labels.combined.tsv"]
    files_b = sorted(b.iterdir()) + [b.parent / "scannetv2-labels.combined.tsv"]
    assert checksum(files, a) == checksum(files_b[::-1], b)


def test_objects_without_vertices_are_kept_in_the_parse(tmp_path):
    folder = make_box_room(tmp_path)
    agg_path = folder / f"{folder.name}.aggregation.json"
    agg = json.loads(agg_path.read_text())
    agg["segGroups"].append({"id": 7, "objectId": 7, "segments": [], "label": "book"})
    agg_path.write_text(json.dumps(agg))
    parsed = read_scan(folder, Config())
    assert len(parsed.objects[-1].vertex_indices) == 0


# ---- bad input: one line naming scan and file ----


def test_missing_aggregation(tmp_path, fixtures_dir):
    folder = linked_fixture(tmp_path, fixtures_dir)
    (folder / f"{SCENE}.aggregation.json").unlink()
    (folder / f"{SCENE}_vh_clean.aggregation.json").unlink()
    message = scan_error(folder)
    assert message.startswith(f"{KEY}: {SCENE}.aggregation.json: missing aggregation")


def test_truncated_ply(tmp_path, fixtures_dir):
    folder = linked_fixture(tmp_path, fixtures_dir)
    data = (fixtures_dir / "scannet" / SCENE / f"{SCENE}_vh_clean_2.ply").read_bytes()
    replace_file(folder, f"{SCENE}_vh_clean_2.ply", data[: len(data) // 2])
    assert scan_error(folder).startswith(f"{KEY}: {SCENE}_vh_clean_2.ply: ")


def test_unknown_segments(tmp_path, fixtures_dir):
    folder = linked_fixture(tmp_path, fixtures_dir)
    agg, _ = _segments(fixtures_dir)
    agg["segGroups"][3]["segments"].append(99999999)
    replace_file(folder, f"{SCENE}.aggregation.json", json.dumps(agg))
    message = scan_error(folder)
    assert message.startswith(f"{KEY}: {SCENE}.aggregation.json: segGroup 3")
    assert "99999999" in message and "absent from segs.json" in message


def test_segment_count_mismatch(tmp_path):
    folder = make_box_room(tmp_path)
    segs_path = folder / f"{folder.name}_vh_clean_2.0.010000.segs.json"
    segs = json.loads(segs_path.read_text())
    segs["segIndices"] = segs["segIndices"][:-5]
    segs_path.write_text(json.dumps(segs))
    assert "segIndices for" in scan_error(folder)


@pytest.mark.parametrize(
    "text",
    [
        b"\xff\xfe\x00garbage\x81",
        b"axisAlignment = 1 0 0\n",
        b"axisAlignment = a b c d e f g h i j k l m n o p\n",
        b"no equals sign\n",
    ],
)
def test_unreadable_metadata(tmp_path, fixtures_dir, text):
    folder = linked_fixture(tmp_path, fixtures_dir)
    replace_file(folder, f"{SCENE}.txt", text)
    assert scan_error(folder).startswith(f"{KEY}: {SCENE}.txt: ")


def test_missing_label_map(tmp_path, fixtures_dir):
    folder = linked_fixture(tmp_path, fixtures_dir, label_maps=())
    message = scan_error(folder)
    assert message.startswith(f"{KEY}: scannetv2-labels.combined.tsv: label map not found")
    assert str(folder.parent / "scannetv2-labels.combined.tsv") in message
    assert str(folder.parent / "scannet-labels.combined.tsv") in message
    missing = scan_error(folder, Config(label_map=str(tmp_path / "nope.tsv")))
    assert "nope.tsv" in missing and "config.label_map" in missing


def test_missing_colour_image_in_stream(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=3)
    (folder / "color" / "1.jpg").unlink()
    assert "color/1.jpg" in scan_error(folder)


def test_missing_pose_file_in_stream(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=3)
    (folder / "pose" / "1.txt").unlink()
    message = scan_error(folder)
    assert "pose/1.txt" in message and "pose file missing" in message and "\n" not in message


def test_unreadable_pose_file(tmp_path):
    folder = make_box_room(tmp_path, frames="stream", n_frames=3)
    (folder / "pose" / "2.txt").write_text("1 2 3\n")
    assert scan_error(folder).endswith("2.txt: expected 16 numbers, found 3")


# ---- object storage ----


def test_read_from_s3(tmp_path, s3_bucket):
    folder = make_box_room(tmp_path / "local", frames="sens", n_frames=4)
    root = s3_bucket.upload(tmp_path / "local", "scans/root")
    options = dict(s3_bucket.options, use_listings_cache=False)
    config = Config(storage_options=options)
    uri = f"{root}/{folder.name}"
    assert detect_dataset(uri, options) == "scannet"
    remote = read_scan(uri, config)
    local = read_scan(folder, Config())
    assert remote.source_uri == uri
    assert remote.checksum == local.checksum
    assert len(remote.objects) == len(local.objects) and len(remote.frames) == 4
    assert remote.load_image(2).shape == (480, 640, 3)