"""Annotation-only inputs: regenerate questions from existing box annotations, without scans.

Two formats are read into the ``objects`` and ``rooms`` tables plus an
all-visible ``object_visibility`` for budget ``"all"`` (with no frames there is
nothing to render, so every annotated object counts as seen; ``rule`` is
``"override"`` because visibility is declared, not computed):

* ReVSI annotation JSON, one scene per file:
  ``{dataset, scene_id, objects: [{id, name, obb: {center, rotation, extent}}],
  scene_area_2d_polygon, scene_area_type}``; the web-demo files
  (``<scene>_boxes.json``) instead hold ``{"objects": {"<id>": {name, obb}},
  "qa_object_ids"}`` and name the scene only in the file name. ``rotation``
  has the box axes as columns (our convention); which column is vertical
  varies from box to box, so nothing here assumes it. Rotations are stored
  with three decimals, so each is snapped to the nearest orthonormal matrix.
  ``scene_area_2d_polygon`` (``[[x, y], ...]``) becomes the ``"scene"``
  polygon; when ``scene_area_type`` says the scene is a single room it is also
  the ``"main"`` polygon.
* VSI-Bench meta-info JSON, many scenes per file: per scene ``object_bbox``
  (category -> list of ``{centroid, axesLengths, normalizedAxes}``, one box
  axis per *row*, transposed here), ``object_counts`` and ``room_size``.
  Object ids are assigned in (category, list position) order. The room
  polygon is unknown: the ``"scene"`` room row carries ``room_size`` as its
  area with ``source = "annotated"`` and a null ``polygon_wkb`` (the flag:
  an area without a shape). Room-size questions use the area; route planning
  then runs without the room-containment test. Where ``object_counts``
  disagrees with the number of boxes of a category (11 ScanNet scenes), the
  category is reported in ``count_conflicts`` so that callers do not ask to
  count it; its boxes still serve every geometric question.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import shapely
from shapely.geometry import Polygon

from pipeline import schemas
from pipeline.errors import ScanError
from pipeline.geometry.obb import box_from_columns, box_from_normalized_axes
from pipeline.scene.readers.box_record import parse_row_axes_box
from pipeline.scene.parsed import OrientedBox
from pipeline.vocab import is_small_object, is_structural

ANNOTATED_BUDGET = "all"
_DATASET_ALIASES = {
    "scannet": "scannet",
    "scannetv2": "scannet",
    "scannet++": "scannetpp",
    "scannetpp": "scannetpp",
    "arkitscenes": "arkitscenes",
    "arkit": "arkitscenes",
    "3rscan": "3rscan",
    "multiscan": "multiscan",
    "synthetic": "synthetic",
}
_SCENE_ID_PATTERNS = (
    (re.compile(r"^scene\d{4}_\d{2}$"), "scannet"),
    (re.compile(r"^scene_\d{5}_\d{2}$"), "multiscan"),
    (re.compile(r"^[0-9a-f]{10}$"), "scannetpp"),
    (re.compile(r"^\d{8}$"), "arkitscenes"),
    (re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"), "3rscan"),
    (re.compile(r"^synth\d{4}_\d{2}$"), "synthetic"),
)
# Largest deviation from orthonormality accepted before snapping (three-decimal rounding gives ~2e-3).
_ROTATION_TOLERANCE = 0.05
_SINGLE_ROOM_TYPES = frozenset({"single", "single_room", "single room", "room"})


@dataclass
class AnnotatedScene:
    key: str
    objects: pl.DataFrame
    rooms: pl.DataFrame
    object_visibility: pl.DataFrame
    annotated_counts: dict[str, int] | None = None
    count_conflicts: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)

    @property
    def scene_id(self) -> str:
        return self.key.partition("/")[2]


def dataset_of_scene_id(scene_id: str) -> str | None:
    for pattern, dataset in _SCENE_ID_PATTERNS:
        if pattern.match(scene_id):
            return dataset
    return None


def _dataset_name(raw: str, key: str, file: str) -> str:
    name = _DATASET_ALIASES.get(str(raw).strip().lower())
    if name is None:
        raise ScanError(key, file, f"unknown dataset {raw!r}; known: {sorted(set(_DATASET_ALIASES.values()))}")
    return name


def _vector(value, n: int, what: str, key: str, file: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float).reshape(n)
    except (TypeError, ValueError):
        raise ScanError(key, file, f"{what}: expected {n} numbers, got {value!r}"[:200]) from None
    if not np.all(np.isfinite(arr)):
        raise ScanError(key, file, f"{what}: non-finite value in {value!r}")
    return arr


def _snap_rotation(rotation: np.ndarray, what: str, key: str, file: str) -> np.ndarray:
    """Nearest orthonormal matrix (same handedness); far-off matrices are an error, not a guess."""
    deviation = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
    if deviation > _ROTATION_TOLERANCE:
        raise ScanError(key, file, f"{what}: rotation is not orthonormal (max |RᵀR - I| = {deviation:.3f})")
    u, _, vt = np.linalg.svd(rotation)
    return u @ vt


def _object_row(key: str, object_id: int, name: str, box: OrientedBox) -> dict:
    return {
        "key": key,
        "object_id": int(object_id),
        "raw_label": name,
        "category": name,
        "nyu40_id": None,
        "scannet200_id": None,
        "label_mapped": False,
        "center": [float(v) for v in box.center],
        "extent": [float(v) for v in box.extent],
        "rotation": [float(v) for v in np.asarray(box.rotation).reshape(9)],
        "vertical_axis": box.vertical_axis,
        "vertex_count": 0,
        "triangle_count": 0,
        "structural": is_structural(name),
        "small_object": is_small_object(name),
        "box_source": "annotation",
    }


def _visibility(key: str, object_ids: list[int]) -> pl.DataFrame:
    return schemas.from_rows(
        "object_visibility",
        [
            {"key": key, "budget": ANNOTATED_BUDGET, "object_id": int(i), "visible": True, "rule": "override"}
            for i in sorted(object_ids)
        ],
    )


def _room_row(key: str, room_id: int, kind: str, polygon: Polygon | None, area: float) -> dict:
    return {
        "key": key,
        "room_id": room_id,
        "kind": kind,
        "polygon_wkb": shapely.to_wkb(polygon) if polygon is not None else None,
        "area_m2": float(area),
        "source": "annotated",
    }


def _revsi_scene(data: dict, path: Path) -> AnnotatedScene:
    stem = path.stem[: -len("_boxes")] if path.stem.endswith("_boxes") else path.stem
    scene_id = str(data.get("scene_id") or stem)
    raw_dataset = data.get("dataset") or dataset_of_scene_id(scene_id)
    if not raw_dataset:
        raise ScanError(scene_id, str(path), "no 'dataset' field and the scene id matches no known dataset")
    key = f"{_dataset_name(raw_dataset, scene_id, str(path))}/{scene_id}"
    raw_objects = data.get("objects")
    if isinstance(raw_objects, dict):
        items = [(oid, obj) for oid, obj in raw_objects.items()]
    elif isinstance(raw_objects, list):
        items = [(obj.get("id") if isinstance(obj, dict) else None, obj) for obj in raw_objects]
    else:
        raise ScanError(key, str(path), "'objects' must be a list or a mapping of id -> object")
    rows, seen = [], set()
    for oid, obj in items:
        what = f"object {oid!r}"
        try:
            object_id = int(oid)
        except (TypeError, ValueError):
            raise ScanError(key, str(path), f"{what}: id is not an integer") from None
        if object_id in seen:
            raise ScanError(key, str(path), f"{what}: duplicate id")
        seen.add(object_id)
        if not isinstance(obj, dict) or not isinstance(obj.get("obb"), dict) or not obj.get("name"):
            raise ScanError(key, str(path), f"{what}: expected {{name, obb: {{center, rotation, extent}}}}")
        obb = obj["obb"]
        center = _vector(obb.get("center"), 3, f"{what} center", key, str(path))
        extent = _vector(obb.get("extent"), 3, f"{what} extent", key, str(path))
        if np.any(extent < 0):
            raise ScanError(key, str(path), f"{what}: negative extent {extent.tolist()}")
        rotation = _vector(obb.get("rotation"), 9, f"{what} rotation", key, str(path)).reshape(3, 3)
        rotation = _snap_rotation(rotation, what, key, str(path))
        name = " ".join(str(obj["name"]).split())
        rows.append(_object_row(key, object_id, name, box_from_columns(center, extent, rotation)))
    rows.sort(key=lambda r: r["object_id"])
    rooms, warnings = [], []
    polygon_points = data.get("scene_area_2d_polygon")
    if polygon_points:
        try:
            polygon = Polygon(np.asarray(polygon_points, dtype=float).reshape(-1, 2))
        except (TypeError, ValueError):
            raise ScanError(key, str(path), "scene_area_2d_polygon: expected a list of [x, y] points") from None
        if not polygon.is_valid:
            polygon = polygon.buffer(0)
            warnings.append("scene_area_2d_polygon was self-intersecting and was repaired")
        rooms.append(_room_row(key, 0, "scene", polygon, polygon.area))
        if str(data.get("scene_area_type", "")).strip().lower() in _SINGLE_ROOM_TYPES:
            rooms.append(_room_row(key, 1, "main", polygon, polygon.area))
    objects = schemas.from_rows("objects", rows)
    return AnnotatedScene(
        key=key,
        objects=objects,
        rooms=schemas.from_rows("rooms", rooms),
        object_visibility=_visibility(key, [r["object_id"] for r in rows]),
        warnings=warnings,
    )


def _vsibench_scene(scene_id: str, data: dict, path: Path) -> AnnotatedScene:
    raw_dataset = data.get("dataset") or dataset_of_scene_id(scene_id)
    if not raw_dataset:
        raise ScanError(scene_id, str(path), "no 'dataset' field and the scene id matches no known dataset")
    key = f"{_dataset_name(raw_dataset, scene_id, str(path))}/{scene_id}"
    boxes = data.get("object_bbox")
    if not isinstance(boxes, dict):
        raise ScanError(key, str(path), "'object_bbox' must map category -> list of boxes")
    rows, object_id = [], 0
    for category in sorted(boxes):
        for k, b in enumerate(boxes[category]):
            what = f"object_bbox[{category!r}][{k}]"
            box = parse_row_axes_box(b, key=key, file=str(path), where=what)
            axes = _snap_rotation(box.rotation.T, what, key, str(path))  # rows, as stored
            box = box_from_normalized_axes(box.center, box.extent, axes.reshape(9))
            name = " ".join(str(category).split())
            rows.append(_object_row(key, object_id, name, box))
            object_id += 1
    counts = {str(c): int(n) for c, n in (data.get("object_counts") or {}).items()}
    box_counts = {str(c): len(v) for c, v in boxes.items()}
    conflicts = tuple(sorted(c for c in set(counts) | set(box_counts) if counts.get(c, 0) != box_counts.get(c, 0)))
    warnings = [f"object_counts disagrees with object_bbox for {', '.join(conflicts)}"] if conflicts else []
    rooms = []
    room_size = data.get("room_size")
    if room_size is not None:
        area = float(room_size)
        if not np.isfinite(area) or area <= 0:
            raise ScanError(key, str(path), f"room_size: expected a positive area, got {room_size!r}")
        rooms.append(_room_row(key, 0, "scene", None, area))
    return AnnotatedScene(
        key=key,
        objects=schemas.from_rows("objects", rows),
        rooms=schemas.from_rows("rooms", rooms),
        object_visibility=_visibility(key, [r["object_id"] for r in rows]),
        annotated_counts=counts,
        count_conflicts=conflicts,
        warnings=warnings,
    )


def read_annotations(path: str | Path) -> list[AnnotatedScene]:
    """Every scene of one annotation file (ReVSI: one; VSI-Bench meta-info: many), in scene-id order."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScanError(path.stem, str(path), f"not readable JSON: {exc}".splitlines()[0]) from None
    except RecursionError:
        raise ScanError(path.stem, str(path), "not readable JSON: nested too deeply") from None
    if isinstance(data, dict) and "objects" in data:
        return [_revsi_scene(data, path)]
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "object_bbox" in v for v in data.values()):
        return [_vsibench_scene(str(sid), data[sid], path) for sid in sorted(data)]
    raise ScanError(path.stem, str(path), "neither a ReVSI annotation (objects) nor VSI-Bench meta-info (object_bbox)")
