"""MultiScan scan folder -> ``ParsedScan``, and the annotation-only box reader.

A MultiScan scan folder ``<scan>/`` (``scene_<5 digits>_<2 digits>``) holds:

* ``<scan>.annotations.json``: objects labelled ``"<name>.<index>"`` with an
  ``obb`` (``centroid``, ``axesLengths``, ``normalizedAxes`` one box axis per
  *row* - the file's ``min``/``max`` are exactly the bounds of the corners in
  that reading - plus ``front``/``up`` vectors, each along one of the rows). Two schemas
  exist: the older one (the documentation's ``scene_00000_00`` example) has no
  ids, objects are numbered 1, 2, ... in file order and faces are assigned by
  ``<scan>.semseg.json`` ``triIndices`` keyed by ``"<name>.<index>[:<part>]"``;
  the newer one has ``objectId``/``partIds`` and the mesh ``<scan>.ply``
  carries per-face ``objectId``/``partId`` (0 = not annotated).
* ``<scan>.ply``: the annotated mesh, z up, floor near the xy plane.
* ``<scan>.mp4`` + ``<scan>.jsonl``: the colour stream (60 fps) and one JSON
  line per video frame with ``timestamp`` (ns), column-major 3x3
  ``intrinsics`` and column-major 4x4 ``transform`` (camera-to-world in ARKit
  axes: camera x right, y up, z backward; world y up). Poses become OpenCV by
  ``T @ diag(1, -1, -1, 1)``, then move into the mesh frame with the inverse
  of ``<scan>.align.json`` ``coordinate_transform`` (column-major; its third
  column sends mesh z to ARKit y, so it maps the mesh frame to ARKit world).
  Without ``align.json`` the ARKit world is only turned y-up -> z-up.
* ``<scan>.json``: recording metadata (the colour stream's ``frequency``).

Raw labels drop the instance suffix and use spaces (``wall_cabinet.1`` ->
``wall cabinet``) and then go through the scans root's label map when there
is one. Boxes come from each object's mesh faces (gravity-aligned OBB, SPEC
§1); the annotated box is used only for objects without faces and by
``read_multiscan_annotations`` (PinpointQA's box-only use).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.ply import PlyFormatError, read_ply
from pipeline.frames.budgets import output_size, scale_intrinsics
from pipeline.scene.readers.assembly import assembled_scan, posed_frames
from pipeline.scene.readers.box_record import parse_row_axes_box
from pipeline.scene.readers.label_lookup import labelled_object, optional_label_map
from pipeline.scene.readers.rscan import members_by_owner, read_json, sky_up_rotation
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan

DATASET = "multiscan"
MULTISCAN_FPS = 60.0
ARKIT_TO_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
# ARKit world (y up) -> z up, used only when a scan has no align.json.
ARKIT_Y_UP_TO_Z_UP = np.array([[1.0, 0, 0, 0], [0, 0, -1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])


@dataclass
class MultiScanObject:
    object_id: int
    name: str  # "<label>.<index>" as annotated
    label: str  # raw label: instance suffix dropped, underscores as spaces
    box: OrientedBox | None
    front: np.ndarray | None = None
    up: np.ndarray | None = None


def is_multiscan_scan(folder) -> bool:
    return (folder / f"{folder.name}.annotations.json").exists()


def raw_label(name: str) -> str:
    """``wall_cabinet.1`` -> ``wall cabinet``; a name without an index (``remove``) stays."""
    base, dot, index = name.rpartition(".")
    stem = base if dot and index.isdigit() else name
    return stem.replace("_", " ").strip()


def _vector(value, n: int, key: str, file: str, where: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ScanError(key, file, f"{where} is not numeric") from None
    if arr.size != n or not np.all(np.isfinite(arr)):
        raise ScanError(key, file, f"{where} needs {n} finite numbers")
    return arr


def _object(entry, position: int, key: str, file: str) -> MultiScanObject:
    if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
        raise ScanError(key, file, f"objects[{position}] lacks a string label")
    name = entry["label"]
    if "objectId" in entry:
        try:
            object_id = int(entry["objectId"])
        except (TypeError, ValueError):
            raise ScanError(key, file, f"objects[{position}] ({name}) has a non-integer objectId") from None
    else:
        object_id = position + 1
    obb = entry.get("obb")
    box = front = up = None
    if obb is not None:
        where = f"objects[{position}] ({name}) obb"
        box = parse_row_axes_box(obb, key=key, file=file, where=where)
        front = _vector(obb["front"], 3, key, file, f"{where}.front") if "front" in obb else None
        up = _vector(obb["up"], 3, key, file, f"{where}.up") if "up" in obb else None
    return MultiScanObject(object_id, name, raw_label(name), box, front, up)


def parse_annotations(data, key: str, file: str) -> list[MultiScanObject]:
    objects = data.get("objects") if isinstance(data, dict) else None
    if not isinstance(objects, list):
        raise ScanError(key, file, "no objects list")
    out = [_object(entry, n, key, file) for n, entry in enumerate(objects)]
    ids = [o.object_id for o in out]
    if len(set(ids)) != len(ids):
        raise ScanError(key, file, "objectIds repeat")
    if any(i <= 0 for i in ids):
        raise ScanError(key, file, "objectId 0 or below (0 marks unannotated faces)")
    return out


def read_multiscan_annotations(path) -> list[MultiScanObject]:
    """Objects and boxes of one ``<scan>.annotations.json`` (either schema), in the file's world frame."""
    path = Path(path)
    scan_id = path.name.removesuffix(".annotations.json")
    key = f"{DATASET}/{scan_id}"
    data = read_json(path, key)
    return parse_annotations(data, key, path.name)


def _face_owner(folder: Path, ply, objects: list[MultiScanObject], key: str) -> tuple[np.ndarray, Path | None]:
    """Per-face object id (0 = none): the mesh's ``objectId``, else the old ``semseg.json`` triIndices."""
    n_faces = len(ply.triangles)
    if "objectId" in ply.face_properties:
        try:
            return np.asarray(ply.face_properties["objectId"]).astype(np.int64, casting="safe"), None
        except TypeError:
            raise ScanError(key, f"{folder.name}.ply", "face objectId is not an integer property") from None
    semseg = folder / f"{folder.name}.semseg.json"
    if not semseg.exists():
        raise ScanError(key, f"{folder.name}.ply", "faces lack objectId and there is no .semseg.json")
    data = read_json(semseg, key)
    tri = data.get("triIndices") if isinstance(data, dict) else None
    if not isinstance(tri, dict):
        raise ScanError(key, semseg.name, "no triIndices object")
    id_of = {o.name: o.object_id for o in objects}
    owner = np.zeros(n_faces, dtype=np.int64)
    for label in sorted(tri):
        object_id = id_of.get(label.split(":", 1)[0])
        if object_id is None:
            raise ScanError(key, semseg.name, f"triIndices label {label!r} names no annotated object")
        try:
            faces = np.asarray(tri[label], dtype=np.int64)
        except (TypeError, ValueError):
            raise ScanError(key, semseg.name, f"triIndices[{label!r}] is not a list of integers") from None
        if faces.size and (faces.min() < 0 or faces.max() >= n_faces):
            raise ScanError(key, semseg.name, f"triIndices[{label!r}] names faces beyond the mesh's {n_faces}")
        owner[faces] = object_id
    return owner, semseg


def _column_major(values, shape: tuple[int, int], key: str, file: str, where: str) -> np.ndarray:
    arr = _vector(values, shape[0] * shape[1], key, file, where)
    return arr.reshape(shape[1], shape[0]).T


def read_alignment(folder: Path, key: str) -> tuple[np.ndarray, Path | None, list[str]]:
    """ARKit world -> mesh frame."""
    path = folder / f"{folder.name}.align.json"
    if not path.exists():
        note = f"no {path.name}: camera poses only turned from ARKit y-up to z-up"
        return ARKIT_Y_UP_TO_Z_UP.copy(), None, [note]
    data = read_json(path, key)
    if not isinstance(data, dict) or "coordinate_transform" not in data:
        raise ScanError(key, path.name, "lacks coordinate_transform")
    mesh_to_arkit = _column_major(data["coordinate_transform"], (4, 4), key, path.name, "coordinate_transform")
    return np.linalg.inv(mesh_to_arkit), path, []


def stream_rate(folder: Path, key: str) -> tuple[float, Path | None]:
    """The colour stream's frequency from ``<scan>.json``, else MultiScan's 60 fps."""
    path = folder / f"{folder.name}.json"
    if not path.exists():
        return MULTISCAN_FPS, None
    data = read_json(path, key)
    streams = data.get("streams") if isinstance(data, dict) else None
    for stream in streams if isinstance(streams, list) else []:
        if isinstance(stream, dict) and stream.get("type") == "color_camera" and "frequency" in stream:
            try:
                fps = float(stream["frequency"])
            except (TypeError, ValueError):
                fps = float("nan")
            if not np.isfinite(fps) or fps <= 0:
                problem = f"color_camera frequency must be a positive number, got {stream['frequency']!r}"
                raise ScanError(key, path.name, problem)
            return fps, path
    return MULTISCAN_FPS, path


def read_camera_stream(path: Path, key: str) -> list[tuple[float | None, np.ndarray, np.ndarray]]:
    """(timestamp ns or None, 3x3 intrinsics, 4x4 ARKit camera-to-world) per line of ``<scan>.jsonl``."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable ({type(exc).__name__})") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise ScanError(key, path.name, f"line {number} is not JSON") from None
        if not isinstance(entry, dict):
            raise ScanError(key, path.name, f"line {number} is not a JSON object")
        for field in ("intrinsics", "transform"):
            if field not in entry:
                raise ScanError(key, path.name, f"line {number} lacks {field}")
        k = _column_major(entry["intrinsics"], (3, 3), key, path.name, f"line {number} intrinsics")
        try:
            t = np.asarray(entry["transform"], dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ScanError(key, path.name, f"line {number} transform is not numeric") from None
        if t.size != 16:
            raise ScanError(key, path.name, f"line {number} transform needs 16 numbers, has {t.size}")
        ts = entry.get("timestamp")
        if ts is not None and not isinstance(ts, (int, float)):
            raise ScanError(key, path.name, f"line {number} timestamp is not a number")
        out.append((None if ts is None else float(ts), k, t.reshape(4, 4).T))
    return out


def _frames(folder: Path, config: Config, key: str, warnings: list[str]):
    from pipeline.frames.video import VideoFrameSource, resized

    jsonl, video = folder / f"{folder.name}.jsonl", folder / f"{folder.name}.mp4"
    if not jsonl.exists():
        return None
    if not video.exists():
        raise ScanError(key, video.name, f"missing colour stream for {jsonl.name}")
    fps, meta_path = stream_rate(folder, key)
    to_world, align_path, notes = read_alignment(folder, key)
    warnings += notes
    stream = read_camera_stream(jsonl, key)
    try:
        source = VideoFrameSource(video)
    except OSError:
        raise ScanError(key, video.name, "video does not open") from None
    src_size = (source.width, source.height)
    if source.frame_count and source.frame_count < len(stream):
        warnings.append(f"{video.name} has {source.frame_count} frames for {len(stream)} camera lines")
    out_size = output_size(src_size[0], src_size[1], config.frames)
    t0 = next((ts for ts, _, _ in stream if ts is not None), None)
    frames = []
    for index, (ts, k, transform) in enumerate(stream):
        seconds = (ts - t0) / 1e9 if ts is not None and t0 is not None else index / fps
        pose = to_world @ transform @ ARKIT_TO_OPENCV if np.all(np.isfinite(transform)) else transform
        k_out = scale_intrinsics(k, src_size, out_size)
        frames.append(Frame(index, float(seconds), pose, k_out, out_size[0], out_size[1], video.name, index))

    def load_image(frame_index: int) -> np.ndarray:
        try:
            return resized(source.read(int(frame_index)), out_size)
        except IndexError as exc:
            raise ScanError(key, video.name, str(exc).rsplit(": ", 1)[-1]) from None

    files = [p for p in (jsonl, video, meta_path, align_path) if p is not None]
    return frames, load_image, fps, files


def read_multiscan(folder: Path, config: Config, *, source_uri: str | None = None) -> tuple[ParsedScan, list[Path]]:
    """Parse a local MultiScan scan folder; also returns the input files read (for the checksum)."""
    folder = Path(folder)
    scene_id = folder.name
    key = f"{DATASET}/{scene_id}"
    warnings: list[str] = []
    label_map, label_map_path = optional_label_map(folder, config, key, warnings)
    files = [label_map_path] if label_map_path else []
    ann_path = folder / f"{scene_id}.annotations.json"
    annotated = parse_annotations(read_json(ann_path, key), key, ann_path.name)
    files.append(ann_path)
    mesh, members = None, {}
    mesh_path = folder / f"{scene_id}.ply"
    if mesh_path.exists():
        try:
            ply = read_ply(mesh_path)
        except PlyFormatError as exc:
            raise ScanError(key, mesh_path.name, str(exc)) from None
        files.append(mesh_path)
        face_owner, semseg = _face_owner(folder, ply, annotated, key)
        if semseg is not None:
            files.append(semseg)
        stray = sorted(set(np.unique(face_owner).tolist()) - {o.object_id for o in annotated} - {0})
        if stray:
            warnings.append(f"{mesh_path.name}: face objectIds {stray[:5]} are not annotated; left unlabelled")
            face_owner = np.where(np.isin(face_owner, stray), 0, face_owner)
        face_members = members_by_owner(face_owner)
        members = {oid: np.unique(ply.triangles[faces]).astype(np.int64) for oid, faces in face_members.items()}
        owner_ids = np.where(face_owner > 0, face_owner, -1).astype(np.int32)
        mesh = Mesh(ply.vertices, ply.triangles, ply.colors, owner_ids)
    else:
        warnings.append(f"no {mesh_path.name}: objects keep their annotated boxes, visibility cannot be computed")
    objects = []
    for obj in sorted(annotated, key=lambda o: o.object_id):
        idx = members.get(obj.object_id)
        objects.append(labelled_object(obj.object_id, obj.label, idx, None if idx is not None else obj.box, label_map))
    found = _frames(folder, config, key, warnings)
    frames, load_image, fps = posed_frames(found, warnings, files, "no .jsonl + .mp4")
    parsed = assembled_scan(
        DATASET, scene_id, source_uri or str(folder), mesh=mesh, objects=objects, frames=frames, source_fps=fps,
        load_image=load_image, warnings=warnings, seed=config.seed,
        image_rotation=sky_up_rotation([f.pose for f in frames]) if frames else 0,
    )
    return parsed, files
