"""3RScan scan folder -> ``ParsedScan``.

A 3RScan scan folder (named by its scan id, a UUID) holds the annotated mesh
``labels.instances.annotated.v2.ply`` (per-vertex ``objectId``, 0 = not
annotated), the textured ``mesh.refined.v2.obj`` (same surface, +z up), the
instance annotation ``semseg.v2.json`` (``segGroups`` with ``objectId``,
``label`` and an ``obb`` whose ``normalizedAxes`` hold one box axis per row)
and the RGB-D sequence ``sequence/`` (``frame-<6 digits>.color.jpg``,
``frame-<6 digits>.pose.txt`` camera-to-world 4x4 row-major in OpenCV axes, and
``_info.txt`` with ``m_colorWidth``/``m_colorHeight`` and the row-major 4x4
``m_calibrationColorIntrinsic``). The mesh is already z-up in metres, so no
axis change is needed.

Boxes are computed from the object's vertices (SPEC §1 gravity-aligned OBB),
as for every dataset with per-vertex instances; the annotated ``obb`` is
validated and used only for an object without vertices. The sequence has no
timestamps: ReVSI plays the provided (sparse) frames at 4 fps, so frame i is
at ``i / fps_3rscan`` seconds and the all-frame sequence keeps every frame.
The images are stored rotated (the sensor was held sideways); poses and
intrinsics describe the stored image, and ``image_rotation`` says how to turn
it sky-up, read from where world-up points in the images.

The helpers ``members_by_owner``, ``read_json`` and ``sky_up_rotation`` are
shared with the MultiScan reader.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.ply import PlyFormatError, read_ply
from pipeline.frames.budgets import output_size, scale_intrinsics
from pipeline.scene.readers.assembly import assembled_scan, posed_frames
from pipeline.scene.readers.box_record import parse_row_axes_box
from pipeline.scene.readers.label_lookup import labelled_object, optional_label_map
from pipeline.scene.readers.scannet import triangle_owner
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan
from pipeline.frames.video import resized

DATASET = "3rscan"
LABELS_PLY = "labels.instances.annotated.v2.ply"
MESH_OBJ = "mesh.refined.v2.obj"
SEMSEG = "semseg.v2.json"
SEQUENCE = "sequence"
INFO = "_info.txt"
FRAME_FILE = re.compile(r"^frame-(\d{6})\.pose\.txt$")


def is_rscan_scan(folder) -> bool:
    return (folder / SEMSEG).exists() and ((folder / LABELS_PLY).exists() or (folder / MESH_OBJ).exists())


# --- helpers shared with the MultiScan reader -------------------------------------------------


def members_by_owner(owner: np.ndarray) -> dict[int, np.ndarray]:
    """Owner id -> sorted indices of the elements it owns (owners <= 0 are "nothing")."""
    order = np.argsort(owner, kind="stable")
    ids, starts, counts = np.unique(owner[order], return_index=True, return_counts=True)
    return {int(i): order[s : s + c] for i, s, c in zip(ids, starts, counts) if i > 0}


def sky_up_rotation(poses: list[np.ndarray]) -> int:
    """Degrees clockwise that turn the stored images sky-up, from where world +z points in them.

    World up is expressed in camera axes (OpenCV: x right, y down); the image
    edge it points to most often over the valid frames is the sky.
    """
    votes = {0: 0, 90: 0, 180: 0, 270: 0}
    for pose in poses:
        pose = np.asarray(pose, dtype=float)
        if not np.all(np.isfinite(pose)):
            continue
        up = pose[:3, :3].T @ np.array([0.0, 0.0, 1.0])
        x, y = up[0], up[1]
        if abs(y) >= abs(x):
            votes[0 if y < 0 else 180] += 1
        else:
            votes[90 if x < 0 else 270] += 1  # sky at the left edge: turn clockwise by 90
    return max(sorted(votes), key=lambda d: votes[d])


def read_json(path: Path, key: str):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable JSON ({type(exc).__name__}: {exc})".splitlines()[0]) from None


# --- 3RScan files -------------------------------------------------------------------------------


def read_seg_groups(path: Path, key: str) -> list[tuple[int, str, OrientedBox | None]]:
    """(objectId, label, annotated box) of every segGroup of ``semseg.v2.json``."""
    data = read_json(path, key)
    groups = data.get("segGroups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise ScanError(key, path.name, "no segGroups list")
    out, seen = [], set()
    for n, group in enumerate(groups):
        if not isinstance(group, dict) or "label" not in group:
            raise ScanError(key, path.name, f"segGroup {n} lacks label")
        try:
            object_id = int(group.get("objectId", group.get("id")))
        except (TypeError, ValueError):
            raise ScanError(key, path.name, f"segGroup {n} has a missing or non-integer objectId") from None
        if object_id <= 0:
            raise ScanError(key, path.name, f"segGroup {n} has objectId {object_id}; 3RScan ids start at 1")
        if object_id in seen:
            raise ScanError(key, path.name, f"segGroup {n} repeats objectId {object_id}")
        seen.add(object_id)
        obb = group.get("obb")
        box = None if obb is None else parse_row_axes_box(obb, key=key, file=path.name, where=f"segGroup {n} obb")
        out.append((object_id, str(group["label"]), box))
    return out


def read_info(path: Path, key: str) -> dict[str, str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(key, f"{SEQUENCE}/{INFO}", f"unreadable ({type(exc).__name__})") from None
    info = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            info[name.strip()] = value.strip()
    return info


def color_camera(info: dict[str, str], key: str) -> tuple[np.ndarray, tuple[int, int]]:
    """3x3 colour intrinsics and (width, height) from ``_info.txt``."""
    where = f"{SEQUENCE}/{INFO}"
    try:
        size = (int(info["m_colorWidth"]), int(info["m_colorHeight"]))
    except KeyError as exc:
        raise ScanError(key, where, f"missing {exc.args[0]}") from None
    except ValueError:
        raise ScanError(key, where, "m_colorWidth/m_colorHeight are not integers") from None
    if "m_calibrationColorIntrinsic" not in info:
        raise ScanError(key, where, "missing m_calibrationColorIntrinsic")
    try:
        values = np.array(info["m_calibrationColorIntrinsic"].split(), dtype=float)
    except ValueError:
        values = np.zeros(0)
    if values.size != 16 or not np.all(np.isfinite(values)):
        raise ScanError(key, where, "m_calibrationColorIntrinsic is not 16 finite numbers")
    return values.reshape(4, 4)[:3, :3], size


def read_pose(path: Path, key: str) -> np.ndarray:
    name = f"{SEQUENCE}/{path.name}"
    try:
        values = np.array(path.read_text().split(), dtype=float)
    except (OSError, UnicodeDecodeError, ValueError):
        raise ScanError(key, name, "pose is not 16 numbers") from None
    if values.size != 16:
        raise ScanError(key, name, f"pose has {values.size} numbers, expected 16")
    return values.reshape(4, 4)


def _mesh(folder: Path, key: str) -> tuple[Mesh, np.ndarray]:
    """Annotated mesh and per-vertex objectId from ``labels.instances.annotated.v2.ply``."""
    path = folder / LABELS_PLY
    if not path.exists():
        raise ScanError(key, LABELS_PLY, "missing (the per-vertex objectId lives there)")
    try:
        ply = read_ply(path)
    except PlyFormatError as exc:
        raise ScanError(key, LABELS_PLY, str(exc)) from None
    if "objectId" not in ply.vertex_properties:
        raise ScanError(key, LABELS_PLY, "vertex element lacks objectId")
    if len(ply.triangles) == 0:
        raise ScanError(key, LABELS_PLY, "no faces")
    try:
        owner = np.asarray(ply.vertex_properties["objectId"]).astype(np.int64, casting="safe")
    except TypeError:
        raise ScanError(key, LABELS_PLY, "objectId is not an integer property") from None
    return Mesh(ply.vertices, ply.triangles, ply.colors), owner


def _frames(folder: Path, config: Config, key: str):
    seq = folder / SEQUENCE
    if not (seq / INFO).exists():
        return None
    k_color, color_size = color_camera(read_info(seq / INFO, key), key)
    indices = sorted(int(m.group(1)) for p in seq.iterdir() if (m := FRAME_FILE.match(p.name)))
    if not indices:
        return None
    out_size = output_size(color_size[0], color_size[1], config.frames)
    k_out = scale_intrinsics(k_color, color_size, out_size)
    fps = float(config.frames.fps_3rscan)
    frames, files = [], [seq / INFO]
    for i in indices:
        pose_path = seq / f"frame-{i:06d}.pose.txt"
        color_path = seq / f"frame-{i:06d}.color.jpg"
        if not color_path.exists():
            raise ScanError(key, f"{SEQUENCE}/{color_path.name}", "colour image missing for a posed frame")
        image_file = f"{SEQUENCE}/{color_path.name}"
        frames.append(Frame(i, i / fps, read_pose(pose_path, key), k_out.copy(), out_size[0], out_size[1], image_file))
        files += [pose_path, color_path]

    def load_image(frame_index: int) -> np.ndarray:
        name = f"frame-{int(frame_index):06d}.color.jpg"
        image = cv2.imread(str(seq / name), cv2.IMREAD_COLOR)
        if image is None:
            raise ScanError(key, f"{SEQUENCE}/{name}", "colour image missing or does not decode")
        return resized(image, out_size)

    return frames, load_image, fps, files


def read_rscan(folder: Path, config: Config, *, source_uri: str | None = None) -> tuple[ParsedScan, list[Path]]:
    """Parse a local 3RScan scan folder; also returns the input files read (for the checksum)."""
    folder = Path(folder)
    scene_id = folder.name
    key = f"{DATASET}/{scene_id}"
    warnings: list[str] = []
    label_map, label_map_path = optional_label_map(folder, config, key, warnings)
    files = [label_map_path] if label_map_path else []
    groups = read_seg_groups(folder / SEMSEG, key)
    files.append(folder / SEMSEG)
    mesh, vertex_owner = _mesh(folder, key)
    files.append(folder / LABELS_PLY)
    members = members_by_owner(vertex_owner)
    known = {g[0] for g in groups}
    stray = sorted(set(members) - known)
    if stray:
        warnings.append(f"{LABELS_PLY}: objectIds {stray[:5]} have vertices but no segGroup; left unlabelled")
        vertex_owner = np.where(np.isin(vertex_owner, stray), 0, vertex_owner)
    owners = triangle_owner(mesh.triangles, vertex_owner)
    mesh.triangle_object_ids = np.where(owners > 0, owners, -1).astype(np.int32)
    objects = []
    for object_id, raw, box in groups:
        idx = members.get(object_id)
        if idx is None and box is None:
            warnings.append(f"{SEMSEG}: object {object_id} ({raw!r}) has neither vertices nor obb")
        objects.append(labelled_object(object_id, raw, idx, None if idx is not None else box, label_map))
    objects.sort(key=lambda o: o.object_id)
    found = _frames(folder, config, key)
    frames, load_image, fps = posed_frames(found, warnings, files, "no sequence/_info.txt with posed frames")
    parsed = assembled_scan(
        DATASET, scene_id, source_uri or str(folder), mesh=mesh, objects=objects, frames=frames, source_fps=fps,
        load_image=load_image, warnings=warnings, seed=config.seed,
        image_rotation=sky_up_rotation([f.pose for f in frames]) if frames else 0,
    )
    return parsed, files
