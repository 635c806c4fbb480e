"""One synthetic scene written in every dataset layout reads back as the same scan.

Each writer stores the scene with its dataset's conventions (ScanNet's
unaligned frame + axisAlignment, ScanNet++'s and MultiScan's 60 fps video with
each 10 fps frame held 6 times, ARKitScenes' world-to-camera trajectory and
box-only objects, 3RScan's rotated sequence played at 4 fps, MultiScan's
column-major ARKit-axes camera stream), and each reader undoes them. After
reading, every layout must give the same objects (boxes within 1 cm), the
same all-frame sequence (poses within 1e-6 once turned sky-up), the same
visibility, and the same ``qa`` rows.

ARKitScenes objects are boxes only (its reader assigns triangles to objects
by box), so there per-frame pixel counts may differ and only the per-budget
visibility decisions must agree. Two more things legitimately differ and are
normalised before comparing, both asserted first: 3RScan and MultiScan reserve id 0 for unannotated surface, so
their object ids are the generator's + 1; and room polygons are derived from
the mesh with a subsample seeded by the scan key (``pipeline.geometry.rooms``),
so rooms agree only within a tolerance and the QA comparison uses one room
table. Question ids hash the scan key, so QA is generated under one shared
key; the rows must then be identical apart from dataset and scene id, except
that numbers in the ``geometry`` audit JSON may differ in their last rounded
digit (float32 vertices stored in ScanNet's unaligned frame move some values
across a rounding boundary); questions, options, answers and ids are equal.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from pipeline.config import Config
from pipeline.discovery import discover_scans
from pipeline.frames import sample_frames
from pipeline.qa import generate_candidates
from pipeline.readers import read_scan
from pipeline.readers.arkitscenes import rotated_camera
from pipeline.scene import ParsedScan
from pipeline.scene_tables import scene_tables
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scene import generate_scene
from pipeline.visibility import compute_visibility, object_visibility

SEED = 5
AUDIT_DIGIT = 1.001e-3  # one unit of the coarsest rounding (3 decimals) used in the qa geometry audit
BUDGETS = ("all", "64", "32", "16")
SHARED_KEY = "layout/scene"
ID_OFFSET = {"3rscan": 1, "multiscan": 1}  # formats whose object ids start at 1
# ARKitScenes has no per-triangle instances: its reader assigns triangles to objects by box (ReVSI B.4), so
# per-frame pixel counts differ from the exact ids (floor under a table counts as table); decisions must agree.
MASKS_FROM_BOXES = {"arkitscenes"}


def _other_writers() -> dict:
    """ScanNet++ and ARKitScenes writers, when their modules are present in this checkout."""
    writers = {}
    try:
        from pipeline.synth.scannetpp_writer import write_scannetpp

        writers["scannetpp"] = write_scannetpp
    except ImportError:
        pass
    try:
        from pipeline.synth.arkitscenes_writer import write_arkitscenes

        writers["arkitscenes"] = write_arkitscenes
    except ImportError:
        pass
    return writers


def _shift_ids(scan: ParsedScan, offset: int) -> None:
    for obj in scan.objects:
        obj.object_id -= offset
    owners = scan.mesh.triangle_object_ids
    scan.mesh.triangle_object_ids = np.where(owners >= offset, owners - offset, -1).astype(np.int32)


def _pipeline(scan: ParsedScan, config: Config) -> dict:
    tables = scene_tables(scan, config)
    samples = sample_frames(tables["frames"], config)
    vis = compute_visibility(scan.key, tables["frames"], scan.mesh, config, image_rotation=scan.image_rotation)
    objvis = object_visibility(scan.key, vis, samples, tables["objects"], None, config)
    return {"scan": scan, **tables, "samples": samples, "visibility": vis, "object_visibility": objvis}


def _read(folder, layout: str, config: Config) -> dict:
    scan = read_scan(str(folder), config)
    offset = ID_OFFSET.get(layout, 0)
    if offset:
        assert min(o.object_id for o in scan.objects) == offset
        _shift_ids(scan, offset)
    return _pipeline(scan, config)


def _reference(scene, config: Config) -> dict:
    """The generator's own scan, boxes computed from vertices like every reader's."""
    scan = scene.to_parsed_scan()
    for obj in scan.objects:
        obj.box = None
    return _pipeline(scan, config)


def _all_frame_poses(result: dict) -> list[np.ndarray]:
    """Poses of the all-frame sequence, turned sky-up."""
    scan = result["scan"]
    kept = set(result["frames"].filter(pl.col("in_all_frame"))["frame_index"].to_list())
    out = []
    for frame in sorted(scan.frames, key=lambda f: f.frame_index):
        if frame.frame_index in kept:
            pose, _, _, _ = rotated_camera(frame.pose, frame.intrinsics, frame.width, frame.height, scan.image_rotation)
            out.append(pose)
    return out


def _visibility_by_rank(result: dict) -> pl.DataFrame:
    """Visibility with frame indices replaced by the frame's rank in the all-frame sequence."""
    seq = result["samples"].filter(pl.col("budget") == "all").select("frame_index", "rank")
    vis = result["visibility"].join(seq, on="frame_index", how="inner")
    return vis.select("rank", "object_id", "visible_pixels", "bbox").sort("rank", "object_id")


def _qa(result: dict, rooms: pl.DataFrame, config: Config) -> pl.DataFrame:
    def shared(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(key=pl.lit(SHARED_KEY))

    parts = [
        generate_candidates(
            shared(result["objects"]),
            shared(rooms),
            shared(result["object_visibility"]),
            shared(result["samples"]),
            None,
            key=SHARED_KEY,
            budget=budget,
            profile="revsi",
            config=config,
        )
        for budget in BUDGETS
    ]
    return pl.concat(parts).drop("dataset", "scene_id")


def _assert_same_scan(results: dict, scene, config: Config, room_tolerance: float = 0.03) -> None:
    ref_name = next(iter(results))
    ref = results[ref_name]
    ref_objects = ref["objects"]
    n_frames = len(scene.poses)
    for name, result in results.items():
        objects = result["objects"]
        # Same objects, same labels and categories, boxes within 1 cm.
        assert objects["object_id"].to_list() == ref_objects["object_id"].to_list(), name
        assert objects["raw_label"].to_list() == ref_objects["raw_label"].to_list(), name
        assert objects["category"].to_list() == ref_objects["category"].to_list(), name
        centers = np.array(objects["center"].to_list())
        assert np.abs(centers - np.array(ref_objects["center"].to_list())).max() <= 0.01, name
        extents = np.sort(np.array(objects["extent"].to_list()), axis=1)
        assert np.abs(extents - np.sort(np.array(ref_objects["extent"].to_list()), axis=1)).max() <= 0.01, name
        # Same frames: every synthetic frame in the all-frame sequence, poses within 1e-6 once sky-up.
        poses = _all_frame_poses(result)
        assert len(poses) == n_frames, name
        assert max(float(np.abs(p - q).max()) for p, q in zip(poses, scene.poses)) <= 1e-6, name
        # Same visibility, frame by frame (where objects own their triangles) and per budget.
        if name not in MASKS_FROM_BOXES:
            assert _visibility_by_rank(result).equals(_visibility_by_rank(ref)), name
        decisions = result["object_visibility"].select("budget", "object_id", "visible", "rule")
        assert decisions.equals(ref["object_visibility"].select("budget", "object_id", "visible", "rule")), name
        # Rooms: derived with a key-seeded subsample, so equal only within a tolerance.
        areas = np.array(result["rooms"]["area_m2"].to_list())
        ref_areas = np.array(ref["rooms"]["area_m2"].to_list())
        assert areas.shape == ref_areas.shape and np.all(np.abs(areas / ref_areas - 1) <= room_tolerance), name
    # Same questions, byte for byte, apart from dataset and scene id.
    rooms = ref["rooms"]
    expected = _qa(ref, rooms, config)
    assert expected.height > 0
    for name, result in results.items():
        got = _qa(result, rooms, config)
        assert got.height == expected.height, name
        for column in expected.columns:
            if column == "geometry":
                for a, b in zip(got[column].to_list(), expected[column].to_list()):
                    assert _same_audit(json.loads(a), json.loads(b)), (name, a, b)
            else:
                assert got[column].to_list() == expected[column].to_list(), (name, column)


def _same_audit(a, b) -> bool:
    """Audit geometry is rounded to 3-4 decimals; vertices stored as float32 in another frame (ScanNet's
    unaligned one) may move a value across a rounding boundary, so numbers may differ by one last digit."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_audit(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_audit(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= AUDIT_DIGIT
    return a == b


# --- default run: my two layouts against the generator itself, few frames --------------------


def test_3rscan_and_multiscan_read_back_as_the_generators_scan(tmp_path):
    config = Config()
    scene = generate_scene(SEED, 0, 3)
    results = {"generator": _reference(scene, config)}
    results["3rscan"] = _read(write_3rscan(scene, tmp_path / "3rscan"), "3rscan", config)
    results["multiscan"] = _read(write_multiscan(scene, tmp_path / "multiscan"), "multiscan", config)
    # The generator's rooms are annotated, the readers' derived: compare rooms between the readers only.
    readers = {k: v for k, v in results.items() if k != "generator"}
    _assert_same_scan(readers, scene, config)
    generator = results["generator"]
    for name, result in readers.items():
        assert _visibility_by_rank(result).equals(_visibility_by_rank(generator)), name
        assert np.abs(np.array(result["objects"]["center"].to_list()) - np.array(generator["objects"]["center"].to_list())).max() <= 0.01


def _touch(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def test_discovery_keys_one_scan_of_each_layout(tmp_path):
    """Detection is by each layout's marker files, so empty files are enough to be discovered."""
    uuid = "0cac7578-8d6f-2d13-8c2d-bfa7a04f8af3"
    _touch(tmp_path / "scannet" / "scene0000_00" / "scene0000_00_vh_clean_2.ply")
    _touch(tmp_path / "synth0003_00" / "synth0003_00_vh_clean_2.ply")
    _touch(tmp_path / "scannetpp" / "0a5c013435" / "scans" / "mesh_aligned_0.05.ply")
    _touch(tmp_path / "arkitscenes" / "41069021" / "41069021_3dod_mesh.ply")
    _touch(tmp_path / "3rscan" / uuid / "semseg.v2.json")
    _touch(tmp_path / "3rscan" / uuid / "labels.instances.annotated.v2.ply")
    _touch(tmp_path / "multiscan" / "scene_00000_00" / "scene_00000_00.annotations.json")
    _touch(tmp_path / "multiscan" / "notes" / "readme.txt")
    keys = [key for key, _ in discover_scans(str(tmp_path))]
    expected = [
        f"3rscan/{uuid}",
        "arkitscenes/41069021",
        "multiscan/scene_00000_00",
        "scannet/scene0000_00",
        "scannetpp/0a5c013435",
        "synthetic/synth0003_00",
    ]
    assert keys == sorted(expected)


# --- slow: all five layouts ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def five_layouts(tmp_path_factory):
    config = Config()
    scene = generate_scene(SEED, 0, 6)
    root = tmp_path_factory.mktemp("five")
    writers = {"scannet": write_scannet, "3rscan": write_3rscan, "multiscan": write_multiscan, **_other_writers()}
    folders = {name: write(scene, root / name) for name, write in writers.items()}
    results = {name: _read(folder, name, config) for name, folder in folders.items()}
    return scene, root, folders, results, config


@pytest.mark.slow
def test_every_layout_is_discovered_under_one_root(five_layouts):
    scene, root, folders, results, _ = five_layouts
    found = dict(discover_scans(str(root)))
    assert sorted(found) == sorted(r["scan"].key for r in results.values())
    assert {found[r["scan"].key] for r in results.values()} == {str(f) for f in folders.values()}
    assert len({r["scan"].key.split("/")[0] for r in results.values()}) == len(results)


@pytest.mark.slow
def test_every_layout_reads_back_as_the_same_scan(five_layouts):
    scene, _, _, results, config = five_layouts
    assert {"scannet", "3rscan", "multiscan"} <= set(results)
    _assert_same_scan(results, scene, config)
