"""Write a synthetic scene in ScanNet's native layout, structurally indistinguishable from an exported real scan.

Mesh and poses are stored in an unaligned frame and ``<scene>.txt`` carries
the ``axisAlignment`` that maps them back to the z-up world, as real ScanNet
ships them, so a reader that forgets it gets the geometry wrong. The only file
ScanNet does not have is ``<scene>.scan2qa_truth.json``, the exact ground truth
(boxes, supports, analytic distances) that the layout cannot carry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from pipeline.formats.ply import write_ply
from pipeline.synth.label_map import nyu40_ids, write_label_map
from pipeline.synth.render import FrameRenderer
from pipeline.synth.scene import SynthScene

LABEL_MAP_NAME = "scannetv2-labels.combined.tsv"
TRUTH_SUFFIX = ".scan2qa_truth.json"
SEGMENT_PARAMS = {
    "kThresh": "0.0001",
    "segMinVerts": "20",
    "minPoints": "750",
    "maxPoints": "30000",
    "thinThresh": "0.05",
    "flatThresh": "0.001",
    "minLength": "0.02",
    "maxLength": "1",
}


def _matrix_text(m: np.ndarray) -> str:
    """ScanNet's exporter writes one row per line, ``%f`` values separated by spaces."""
    return "".join(" ".join(f"{v:f}" for v in row) + "\n" for row in np.asarray(m, dtype=float))


def _pose_text(m: np.ndarray) -> str:
    """A pose in ScanNet's row-per-line layout, each value with the digits that read back as the same float.

    ScanNet's exporter prints 6 decimals; a synthetic pose needs all of its digits so that every layout
    carries the same camera (see ``pipeline.synth.lossless``). Readers parse either.
    """
    return "".join(" ".join(repr(float(v) + 0.0) for v in row) + "\n" for row in np.asarray(m, dtype=float))


def _flat(m: np.ndarray) -> str:
    return " ".join(f"{v:f}" for v in np.asarray(m, dtype=float).ravel())


def _intrinsic4(K: np.ndarray) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = K
    return m


def _transform(m: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ m[:3, :3].T + m[:3, 3]


def _segs_json(scene: SynthScene) -> str:
    params = ",\n".join(f'\t"{k}": "{v}"' for k, v in SEGMENT_PARAMS.items())
    indices = ",".join(map(str, np.asarray(scene.segments).astype(np.int64).tolist()))  # one int per vertex
    return f'{{\n"params": {{\n{params}\n}}\n,\n"sceneId": "{scene.scene_id}",\n"segIndices": [{indices}]\n}}\n'


def _aggregation_json(scene: SynthScene) -> str:
    groups = []
    for obj in scene.objects:
        start, stop = scene.object_vertex_ranges[obj.object_id]
        segs = sorted({int(s) for s in np.unique(scene.segments[start:stop])})
        groups.append(
            "\t{\n"
            f'\t"id": {obj.object_id},\n'
            f'\t"objectId": {obj.object_id},\n'
            f'\t"segments": [{",".join(str(s) for s in segs)}],\n'
            f'\t"label": {json.dumps(obj.label)}\n'
            "\t}"
        )
    sid = f"scannet.{scene.scene_id}"
    return (
        "{\n"
        f'"sceneId": "{sid}",\n'
        '"appId": "Aggregator.v2",\n'
        '"segGroups": [\n' + ",\n".join(groups) + "\n],\n"
        f'"segmentsFile": "{sid}_vh_clean_2.0.010000.segs.json"\n'
        "}\n"
    )


def _info_txt(scene: SynthScene) -> str:
    K = scene.intrinsics
    n = len(scene.poses)
    lines = [
        f"axisAlignment = {_flat(scene.axis_alignment)} ",
        f"colorHeight = {scene.height}",
        f"colorToDepthExtrinsics = {_flat(np.eye(4))}",
        f"colorWidth = {scene.width}",
        f"depthHeight = {scene.height}",
        f"depthWidth = {scene.width}",
        # Not a ScanNet key: the exported stream has no timestamps, and these scans run at 10 fps, not ScanNet's 30.
        f"fps = {scene.fps:f}",
        f"fx_color = {K[0, 0]:f}",
        f"fx_depth = {K[0, 0]:f}",
        f"fy_color = {K[1, 1]:f}",
        f"fy_depth = {K[1, 1]:f}",
        f"mx_color = {K[0, 2]:f}",
        f"mx_depth = {K[0, 2]:f}",
        f"my_color = {K[1, 2]:f}",
        f"my_depth = {K[1, 2]:f}",
        f"numColorFrames = {n}",
        f"numDepthFrames = {n}",
        "numIMUmeasurements = 0",
        f"sceneType = {scene.scene_type}",
    ]
    return "\n".join(lines) + "\n"


def _r(x: float) -> float:
    return round(float(x), 8) + 0.0  # + 0.0 turns -0.0 into 0.0


def _box_json(box) -> dict:
    return {
        "center": [_r(v) for v in box.center],
        "extent": [_r(v) for v in box.extent],
        "rotation": [[_r(v) for v in row] for row in box.rotation],
    }


def truth_dict(scene: SynthScene) -> dict:
    """Everything the native layout cannot carry, in the world frame, plus the camera walk and each object's
    vertex range (mesh vertex order is the same in every layout) for checks against the datasets' own loaders."""
    nyu = nyu40_ids()
    distances = scene.small_object_distances()
    objects = []
    for obj in scene.objects:
        entry = {
            "id": obj.object_id,
            "label": obj.label,
            "nyu40id": nyu[obj.label],
            "box": _box_json(obj.box),
            "vertex_range": [int(v) for v in scene.object_vertex_ranges[obj.object_id]],  # [start, stop) of its vertices
            "parts": [dict(name=name, **_box_json(part)) for name, part in zip(obj.part_names, obj.parts)],
            "room": obj.room,
            "small": obj.small,
            "structural": obj.structural,
            "support_id": obj.support_id,
            "support_relation": obj.support_relation,
            "under_id": obj.under_id,
        }
        if obj.small:
            entry["neighbour_distances"] = [{"id": k, "distance": _r(v)} for k, v in sorted(distances[obj.object_id].items())]
        objects.append(entry)
    rooms = []
    for room in scene.rooms:
        polys = getattr(room.polygon, "geoms", [room.polygon])
        rooms.append({"kind": room.kind, "polygons": [[[_r(x), _r(y)] for x, y in p.exterior.coords] for p in polys]})
    return {
        "scene_id": scene.scene_id,
        "seed": scene.seed,
        "scene_type": scene.scene_type,
        "frame": "world: metres, z up; boxes have rotation columns = box axes",
        "axisAlignment": [[_r(v) for v in row] for row in scene.axis_alignment],
        "intrinsics": {"matrix": [[_r(v) for v in row] for row in scene.intrinsics], "width": scene.width, "height": scene.height},
        "fps": scene.fps,
        "num_frames": int(len(scene.poses)),
        # Camera-to-world of every frame (world frame, OpenCV axes), every digit: what each layout's poses must give back.
        "poses": [[[float(v) + 0.0 for v in row] for row in pose] for pose in scene.poses],
        "objects": objects,
        "rooms": rooms,
        # Each room of the floor plan (a two-room scene has two), beyond the scene/main polygons above.
        "room_plans": [
            {"name": name, "kind": kind, "polygon": [[_r(x), _r(y)] for x, y in poly.exterior.coords]}
            for name, (kind, poly) in sorted(scene.room_plans.items())
        ],
    }


class _FilesAsBytes(Sequence):
    """Lazily read back written frame files, so ``write_sens`` never needs every frame in memory at once."""

    def __init__(self, paths: list[Path], decode_depth: bool):
        self.paths, self.decode_depth = paths, decode_depth

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i):
        if self.decode_depth:
            return cv2.imread(str(self.paths[i]), cv2.IMREAD_UNCHANGED)
        return self.paths[i].read_bytes()


def write_scannet(scene: SynthScene, out_dir, sens: bool = False, progress=None) -> Path:
    """Write one scan under ``out_dir/<scene_id>/`` (and the label map at ``out_dir``); returns the scan folder."""
    root = Path(out_dir)
    folder = root / scene.scene_id
    for sub in ("color", "depth", "pose", "intrinsic"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    write_label_map(root / LABEL_MAP_NAME)
    sid = scene.scene_id
    unalign = scene.unalignment
    mesh = scene.mesh
    write_ply(folder / f"{sid}_vh_clean_2.ply", _transform(unalign, mesh.vertices), mesh.triangles, mesh.colors)
    (folder / f"{sid}_vh_clean_2.0.010000.segs.json").write_text(_segs_json(scene))
    (folder / f"{sid}.aggregation.json").write_text(_aggregation_json(scene))
    (folder / f"{sid}.txt").write_text(_info_txt(scene))
    K4 = _intrinsic4(scene.intrinsics)
    (folder / "intrinsic" / "intrinsic_color.txt").write_text(_matrix_text(K4))
    (folder / "intrinsic" / "intrinsic_depth.txt").write_text(_matrix_text(K4))
    (folder / "intrinsic" / "extrinsic_color.txt").write_text(_matrix_text(np.eye(4)))
    (folder / "intrinsic" / "extrinsic_depth.txt").write_text(_matrix_text(np.eye(4)))
    renderer = FrameRenderer(scene)
    stored_poses = scene.stored_poses()
    n = len(scene.poses)
    for i in range(n):
        frame = renderer.render(i)
        (folder / "color" / f"{i}.jpg").write_bytes(frame.color_jpeg())
        (folder / "depth" / f"{i}.png").write_bytes(frame.depth_png())
        (folder / "pose" / f"{i}.txt").write_text(_pose_text(stored_poses[i]))
        if progress is not None:
            progress(i + 1, n)
    if sens:
        from pipeline.formats.sens import write_sens

        write_sens(
            folder / f"{sid}.sens",
            colors_jpeg=_FilesAsBytes([folder / "color" / f"{i}.jpg" for i in range(n)], decode_depth=False),
            depths_mm=_FilesAsBytes([folder / "depth" / f"{i}.png" for i in range(n)], decode_depth=True),
            poses=[p for p in stored_poses],
            intrinsic_color=K4,
            intrinsic_depth=K4,
            color_size=(scene.width, scene.height),
            depth_size=(scene.width, scene.height),
            timestamps_us=[int(round(i * 1e6 / scene.fps)) for i in range(n)],
        )
    (folder / f"{sid}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
