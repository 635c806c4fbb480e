"""Write a synthetic scene in MultiScan's layout, with MultiScan's conventions.

* ``<scan>.ply``: the mesh in the z-up frame with per-face ``objectId``
  (object ``k`` stored as ``k + 1``: MultiScan ids start at 1, 0 marks
  unannotated faces) and ``partId`` (1, 2, ... per object, one per part).
* ``<scan>.annotations.json`` (the newer schema): ``objectId``, ``label``
  ``"<name_with_underscores>.<index>"``, ``partIds`` and the exact box as
  ``obb`` with *row* ``normalizedAxes``, ``min``/``max`` and ``up``/``front``.
* ``<scan>.align.json``: a seeded ``coordinate_transform`` (column-major, a quarter turn and shift,
  mesh frame -> ARKit world, y up) so that the camera stream is not already
  in the mesh frame.
* ``<scan>.mp4`` at 60 fps with ``<scan>.jsonl``: one line per video frame,
  column-major ``intrinsics`` and ``transform`` (camera-to-world in ARKit
  axes, i.e. ``align @ pose @ diag(1, -1, -1, 1)``) and nanosecond timestamps.
  The synthetic walk is 10 fps, so each rendered frame is held for 6 video
  frames (same image, same pose): video frame ``6 i`` is synthetic frame
  ``i`` at exactly ``i / 10`` s, and resampling the 60 fps stream to 10 fps by
  timestamp keeps exactly frames ``0, 6, 12, ...`` - the synthetic frames.
* ``<scan>.json``: recording metadata (colour stream frequency 60).

Scan ids are ``scene_9NNNN_MM`` for ``synthNNNN_MM``, above MultiScan's real
range. ``<scan>.scan2qa_truth.json`` carries the exact truth.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from pipeline.formats.ply import write_ply
from pipeline.geometry.obb import normalized_axes_of
from pipeline.seeding import rng as seeded_rng
from pipeline.synth.label_map import write_label_map
from pipeline.synth.lossless import quarter_turn
from pipeline.synth.render import held_frames, write_held_video
from pipeline.synth.scannet_writer import LABEL_MAP_NAME, TRUTH_SUFFIX, truth_dict
from pipeline.synth.scene import SynthScene

VIDEO_FPS = 60
ARKIT_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
Z_UP_TO_ARKIT_Y_UP = np.array([[1.0, 0, 0, 0], [0, 0, 1.0, 0], [0, -1.0, 0, 0], [0, 0, 0, 1.0]])
START_NS = 280_000_000_000_000  # device uptime at the first frame, as ARKit timestamps are


def multiscan_scan_id(scene: SynthScene) -> str:
    match = re.fullmatch(r"synth(\d{4})_(\d{2})", scene.scene_id)
    if not match:
        raise ValueError(f"not a synthetic scene id: {scene.scene_id!r}")
    return f"scene_9{match.group(1)}_{match.group(2)}"


def mesh_to_arkit(scene: SynthScene) -> np.ndarray:
    """Seeded quarter turn and shift (exact both ways, ``pipeline.synth.lossless``), then z-up -> ARKit's y-up world."""
    gen = seeded_rng(scene.seed, "synth", scene.scene_id, "multiscan-align")
    return Z_UP_TO_ARKIT_Y_UP @ quarter_turn(gen, 3.0, (-1.5, -1.0))


def _column_major(m: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(m, dtype=float).T.reshape(-1)]


def _part_ids(scene: SynthScene, face_object: np.ndarray) -> np.ndarray:
    """1, 2, ... per object, one per part (a part is one segment of the generator)."""
    face_segment = scene.segments[scene.mesh.triangles[:, 0]]
    pairs = np.stack([face_object, face_segment], axis=1)
    _, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = pairs[first]
    rank = np.zeros(len(uniq), dtype=np.int64)
    for oid in np.unique(uniq[:, 0]):
        rows = np.flatnonzero(uniq[:, 0] == oid)
        rank[rows[np.argsort(uniq[rows, 1])]] = np.arange(1, len(rows) + 1)
    return np.where(face_object > 0, rank[inverse], 0).astype(np.int32)


def _obb(box) -> dict:
    rows = normalized_axes_of(box).reshape(3, 3)
    vertical = box.vertical_axis
    up = rows[vertical] * np.sign(rows[vertical][2])
    front = rows[(vertical + 1) % 3]
    corners = box.corners()
    return {
        "centroid": [float(v) for v in box.center],
        "axesLengths": [float(v) for v in box.extent],
        "normalizedAxes": [float(v) for v in rows.reshape(-1)],
        "min": [float(v) for v in corners.min(axis=0)],
        "max": [float(v) for v in corners.max(axis=0)],
        "front": [float(v) for v in front],
        "up": [float(v) for v in up],
    }


def _annotations(scene: SynthScene, scan_id: str, part_ids: np.ndarray, face_object: np.ndarray) -> dict:
    counts: dict[str, int] = {}
    objects = []
    for obj in scene.objects:
        name = obj.label.replace(" ", "_")
        counts[name] = counts.get(name, 0) + 1
        parts = sorted({int(p) for p in np.unique(part_ids[face_object == obj.object_id + 1])})
        objects.append(
            {
                "objectId": obj.object_id + 1,
                "label": f"{name}.{counts[name]}",
                "mobilityType": "fixed",
                "partIds": parts,
                "obb": _obb(obj.box.to_oriented()),
            }
        )
    return {"version": "multiscan@0.0.1", "scanId": scan_id, "objects": objects}


def _metadata(scene: SynthScene, video_frames: int) -> dict:
    k = _column_major(scene.intrinsics)
    return {
        "streams": [
            {
                "id": "color_back_1",
                "type": "color_camera",
                "frequency": VIDEO_FPS,
                "number_of_frames": video_frames,
                "file_extension": "mp4",
                "encoding": "mp4v",
                "intrinsics": k,
                "resolution": [scene.height, scene.width],
                "extrinsics": None,
            },
            {
                "id": "camera_info_color_back_1",
                "type": "camera_info",
                "frequency": VIDEO_FPS,
                "number_of_frames": video_frames,
                "file_extension": "jsonl",
                "encoding": "jsonl",
            },
        ],
        "device": {"type": "scan2qa synthetic (ray cast)"},
        "scene": {"type": scene.scene_type, "description": scene.scene_id},
        "number_of_files": 4,
    }


def write_multiscan(scene: SynthScene, out_dir, scan_id: str | None = None, progress=None) -> Path:
    """Write one scan under ``out_dir/<scan_id>/`` (and the label map at ``out_dir``); returns the scan folder."""
    root = Path(out_dir)
    scan_id = scan_id or multiscan_scan_id(scene)
    folder = root / scan_id
    folder.mkdir(parents=True, exist_ok=True)
    write_label_map(root / LABEL_MAP_NAME)
    mesh = scene.mesh
    tri_ids = np.asarray(mesh.triangle_object_ids, dtype=np.int64)
    face_object = np.where(tri_ids >= 0, tri_ids + 1, 0).astype(np.int32)
    part_ids = _part_ids(scene, face_object)
    write_ply(
        folder / f"{scan_id}.ply",
        mesh.vertices,
        mesh.triangles,
        mesh.colors,
        face_properties={"objectId": face_object, "partId": part_ids},
        comment=None,
    )
    annotations = _annotations(scene, scan_id, part_ids, face_object)
    (folder / f"{scan_id}.annotations.json").write_text(json.dumps(annotations, indent=1) + "\n")
    align = mesh_to_arkit(scene)
    (folder / f"{scan_id}.align.json").write_text(
        json.dumps({"version": "multiscan@0.0.1", "coordinate_transform": _column_major(align)}, indent=1) + "\n"
    )
    hold = held_frames(scene.fps, VIDEO_FPS, "MultiScan camera")
    n = len(scene.poses)
    (folder / f"{scan_id}.json").write_text(json.dumps(_metadata(scene, n * hold), indent=2) + "\n")
    k = _column_major(scene.intrinsics)
    lines = []
    for j in range(n * hold):
        transform = align @ scene.poses[j // hold] @ ARKIT_TO_OPENCV
        stamp = START_NS + (j * 1_000_000_000) // VIDEO_FPS
        lines.append(json.dumps({"timestamp": stamp, "intrinsics": k, "transform": _column_major(transform)}))
    (folder / f"{scan_id}.jsonl").write_text("\n".join(lines) + "\n")
    write_held_video(scene, folder / f"{scan_id}.mp4", VIDEO_FPS, hold, progress)
    (folder / f"{scan_id}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
