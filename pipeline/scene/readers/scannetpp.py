"""ScanNet++ scene folder -> ``ParsedScan``.

A ScanNet++ scene (``data/<scene_id>/``) holds the laser-scan mesh already in a
z-up metric frame (``scans/mesh_aligned_0.05.ply``), an over-segmentation of
its vertices (``scans/segments.json``: ``segIndices``) and the instance
annotation (``scans/segments_anno.json``: ``segGroups`` with ``id``/``objectId``,
``label``, ``segments`` and an ``obb`` whose ``normalizedAxes`` hold one box
axis per row). The iPhone stream is a 60 fps video (``iphone/rgb.mkv``, or an
``rgb.mp4`` re-encode) with one ``frame_%06d`` entry per video frame in
``iphone/pose_intrinsic_imu.json`` (``aligned_pose``: camera-to-world in the
mesh frame; ``intrinsic``: 3x3 for the video's resolution).

Facts this reader relies on (ScanNet++ toolkit ``iphone/arkit_pcl.py``): the
toolkit back-projects pixels with ``K^-1 [u, v, 1] * depth`` and multiplies by
``aligned_pose`` directly, so ``aligned_pose`` is already in OpenCV camera axes
(x right, y down, z forward) and needs no ARKit/OpenGL flip.

Labels are free text; with a ScanNet label map at hand they get ScanNet's
categories (``pipeline.scene.readers.label_lookup``), else the raw label. Objects
keep their vertices and no box, so ``scene_tables`` computes the same
gravity-aligned box for them as for ScanNet (ReVSI B.3 prefers it to the
dataset's free OBBs, which tilt on noisy masks); the annotated ``obb`` is
parsed, checked and kept on the object as ``annotated_box``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.ply import PlyFormatError, read_ply
from pipeline.frames.budgets import output_size, scale_intrinsics
from pipeline.scene.readers.assembly import assembled_scan
from pipeline.scene.readers.box_record import parse_row_axes_box
from pipeline.scene.readers.label_lookup import apply_label_map, optional_label_map
from pipeline.scene.readers.scannet import group_vertices, triangle_owner
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan, SceneObject, dropped_pose_warnings
from pipeline.frames.video import VideoFrameSource, resized

DATASET = "scannetpp"
MESH_PATH = "scans/mesh_aligned_0.05.ply"
SEGMENTS_PATH = "scans/segments.json"
ANNOTATION_PATH = "scans/segments_anno.json"
POSES_PATH = "iphone/pose_intrinsic_imu.json"
VIDEO_PATHS = ("iphone/rgb.mkv", "iphone/rgb.mp4")
IPHONE_FPS = 60.0
FRAME_KEY = re.compile(r"^frame_(\d+)$")


@dataclass
class ScanNetppObject(SceneObject):
    """A ScanNet++ object; ``annotated_box`` is the dataset's own ``obb`` (row axes converted to columns)."""

    annotated_box: OrientedBox | None = None


def is_scannetpp_scene(folder) -> bool:
    return (folder / MESH_PATH).exists()


def load_json(path: Path, key: str, name: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ScanError(key, name, "file missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScanError(key, name, f"unreadable JSON ({type(exc).__name__}: {exc})".splitlines()[0]) from None


def numbers(value, shape: tuple[int, ...], key: str, name: str, field: str) -> np.ndarray:
    """A finite float array of exactly ``shape`` or a ScanError naming the field."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ScanError(key, name, f"{field} is not numeric") from None
    if arr.size != int(np.prod(shape)):
        raise ScanError(key, name, f"{field} has {arr.size} values, expected {int(np.prod(shape))}")
    arr = arr.reshape(shape)
    if not np.all(np.isfinite(arr)):
        raise ScanError(key, name, f"{field} has NaN or inf")
    return arr


def _annotated_box(group: dict, position: int, key: str, name: str) -> OrientedBox | None:
    obb = group.get("obb")
    if obb is None:
        return None
    return parse_row_axes_box(obb, key=key, file=name, where=f"segGroups[{position}].obb")


def read_seg_groups(path: Path, key: str) -> list[dict]:
    anno = load_json(path, key, ANNOTATION_PATH)
    groups = anno.get("segGroups") if isinstance(anno, dict) else None
    if not isinstance(groups, list):
        raise ScanError(key, ANNOTATION_PATH, "no segGroups list")
    for n, group in enumerate(groups):
        if not isinstance(group, dict):
            raise ScanError(key, ANNOTATION_PATH, f"segGroups[{n}] is not an object")
        for field in ("label", "segments"):
            if field not in group:
                raise ScanError(key, ANNOTATION_PATH, f"segGroups[{n}] lacks {field}")
        if not isinstance(group["segments"], list):
            raise ScanError(key, ANNOTATION_PATH, f"segGroups[{n}].segments is not a list")
    return groups


def object_ids(groups: list[dict], key: str) -> tuple[list[int], list[str]]:
    """``objectId`` (else ``id``) per group; renumbered by position when ids repeat."""
    try:
        ids = [int(g.get("objectId", g.get("id", n))) for n, g in enumerate(groups)]
    except (TypeError, ValueError):
        raise ScanError(key, ANNOTATION_PATH, "a segGroup has a non-integer objectId") from None
    if len(set(ids)) == len(ids):
        return ids, []
    return list(range(len(groups))), [f"{ANNOTATION_PATH}: duplicate objectIds; objects numbered by segGroup position"]


def read_objects(folder: Path, key: str, vertex_count: int) -> tuple[list[ScanNetppObject], np.ndarray, list[str]]:
    """Objects with their vertices, the per-vertex owner id (-1 = none) and warnings."""
    segs = load_json(folder / SEGMENTS_PATH, key, SEGMENTS_PATH)
    try:
        seg_indices = np.asarray(segs["segIndices"], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        raise ScanError(key, SEGMENTS_PATH, "no integer segIndices list") from None
    if seg_indices.shape != (vertex_count,):
        raise ScanError(key, SEGMENTS_PATH, f"{seg_indices.size} segIndices for {vertex_count} mesh vertices")
    groups = read_seg_groups(folder / ANNOTATION_PATH, key)
    boxes = [_annotated_box(g, n, key, ANNOTATION_PATH) for n, g in enumerate(groups)]
    members, vertex_group, overlap = group_vertices(seg_indices, groups, key, ANNOTATION_PATH)
    ids, warnings = object_ids(groups, key)
    if overlap:
        warnings.append(f"{overlap} vertices belong to more than one segGroup; the later group keeps them")
    objects = [
        ScanNetppObject(
            object_id=oid,
            raw_label=str(g["label"]),
            vertex_indices=idx.astype(np.int64),
            category=str(g["label"]),
            annotated_box=box,
        )
        for oid, g, idx, box in zip(ids, groups, members, boxes)
    ]
    objects.sort(key=lambda o: o.object_id)
    owner = np.asarray(ids + [-1], dtype=np.int64)[vertex_group]
    return objects, owner, warnings


def _frame_number(name: str, key: str) -> int:
    match = FRAME_KEY.match(name)
    if not match:
        raise ScanError(key, POSES_PATH, f"entry {name!r} is not named frame_<number>")
    return int(match.group(1))


def read_iphone_frames(
    folder: Path, key: str, frames_config
) -> tuple[list[Frame], VideoFrameSource | None, float, list[Path], list[str]]:
    """Frames of the iPhone stream; missing video or pose file means a scan without frames."""
    poses_path = folder / POSES_PATH
    video = next((folder / p for p in VIDEO_PATHS if (folder / p).exists()), None)
    missing = ([] if video else [" or ".join(VIDEO_PATHS)]) + ([] if poses_path.exists() else [POSES_PATH])
    if missing:
        warning = f"no iPhone frames ({', '.join(missing)} missing): frame-dependent steps skip this scan"
        return [], None, 0.0, [], [warning]
    entries = load_json(poses_path, key, POSES_PATH)
    if not isinstance(entries, dict) or not entries:
        raise ScanError(key, POSES_PATH, "not an object of frame_<number> entries")
    try:
        source = VideoFrameSource(video)
    except OSError:
        raise ScanError(key, str(video.relative_to(folder)), "video cannot be opened") from None
    fps = source.fps if np.isfinite(source.fps) and source.fps > 0 else IPHONE_FPS
    src_size = (source.width, source.height)
    out_size = output_size(src_size[0], src_size[1], frames_config)
    frames, video_file = [], video.relative_to(folder).as_posix()
    for name in sorted(entries, key=lambda n: _frame_number(n, key)):
        number = _frame_number(name, key)
        entry = entries[name]
        if not isinstance(entry, dict):
            raise ScanError(key, POSES_PATH, f"{name} is not an object")
        for field in ("aligned_pose", "intrinsic"):
            if field not in entry:
                raise ScanError(key, POSES_PATH, f"{name} lacks {field}")
        try:
            pose = np.asarray(entry["aligned_pose"], dtype=float)
        except (TypeError, ValueError):
            raise ScanError(key, POSES_PATH, f"{name}.aligned_pose is not numeric") from None
        if pose.size != 16:
            raise ScanError(key, POSES_PATH, f"{name}.aligned_pose has {pose.size} values, expected 16")
        pose = pose.reshape(4, 4)
        k = numbers(entry["intrinsic"], (3, 3), key, POSES_PATH, f"{name}.intrinsic")
        k_out = scale_intrinsics(k, src_size, out_size)
        frames.append(Frame(number, number / fps, pose, k_out, out_size[0], out_size[1], video_file, number))
    warnings = dropped_pose_warnings(frames)
    if frames and frames[-1].frame_index >= len(source) > 0:
        warnings.append(f"{POSES_PATH} names frames up to {frames[-1].frame_index}, the video has {len(source)}")
    return frames, source, fps, [poses_path, video], warnings


def read_scannetpp(folder: Path, config: Config, *, source_uri: str | None = None) -> tuple[ParsedScan, list[Path]]:
    """Parse a local ScanNet++ scene folder; also returns the input files read (for the checksum)."""
    folder = Path(folder)
    scene_id = folder.name
    key = f"{DATASET}/{scene_id}"
    if not folder.is_dir():
        raise ScanError(key, str(folder), "scene folder not found")
    for needed in (SEGMENTS_PATH, ANNOTATION_PATH):
        if not (folder / needed).exists():
            raise ScanError(key, needed, "file missing")
    try:
        ply = read_ply(folder / MESH_PATH)
    except (PlyFormatError, OSError) as exc:
        raise ScanError(key, MESH_PATH, str(exc)) from None
    objects, vertex_owner, warnings = read_objects(folder, key, len(ply.vertices))
    label_map, label_map_path = optional_label_map(folder, config, key, warnings)
    apply_label_map(objects, label_map)
    mesh = Mesh(
        vertices=ply.vertices,
        triangles=ply.triangles,
        colors=ply.colors,
        triangle_object_ids=triangle_owner(ply.triangles, vertex_owner),
    )
    frames, source, fps, frame_files, frame_warnings = read_iphone_frames(folder, key, config.frames)
    warnings += frame_warnings
    load_image = None
    if source is not None:
        out_size = (frames[0].width, frames[0].height) if frames else (source.width, source.height)

        def load_image(frame_index: int) -> np.ndarray:
            try:
                image = source.read(int(frame_index))
            except IndexError as exc:
                raise ScanError(key, str(Path(source.path).relative_to(folder)), str(exc).split(": ", 1)[-1]) from None
            return resized(image, out_size)

    parsed = assembled_scan(
        DATASET, scene_id, source_uri or str(folder), mesh=mesh, objects=objects, frames=frames, source_fps=fps,
        load_image=load_image, warnings=warnings, seed=config.seed,
    )
    files = [folder / MESH_PATH, folder / SEGMENTS_PATH, folder / ANNOTATION_PATH, *frame_files]
    files += [label_map_path] if label_map_path else []
    return parsed, files
