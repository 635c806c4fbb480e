"""The synthetic scan generator: ScanNet's layout, determinism, and geometry that matches its own ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import shapely
from scipy.spatial import cKDTree

from scan2qa import main as cli_main
from pipeline.formats.sens import SensReader
from pipeline.geometry.raycast import MeshRaycaster, pixel_rays
from pipeline.synth.label_map import HEADER, SCANNET_ROWS, label_map_rows, nyu40_ids
from pipeline.synth.layout import FURNITURE_PER_M2, MAX_FURNITURE, MIN_FURNITURE, MIN_FURNITURE_CAP
from pipeline.synth.render import FrameRenderer
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scene import generate_scene
from pipeline.synth.vocabulary import SMALL_OBJECTS

SEED = 7
FRAMES = 4
SCENES_FOR_GEOMETRY = (0, 1, 2, 3, 4, 5)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, Path]:
    """The same scene written twice: once through ``scan2qa synth``, once through the API."""
    cli_root = tmp_path_factory.mktemp("cli")
    assert cli_main(["synth", "--out", str(cli_root), "--scenes", "1", "--frames", str(FRAMES), "--seed", str(SEED), "--sens"]) == 0
    api_root = tmp_path_factory.mktemp("api")
    write_scannet(generate_scene(SEED, 0, FRAMES), api_root, sens=True)
    return cli_root, api_root


@pytest.fixture(scope="module")
def scene0():
    return generate_scene(SEED, 0, FRAMES)


@pytest.fixture(scope="module")
def scenes():
    return [generate_scene(SEED, i, 20) for i in SCENES_FOR_GEOMETRY]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_byte_identical_files(written):
    a, b = (_files(root) for root in written)
    assert sorted(a) == sorted(b)
    assert [name for name in a if a[name] != b[name]] == []


def test_scan_folder_has_scannets_layout(written):
    root = written[0]
    sid = "synth0000_00"
    scene = root / sid
    expected = [
        f"{sid}_vh_clean_2.ply",
        f"{sid}_vh_clean_2.0.010000.segs.json",
        f"{sid}.aggregation.json",
        f"{sid}.txt",
        f"{sid}.sens",
        f"{sid}.scan2qa_truth.json",
        "intrinsic/intrinsic_color.txt",
        "intrinsic/intrinsic_depth.txt",
        "intrinsic/extrinsic_color.txt",
        "intrinsic/extrinsic_depth.txt",
    ]
    for name in expected:
        assert (scene / name).is_file(), name
    for i in range(FRAMES):
        for name in (f"color/{i}.jpg", f"depth/{i}.png", f"pose/{i}.txt"):
            assert (scene / name).is_file(), name
    assert (root / "scannetv2-labels.combined.tsv").is_file()
    pose = np.loadtxt(scene / "pose" / "0.txt")
    assert pose.shape == (4, 4) and np.allclose(pose[3], [0, 0, 0, 1])
    assert np.loadtxt(scene / "intrinsic" / "intrinsic_color.txt").shape == (4, 4)
    depth = cv2.imread(str(scene / "depth" / "0.png"), cv2.IMREAD_UNCHANGED)
    color = cv2.imread(str(scene / "color" / "0.jpg"))
    assert depth.dtype == np.uint16 and depth.shape == (480, 640)
    assert color.shape == (480, 640, 3)
    sens = SensReader(scene / f"{sid}.sens")
    np.testing.assert_allclose(sens.pose(1), np.loadtxt(scene / "pose" / "1.txt"), atol=1e-6)
    assert sens.color_bytes(0) == (scene / "color" / "0.jpg").read_bytes()
    assert np.array_equal(sens.depth(FRAMES - 1), cv2.imread(str(scene / "depth" / f"{FRAMES - 1}.png"), cv2.IMREAD_UNCHANGED))


def _ply_header(path: Path) -> list[str]:
    lines = []
    with open(path, "rb") as fh:
        while True:
            line = fh.readline().decode("ascii").strip()
            lines.append(line)
            if line == "end_header":
                return lines


def _ply_vertices(path: Path) -> np.ndarray:
    """xyz of a binary PLY written in ScanNet's layout, read directly (plyfile parses faces one by one: slow)."""
    header = _ply_header(path)
    count = int(next(ln for ln in header if ln.startswith("element vertex")).split()[-1])
    offset = sum(len(ln) + 1 for ln in header)
    dtype = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("rgba", "u1", 4)])
    data = np.frombuffer(path.read_bytes(), dtype=dtype, count=count, offset=offset)
    return np.stack([data["x"], data["y"], data["z"]], axis=1).astype(np.float64)


def test_files_match_the_real_scannet_fixture(written, fixtures_dir):
    real = fixtures_dir / "scannet" / "scene0000_00"
    scene = written[0] / "synth0000_00"
    strip_counts = lambda lines: [" ".join(w for w in ln.split() if not w.isdigit()) for ln in lines]  # noqa: E731
    assert strip_counts(_ply_header(scene / "synth0000_00_vh_clean_2.ply")) == strip_counts(
        _ply_header(real / "scene0000_00_vh_clean_2.ply")
    )
    vertex_count = len(_ply_vertices(scene / "synth0000_00_vh_clean_2.ply"))

    segs = json.loads((scene / "synth0000_00_vh_clean_2.0.010000.segs.json").read_text())
    real_segs = json.loads((real / "scene0000_00_vh_clean_2.0.010000.segs.json").read_text())
    assert set(segs) == set(real_segs) == {"params", "sceneId", "segIndices"}
    assert set(segs["params"]) == set(real_segs["params"])
    assert len(segs["segIndices"]) == vertex_count

    agg = json.loads((scene / "synth0000_00.aggregation.json").read_text())
    real_agg = json.loads((real / "scene0000_00.aggregation.json").read_text())
    assert set(agg) == set(real_agg) | {"segmentsFile"}
    assert agg["sceneId"] == "scannet.synth0000_00" and agg["appId"] == "Aggregator.v2"
    assert agg["segmentsFile"] == "scannet.synth0000_00_vh_clean_2.0.010000.segs.json"
    assert all(set(g) == set(real_agg["segGroups"][0]) for g in agg["segGroups"])
    known = set(segs["segIndices"])
    assert all(set(g["segments"]) <= known for g in agg["segGroups"])

    keys = lambda p: {ln.split(" = ")[0] for ln in p.read_text().splitlines() if " = " in ln}  # noqa: E731
    assert keys(scene / "synth0000_00.txt") == keys(real / "scene0000_00.txt") | {"axisAlignment", "fps"}

    tsv = (written[0] / "scannetv2-labels.combined.tsv").read_bytes().decode().split("\r\n")
    real_tsv = (fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv").read_bytes().decode().split("\r\n")
    assert tsv[0] == real_tsv[0]
    mapped = {row.split("\t")[1] for row in tsv[1:] if row}
    assert {g["label"] for g in agg["segGroups"]} <= mapped


def test_label_map_copies_scannet_rows_verbatim(fixtures_dir):
    real = (fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv").read_bytes().decode().split("\r\n")
    assert HEADER == real[0]
    assert set(SCANNET_ROWS) <= set(real[1:])
    assert nyu40_ids()["chair"] == 5 and nyu40_ids()["wall"] == 1 and nyu40_ids()["phone"] == 40
    assert len({row.split("\t")[1] for row in label_map_rows()}) == len(label_map_rows())  # raw_category unique (ids repeat in ScanNet)


def test_small_object_labels_come_from_the_pinpointqa_vocabulary(fixtures_dir):
    vocab = json.loads((fixtures_dir / "pinpointqa" / "small_object_vocab.json").read_text())["all"]
    assert set(SMALL_OBJECTS) <= set(vocab)


def test_mesh_and_poses_are_stored_unaligned(written, scene0):
    scene_dir = written[0] / "synth0000_00"
    txt = dict(ln.split(" = ") for ln in (scene_dir / "synth0000_00.txt").read_text().splitlines())
    alignment = np.array([float(v) for v in txt["axisAlignment"].split()]).reshape(4, 4)
    assert not np.allclose(alignment, np.eye(4), atol=1e-3)
    scene = scene0
    stored = _ply_vertices(scene_dir / "synth0000_00_vh_clean_2.ply")
    world = stored @ alignment[:3, :3].T + alignment[:3, 3]
    assert np.abs(world - scene.mesh.vertices).max() < 1e-4
    pose = np.loadtxt(scene_dir / "pose" / "1.txt")
    np.testing.assert_allclose(alignment @ pose, scene.poses[1], atol=1e-12)


def test_truth_sidecar(written):
    truth = json.loads((written[0] / "synth0000_00" / "synth0000_00.scan2qa_truth.json").read_text())
    assert {r["kind"] for r in truth["rooms"]} == {"scene", "main"}
    objects = {o["id"]: o for o in truth["objects"]}
    small = [o for o in objects.values() if o["small"]]
    assert small and len({o["label"] for o in small}) == len(small)
    for o in small:
        assert objects[o["support_id"]]["label"] and o["support_relation"] in ("on", "under")
        assert all(not objects[n["id"]]["structural"] for n in o["neighbour_distances"])
    for label in ("wall", "floor", "ceiling"):
        assert any(o["label"] == label and o["structural"] for o in objects.values())
    rot = np.array(objects[0]["box"]["rotation"])
    assert np.allclose(rot.T @ rot, np.eye(3))


def test_furniture_counts_and_repeated_categories(scenes):
    for scene in scenes:
        pieces = [o for o in scene.objects if not o.small and not o.structural and o.label not in ("door", "window")]
        furniture = [o.label for o in pieces]
        # Rooms down to 4.5 m² hold at most 0.8 floor-standing pieces per m² (at least 6); the rest get 10 to 60.
        # Pieces standing on others (a monitor on a desk, a lamp on a nightstand) take no floor and are not capped.
        standing = [o for o in pieces if o.support_relation != "on"]
        area = scene.rooms[0].polygon.area
        cap = min(MAX_FURNITURE, max(MIN_FURNITURE_CAP, round(FURNITURE_PER_M2 * area)))
        assert min(MIN_FURNITURE, cap) <= len(standing) <= cap, (scene.scene_id, area, len(standing))
        assert any(furniture.count(label) > 1 for label in set(furniture)), scene.scene_id
        assert {"wall", "floor", "ceiling", "door"} <= {o.label for o in scene.objects}


def _overlaps(a, b) -> bool:
    dz = min(a.z_max, b.z_max) - max(a.z_min, b.z_min)
    return dz > 1e-6 and shapely.intersection(a.footprint(), b.footprint()).area > 1e-6


def test_objects_never_interpenetrate(scenes):
    for scene in scenes:
        parts = [(o.object_id, p) for o in scene.objects for p in o.parts]
        tree = shapely.STRtree([p.footprint() for _, p in parts])
        left, right = tree.query([p.footprint() for _, p in parts], predicate="intersects")
        for i, j in zip(left, right):
            if parts[i][0] < parts[j][0]:
                assert not _overlaps(parts[i][1], parts[j][1]), (scene.scene_id, parts[i][0], parts[j][0])


def test_camera_stays_in_free_space_at_eye_height(scenes):
    for scene in scenes:
        centres = scene.poses[:, :3, 3]
        assert np.all((centres[:, 2] > 1.4) & (centres[:, 2] < 1.6))
        scene_polygon = next(r.polygon for r in scene.rooms if r.kind == "scene")
        assert np.all(shapely.contains_xy(scene_polygon, centres[:, 0], centres[:, 1]))
        for obj in scene.objects:
            for part in obj.parts:
                assert not np.any(part.to_oriented().contains(centres)), (scene.scene_id, obj.label)
        steps = np.linalg.norm(np.diff(centres, axis=0), axis=1)
        assert steps.max() < 1.5  # no teleporting between frames, even at 20 frames per scene


def test_camera_visits_every_room(scenes):
    for scene in scenes:
        main = next(r.polygon for r in scene.rooms if r.kind == "main")
        centres = scene.poses[:, :3, 3]
        assert np.any(shapely.contains_xy(main, centres[:, 0], centres[:, 1]))
        assert scene.room_plans
        for name, (_, polygon) in scene.room_plans.items():
            inside = shapely.contains_xy(polygon, centres[:, 0], centres[:, 1])
            assert inside.sum() >= 2, (scene.scene_id, name)


def test_small_objects_rest_on_their_support(scenes):
    checked = {"on": 0, "under": 0}
    for scene in scenes:
        by_id = {o.object_id: o for o in scene.objects}
        for obj in (o for o in scene.objects if o.small):
            box = obj.box
            support = by_id[obj.support_id]
            if obj.support_relation == "on":
                tops = [p for p in support.parts if abs(p.z_max - box.z_min) < 1e-9]
                assert tops, (scene.scene_id, obj.label, support.label)
                assert any(t.footprint().buffer(1e-9).contains(box.footprint()) for t in tops), (obj.label, support.label)
            else:
                assert support.label == "floor" and abs(box.z_min) < 1e-9
                above = by_id[obj.under_id]
                assert above.box.z_max > box.z_max
                assert above.box.footprint().contains(box.footprint())
            checked[obj.support_relation] += 1
    assert checked["on"] > 10 and checked["under"] >= 1
    labels = {(o.label, scene.objects[o.support_id].label) for scene in scenes for o in scene.objects if o.small}
    assert ("phone", "desk") in labels


def test_vertex_distances_match_the_analytic_box_distances(scenes):
    pairs = 0
    for scene in scenes[:3]:
        verts = scene.mesh.vertices
        for small_id, neighbours in scene.small_object_distances().items():
            tree = cKDTree(verts[scene.vertex_indices(small_id)])
            for other_id, analytic in neighbours.items():
                d, _ = tree.query(verts[scene.vertex_indices(other_id)], k=1)
                assert abs(d.min() - analytic) <= 0.01, (scene.scene_id, small_id, other_id, d.min(), analytic)
                pairs += 1
    assert pairs > 10


def test_rendered_pixel_shows_the_triangles_object(scenes):
    scene = scenes[0]
    renderer = FrameRenderer(scene)
    frame = renderer.render(5)
    raycaster = MeshRaycaster(scene.mesh.vertices, scene.mesh.triangles)
    rays = pixel_rays(scene.intrinsics, scene.poses[5], scene.width, scene.height)
    rng = np.random.default_rng(0)
    hit_pixels = np.argwhere(frame.triangle_ids >= 0)
    for v, u in hit_pixels[rng.choice(len(hit_pixels), 50, replace=False)]:
        _, prim = raycaster.cast_rays(np.ascontiguousarray(rays[v, u][None, :]))
        assert prim[0] == frame.triangle_ids[v, u]
        assert scene.mesh.triangle_object_ids[prim[0]] == frame.object_ids[v, u]
    assert len(np.unique(frame.object_ids)) > 2


def test_depth_png_round_trips_to_the_ray_cast_depth(written, scene0):
    frame = FrameRenderer(scene0).render(2)
    png = cv2.imread(str(written[0] / "synth0000_00" / "depth" / "2.png"), cv2.IMREAD_UNCHANGED)
    hit = np.isfinite(frame.depth_m)
    assert hit.mean() > 0.9
    assert np.abs(png[hit] / 1000.0 - frame.depth_m[hit]).max() <= 0.001
    assert np.all(png[~hit] == 0)


def test_in_memory_parsed_scan(scene0):
    scan = scene0.to_parsed_scan()
    assert scan.key == "synthetic/synth0000_00" and len(scan.frames) == FRAMES
    assert [o.object_id for o in scan.objects] == [o.object_id for o in scene0.objects]
    owners = scene0.mesh.triangle_object_ids[np.isin(scene0.mesh.triangles[:, 0], scan.objects[5].vertex_indices)]
    assert set(owners.tolist()) == {5}
    image = scan.load_image(1)
    assert image.shape == (480, 640, 3) and image.dtype == np.uint8
    kinds = {r.kind for r in scan.rooms}
    assert kinds == {"scene", "main"}
    main = next(r.polygon for r in scan.rooms if r.kind == "main")
    centres = scene0.poses[:, :3, 3]  # the main room is the plan room the video is mostly recorded in (SPEC §4)
    dwell = {name: int(shapely.contains_xy(poly, centres[:, 0], centres[:, 1]).sum())
             for name, (_, poly) in scene0.room_plans.items()}
    assert main.equals(scene0.room_plans[max(dwell, key=lambda name: (dwell[name], scene0.room_plans[name][1].area))][1])
