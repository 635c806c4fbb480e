"""Write a synthetic scene in MultiScan's layout, with MultiScan's conventions.

* ``<scan>.ply``: the mesh in the z-up frame with the documented header
  (``double`` x y z nx ny nz, ``uchar`` rgba, faces ``list uchar int``, per-face
  ``ushort`` ``objectId`` and ``partId``): object ``k`` is stored as ``k + 1``
  (MultiScan ids start at 1, 0 marks unannotated faces) and ``partId`` is the
  scan-wide id (1, 2, ...) of the face's part, one per generator part. Vertex
  normals are the area-weighted face normals (``dataset/core.py``
  ``_construct_mesh`` reads ``nx``/``ny``/``nz``).
* ``<scan>.annotations.json`` (the newer schema): ``objects`` with
  ``objectId``, ``label`` ``"<name_with_underscores>.<index>"``,
  ``mobilityType``, ``partIds`` and the exact box as ``obb`` with *row*
  ``normalizedAxes``, ``min``/``max`` and ``up``/``front``; and ``parts``, where
  ``parts[partId - 1]`` is ``{partId, label}`` (``dataset/gen_articulated_dataset.py``
  indexes it so). A one-part object's part is labelled as the object; the parts
  of a composite one ``"<part>.<index>"`` (``leg.1``..``leg.4``).
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
* ``<scan>.json``: recording metadata in the scanner app's stream order
  (``reconstruction/scripts/bridge.py`` ``get_meta`` reads ``streams[0]`` as
  colour and ``streams[1]`` as depth: ``resolution`` ``[height, width]``,
  ``number_of_frames``, colour ``intrinsics``, top-level ``depth_unit``), then
  the confidence and camera-info streams.
* ``<scan>.depth.zlib`` / ``<scan>.confidence.zlib``: 256 x 192 depth
  (float16 metres) and confidence per video frame, ray cast with the colour
  camera scaled as ``bridge.py`` scales it (``pipeline.synth.depth_streams``).

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
from pipeline.synth.depth_streams import LIDAR_SIZE, DeflateStream, depth_camera, multiscan_depth, render_depth
from pipeline.synth.render import FrameRenderer, held_frames, write_held_video
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


def _part_ids(scene: SynthScene, face_object: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scan-wide part id per face (1, 2, ... by object, then part; 0 on unannotated faces) and each part's
    (object id as stored, first vertex): a part is one segment of the generator."""
    face_segment = scene.segments[scene.mesh.triangles[:, 0]]
    annotated = face_object > 0
    pairs = np.stack([face_object[annotated], face_segment[annotated]], axis=1).astype(np.int64)
    parts, inverse = np.unique(pairs, axis=0, return_inverse=True)  # sorted by object, then first vertex
    part_ids = np.zeros(len(face_object), dtype=np.uint16)
    part_ids[annotated] = inverse.reshape(-1) + 1
    return part_ids, parts


def _part_label(part_name: str, seen: dict[str, int]) -> str:
    stem = part_name.rstrip("0123456789").rstrip("_") or part_name
    seen[stem] = seen.get(stem, 0) + 1
    return f"{stem}.{seen[stem]}"


def vertex_normals(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Unit area-weighted vertex normals (+z for a vertex no face touches)."""
    corners = vertices[triangles]
    face = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals = np.zeros_like(vertices, dtype=np.float64)
    for c in range(3):
        np.add.at(normals, triangles[:, c], face)
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    return np.where(length > 0, normals / np.where(length > 0, length, 1.0), [0.0, 0.0, 1.0])


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


def _annotations(scene: SynthScene, scan_id: str, parts: np.ndarray) -> dict:
    counts: dict[str, int] = {}
    objects, part_entries = [], []
    for obj in scene.objects:
        name = obj.label.replace(" ", "_")
        counts[name] = counts.get(name, 0) + 1
        label = f"{name}.{counts[name]}"
        rows = np.flatnonzero(parts[:, 0] == obj.object_id + 1)
        start, stop = scene.object_vertex_ranges[obj.object_id]
        names = dict(zip(np.unique(scene.segments[start:stop]).tolist(), obj.part_names))  # segment = part's first vertex
        seen: dict[str, int] = {}
        for row in rows:
            part_name = names.get(int(parts[row, 1]), "part").replace(" ", "_")
            part_label = label if len(rows) == 1 else _part_label(part_name, seen)
            part_entries.append({"partId": int(row) + 1, "label": part_label})
        objects.append(
            {
                "objectId": obj.object_id + 1,
                "label": label,
                "mobilityType": "fixed",
                "partIds": [int(row) + 1 for row in rows],
                "obb": _obb(obj.box.to_oriented()),
            }
        )
    return {"version": "multiscan@0.0.1", "scanId": scan_id, "objects": objects, "parts": part_entries}


def _metadata(scene: SynthScene, video_frames: int) -> dict:
    k = _column_major(scene.intrinsics)
    common = {"frequency": VIDEO_FPS, "number_of_frames": video_frames}
    return {
        "streams": [
            {
                "id": "color_back_1",
                "type": "color_camera",
                **common,
                "file_extension": "mp4",
                "encoding": "mp4v",
                "intrinsics": k,
                "resolution": [scene.height, scene.width],
                "extrinsics": None,
            },
            {
                "id": "depth_back_1",
                "type": "lidar_sensor",
                **common,
                "file_extension": "depth.zlib",
                "encoding": "float16_zlib",
                "intrinsics": None,
                "resolution": [LIDAR_SIZE[1], LIDAR_SIZE[0]],
                "extrinsics": None,
            },
            {"id": "confidence_map", "type": "confidence_map", **common, "file_extension": "confidence.zlib", "encoding": "uint8_zlib"},
            {"id": "camera_info_color_back_1", "type": "camera_info", **common, "file_extension": "jsonl", "encoding": "jsonl"},
        ],
        "device": {"type": "scan2qa synthetic (ray cast)"},
        "scene": {"type": scene.scene_type, "description": scene.scene_id},
        "camera_orientation_euler_angles_format": "xyz",
        "camera_orientation_quaternion_format": "wxyz",
        "depth_unit": "m",
        "depth_confidence_avaliable": True,  # sic: the scanner app's key
        "depth_confidence_value_range": [0, 2],
        "number_of_files": 5,
    }


def write_depth_streams(scene: SynthScene, folder: Path, scan_id: str, renderer: FrameRenderer, hold: int) -> None:
    k_depth = depth_camera(scene.intrinsics, (scene.width, scene.height), LIDAR_SIZE)
    depth_file = DeflateStream(folder / f"{scan_id}.depth.zlib")
    confidence_file = DeflateStream(folder / f"{scan_id}.confidence.zlib")
    try:
        for pose in scene.poses:
            depth, confidence = multiscan_depth(render_depth(renderer.raycaster, k_depth, pose, LIDAR_SIZE))
            depth_file.write(depth, times=hold)
            confidence_file.write(confidence, times=hold)
    finally:
        depth_file.close()
        confidence_file.close()


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
    part_ids, parts = _part_ids(scene, face_object)
    write_ply(
        folder / f"{scan_id}.ply",
        mesh.vertices,
        mesh.triangles,
        mesh.colors,
        face_properties={"objectId": face_object.astype(np.uint16), "partId": part_ids},
        coordinate_type="double",
        normals=vertex_normals(mesh.vertices, mesh.triangles),
    )
    annotations = _annotations(scene, scan_id, parts)
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
    renderer = FrameRenderer(scene)
    write_held_video(scene, folder / f"{scan_id}.mp4", VIDEO_FPS, hold, progress, renderer=renderer)
    write_depth_streams(scene, folder, scan_id, renderer, hold)
    (folder / f"{scan_id}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
