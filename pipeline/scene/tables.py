"""``ParsedScan`` -> the per-scan ``scans``, ``objects``, ``rooms`` and ``frames`` tables.

This is where a parsed scan becomes data every later step shares: each
object's gravity-aligned box (or its annotated box), its label-map entry and
its structural / small-object flags; the room polygons; and every source frame
with whether it is in the all-frame sequence (valid pose, kept by resampling to
the configured rate by timestamp) and where its image is (``image_file``,
``image_member``), so later steps load images from this table
(``pipeline.scene.images``) instead of parsing the scan again.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import shapely

from pipeline.frames.budgets import capped_all_frame_indices
from pipeline import schemas
from pipeline.config import Config
from pipeline.datasets import all_frame_rate
from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.scene.parsed import Frame, OrientedBox, ParsedScan, SceneObject
from pipeline.vocab import is_small_object, is_structural


def resample_by_time(frames: list[Frame], fps: float) -> set[int]:
    """Source indices of the all-frame sequence, by the one resampling rule of ``pipeline.frames.budgets``."""
    return capped_by_time(frames, fps, None)[0]


def capped_by_time(frames: list[Frame], fps: float, max_frames: int | None) -> tuple[set[int], int]:
    """``resample_by_time`` within ``max_frames`` (``frames.max_all_frames``), and the stride that kept it there
    (1 when it fits: ``pipeline.frames.budgets.capped_all_frame_indices``)."""
    if not frames or fps <= 0:
        return set(), 1
    timestamps = np.array([f.timestamp for f in frames], dtype=np.float64)
    valid = np.array([f.valid for f in frames], dtype=bool)
    kept, stride = capped_all_frame_indices(timestamps, valid, fps, max_frames)
    return {frames[i].frame_index for i in kept}, stride


def capped_warning(full_count: int, fps: float, stride: int, kept: int, max_frames: int) -> str:
    """What a thinned all-frame sequence says in the scan's warnings (printed by the build, shown in the report)."""
    return (
        f"all-frame sequence capped: {full_count} frames at {fps:g} fps exceed frames.max_all_frames "
        f"{max_frames}: kept 1 frame in {stride} ({fps / stride:.4g} fps, {kept} frames); frames.max_all_frames: "
        f"null keeps every frame"
    )


def _object_box(obj: SceneObject, vertices: np.ndarray | None) -> tuple[OrientedBox | None, str]:
    if obj.box is not None:
        return obj.box, "annotation"
    if vertices is not None and obj.vertex_indices is not None and len(obj.vertex_indices):
        return gravity_aligned_obb(vertices[obj.vertex_indices]), "mesh"
    return None, ""


def object_rows(parsed: ParsedScan) -> tuple[list[dict], list[str]]:
    mesh = parsed.mesh
    vertices = mesh.vertices if mesh is not None else None
    triangle_counts: dict[int, int] = {}
    if mesh is not None and mesh.triangle_object_ids is not None and len(mesh.triangle_object_ids):
        owners, counts = np.unique(mesh.triangle_object_ids[mesh.triangle_object_ids >= 0], return_counts=True)
        triangle_counts = {int(o): int(c) for o, c in zip(owners, counts)}
    rows, skipped = [], []
    for obj in sorted(parsed.objects, key=lambda o: o.object_id):
        box, source = _object_box(obj, vertices)
        if box is None:
            skipped.append(obj)
            continue
        category = obj.category or obj.raw_label
        rows.append(
            {
                "key": parsed.key,
                "object_id": int(obj.object_id),
                "raw_label": obj.raw_label,
                "category": category,
                "nyu40_id": obj.nyu40_id,
                "scannet200_id": obj.scannet200_id,
                "label_mapped": obj.label_mapped,
                "center": [float(v) for v in box.center],
                "extent": [float(v) for v in box.extent],
                "rotation": [float(v) for v in np.asarray(box.rotation).reshape(9)],
                "vertical_axis": box.vertical_axis,
                "vertex_count": int(len(obj.vertex_indices)) if obj.vertex_indices is not None else 0,
                "triangle_count": triangle_counts.get(int(obj.object_id), 0),
                "structural": is_structural(obj.raw_label, category),
                "small_object": is_small_object(obj.raw_label),
                "box_source": source,
            }
        )
    warnings = []
    if skipped:
        names = ", ".join(f"{o.object_id} ({o.raw_label!r})" for o in skipped[:5])
        warnings.append(f"{len(skipped)} objects without vertices or box left out of the objects table: {names}")
    return rows, warnings


def room_rows(parsed: ParsedScan) -> list[dict]:
    return [
        {
            "key": parsed.key,
            "room_id": room_id,
            "kind": room.kind,
            "polygon_wkb": shapely.to_wkb(room.polygon),
            "area_m2": float(room.polygon.area),
            "source": room.source,
        }
        for room_id, room in enumerate(parsed.rooms)
    ]


def frame_rows(parsed: ParsedScan, in_all_frame: set[int]) -> list[dict]:
    rows = []
    for frame in sorted(parsed.frames, key=lambda f: f.frame_index):
        valid = frame.valid
        pose = np.asarray(frame.pose, dtype=float).reshape(16) if valid else np.full(16, np.nan)
        rows.append(
            {
                "key": parsed.key,
                "frame_index": int(frame.frame_index),
                "timestamp": float(frame.timestamp),
                "pose": [float(v) for v in pose],
                "intrinsics": [float(v) for v in np.asarray(frame.intrinsics, dtype=float).reshape(9)],
                "width": int(frame.width),
                "height": int(frame.height),
                "valid": valid,
                "in_all_frame": frame.frame_index in in_all_frame,
                "image_file": frame.image_file if parsed.load_image is not None else "",
                "image_member": int(frame.image_member),
            }
        )
    return rows


def scene_tables(parsed: ParsedScan, config: Config) -> dict[str, pl.DataFrame]:
    """The four per-scan tables, rows sorted by id, conforming to ``pipeline.schemas``."""
    fps = all_frame_rate(parsed.dataset, config.frames)
    in_all_frame, stride = capped_by_time(parsed.frames, fps, config.frames.max_all_frames)
    frame_warnings = []
    if stride > 1:
        full_count = len(resample_by_time(parsed.frames, fps))
        frame_warnings.append(capped_warning(full_count, fps, stride, len(in_all_frame), config.frames.max_all_frames))
    objects, object_warnings = object_rows(parsed)
    frames = frame_rows(parsed, in_all_frame)
    mesh = parsed.mesh
    first = parsed.frames[0] if parsed.frames else None
    scan = {
        "key": parsed.key,
        "dataset": parsed.dataset,
        "scene_id": parsed.scene_id,
        "source_uri": parsed.source_uri,
        "source_frame_count": len(parsed.frames),
        "frame_count": len(in_all_frame),
        "dropped_frames": sum(1 for f in parsed.frames if not f.valid),
        "fps": fps / stride,
        "source_fps": float(parsed.source_fps),
        "image_width": first.width if first else int(config.frames.width),
        "image_height": first.height if first else int(config.frames.height),
        "has_frames": parsed.has_frames,
        "has_mesh": mesh is not None,
        "vertex_count": int(len(mesh.vertices)) if mesh is not None else 0,
        "triangle_count": int(len(mesh.triangles)) if mesh is not None else 0,
        "scene_type": parsed.scene_type,
        "checksum": parsed.checksum,
        "warnings": list(parsed.warnings) + object_warnings + frame_warnings,
        "image_rotation": int(parsed.image_rotation),
    }
    return {
        "scans": schemas.from_rows("scans", [scan]),
        "objects": schemas.from_rows("objects", objects),
        "rooms": schemas.from_rows("rooms", room_rows(parsed)),
        "frames": schemas.from_rows("frames", frames),
    }
