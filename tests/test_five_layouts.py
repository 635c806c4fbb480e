"""One synthetic scene written in every dataset layout reads back as the same scan, bit for bit.

Each writer stores the scene with its dataset's conventions (ScanNet's
unaligned frame + axisAlignment, ScanNet++'s and MultiScan's 60 fps video with
each 10 fps frame held 6 times, ARKitScenes' world-to-camera axis-angle
trajectory, box-only objects and sideways frames, 3RScan's sideways sequence
played at 4 fps, MultiScan's column-major ARKit-axes camera stream in a
shifted world), and each reader undoes them. The synthetic scene is lossless
in every layout (``pipeline.synth.lossless``), so after reading nothing may
differ but what the datasets legitimately differ in:

- object ids: ScanNet++, 3RScan and MultiScan reserve 0 for unannotated
  surface, so their ids are the generator's + 1 (shifted back before comparing);
- frame indices and timestamps: held video frames are indices 0, 6, 12, ...
  and 3RScan plays at 4 fps, so frames are compared by rank in the all-frame
  sequence;
- for ARKitScenes, whose mesh has no instances, the box source and the
  vertex and triangle counts of its box masks;
- ARKitScenes poses, which go through axis-angle: equal to ~1e-15, not bit
  for bit.

Boxes, rooms, per-frame visibility (pixel counts, fractions, 2D boxes), the
budget decisions and the ``qa`` rows are identical. Questions are seeded by
the scan key (so adding a scan never reshuffles another's), so QA is
generated with every table relabelled to one shared key and its Parquet bytes
compared.
"""

from __future__ import annotations

import hashlib
from functools import partial

import numpy as np
import polars as pl
import pytest

from pipeline.config import Config
from pipeline.scene.discovery import discover_scans
from pipeline.frames.budgets import sample_frames
from pipeline.geometry.turned_camera import rotated_camera
from pipeline.qa import generate_candidates
from pipeline.scene.readers import read_scan
from pipeline.scene.parsed import ParsedScan
from pipeline.scene.tables import scene_tables
from pipeline.storage import parquet_bytes
from pipeline.synth.arkitscenes_writer import write_arkitscenes
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene
from pipeline.visibility.cast import compute_visibility, object_visibility

SEED = 5
BUDGETS = ("all", "64", "32", "16")
SHARED_KEY = "layout/scene"
WRITERS = {
    "scannet": write_scannet,
    "scannetpp": write_scannetpp,
    "arkitscenes": partial(write_arkitscenes, sky_direction="Left"),  # stored sideways, like 3RScan
    "3rscan": write_3rscan,
    "multiscan": write_multiscan,
}
ID_OFFSET = {"scannetpp": 1, "3rscan": 1, "multiscan": 1}  # formats whose object ids start at 1
BOX_MASK_COLUMNS = ("vertex_count", "triangle_count", "box_source")  # ARKitScenes: objects are boxes
FRAME_COLUMNS = ("best_frame", "first_frame", "first_timestamp")  # compared as ranks


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


def _ranks(result: dict) -> dict[int, int]:
    seq = result["samples"].filter(pl.col("budget") == "all")
    return dict(zip(seq["frame_index"].to_list(), seq["rank"].to_list()))


def _visibility_by_rank(result: dict) -> pl.DataFrame:
    """Visibility with frame indices replaced by the frame's rank in the all-frame sequence."""
    ranks = _ranks(result)
    vis = result["visibility"].with_columns(rank=pl.col("frame_index").replace_strict(ranks, return_dtype=pl.Int64))
    return vis.drop("key", "frame_index").sort("rank", "object_id")


def _decisions_by_rank(result: dict) -> pl.DataFrame:
    ranks = _ranks(result)
    by_rank = {
        column: pl.col(column).replace_strict(ranks, default=None, return_dtype=pl.Int64)
        for column in ("best_frame", "first_frame")
    }
    return result["object_visibility"].with_columns(**by_rank).drop("key", "first_timestamp")


def _relabel(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(key=pl.lit(SHARED_KEY))


def _qa_bytes(result: dict, config: Config) -> bytes:
    """The scan's ``qa`` rows for every budget, generated as if it were stored under the shared key."""
    parts = [
        generate_candidates(
            _relabel(result["objects"]),
            _relabel(result["rooms"]),
            _relabel(result["object_visibility"]),
            _relabel(result["samples"]),
            None,
            key=SHARED_KEY,
            budget=budget,
            profile="revsi",
            config=config,
        )
        for budget in BUDGETS
    ]
    return parquet_bytes("qa", pl.concat(parts))


def _box_errors(result: dict, scene) -> tuple[float, float]:
    """Largest centre distance and sorted-extent difference to the generator's exact boxes (metres)."""
    truth = {o.object_id: o.box.to_oriented() for o in scene.objects}
    centre, extent = 0.0, 0.0
    for object_id, center, ext in result["objects"].select("object_id", "center", "extent").iter_rows():
        centre = max(centre, float(np.linalg.norm(np.asarray(center) - truth[object_id].center)))
        extent = max(extent, float(np.abs(np.sort(ext) - np.sort(truth[object_id].extent)).max()))
    return centre, extent


def _assert_same_scan(results: dict, scene, config: Config) -> None:
    ref_name = next(iter(results))
    ref = results[ref_name]
    ref_qa = _qa_bytes(ref, config)
    assert len(ref_qa) > 0 and ref["object_visibility"]["visible"].any()
    for name, result in results.items():
        # Objects: the generator's boxes within 1 cm, and every layout the very same numbers.
        assert max(_box_errors(result, scene)) <= 0.01, name
        ignored = ["key", *(BOX_MASK_COLUMNS if name == "arkitscenes" else ())]
        assert result["objects"].drop(ignored).equals(ref["objects"].drop(ignored)), name
        # Frames: every synthetic frame in the all-frame sequence, sky-up poses equal to the walk's.
        poses = _all_frame_poses(result)
        assert len(poses) == len(scene.poses), name
        assert max(float(np.abs(p - q).max()) for p, q in zip(poses, scene.poses)) <= 1e-12, name
        # Visibility: same objects in the same frames with the same pixels and boxes, same decisions.
        assert _visibility_by_rank(result).equals(_visibility_by_rank(ref)), name
        assert _decisions_by_rank(result).equals(_decisions_by_rank(ref)), name
        assert result["rooms"].drop("key").equals(ref["rooms"].drop("key")), name
        # Questions: byte-identical rows once dataset and scene are the same.
        qa = _qa_bytes(result, config)
        assert hashlib.sha256(qa).hexdigest() == hashlib.sha256(ref_qa).hexdigest(), name


def _write_all(scene, root) -> dict:
    return {name: write(scene, root / name) for name, write in WRITERS.items()}


# --- default run: all five layouts, few frames ------------------------------------------------


def test_five_layouts_read_back_as_the_same_scan(tmp_path):
    config = Config()
    scene = generate_scene(SEED, 0, 3)
    results = {name: _read(folder, name, config) for name, folder in _write_all(scene, tmp_path).items()}
    _assert_same_scan(results, scene, config)


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


# --- slow: more frames, two more scenes ---------------------------------------------------------


@pytest.fixture(scope="module")
def five_layouts(tmp_path_factory):
    config = Config()
    scene = generate_scene(SEED, 0, 6)
    root = tmp_path_factory.mktemp("five")
    folders = _write_all(scene, root)
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
    _assert_same_scan(results, scene, config)


@pytest.mark.slow
@pytest.mark.parametrize("index", [1, 2])
def test_other_scenes_read_back_the_same_in_every_layout(tmp_path, index):
    config = Config()
    scene = generate_scene(SEED, index, 8)
    results = {name: _read(folder, name, config) for name, folder in _write_all(scene, tmp_path).items()}
    _assert_same_scan(results, scene, config)
