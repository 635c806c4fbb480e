"""ARKitScenes 3DOD scene folder -> ``ParsedScan``.

Layout of one scene (``<video_id>/``), as the ARKitScenes ``threedod`` download
ships it:

- ``<video_id>_3dod_mesh.ply``: the reconstructed mesh, z-up metres;
- ``<video_id>_3dod_annotation.json``: ``data[]`` with ``label`` and
  ``segments.obbAligned`` = {``centroid``, ``axesLengths``, ``normalizedAxes``}
  (one box axis per *row*, as the toolkit's ``compute_box_3d`` multiplies by
  its transpose);
- ``<video_id>_frames/lowres_wide/<video_id>_<ts>.png`` colour frames named by
  timestamp (3 decimals), ``lowres_wide_intrinsics/<video_id>_<ts>.pincam``
  (``w h fx fy cx cy``) and ``lowres_wide.traj`` lines
  ``ts rx ry rz tx ty tz``: axis-angle + translation of the *world-to-camera*
  transform. The toolkit inverts it and back-projects ``K^-1 (u d, v d, d)``
  with it, so once inverted it is a camera-to-world pose already in OpenCV
  axes (no ARKit/OpenGL flip);
- ``metadata.csv`` (``video_id``, ``sky_direction``, ...) at the scans root:
  where the sky is in the stored frames.

Frames stay as stored (pose, intrinsics and size of the stored images) and
``ParsedScan.image_rotation`` says how far to turn them clockwise to sky-up;
the video writers and visibility apply it (visibility casts the sky-up camera,
``pipeline.geometry.turned_camera``).

The mesh carries no object ids: objects are the annotated boxes. Which
triangles show an object (for visibility) follows ReVSI B.4's pseudo mask: a
triangle belongs to an object when its centroid lies inside the object's box
(1 mm tolerance); a centroid inside several boxes goes to the smallest box
(a cup inside a table's box is the cup). One refinement: a triangle lying on
one of the box's faces and facing *into* the box is a surface the object rests
on or stands against (the table top under a cup, the floor under a sofa, the
wall behind a wardrobe), not the object, whose own surface faces out. Without
it, a tight box claims the tabletop under a monitor as monitor. Labels go
through a ScanNet label map when one is at hand
(``pipeline.scene.readers.label_lookup``); otherwise the category is the raw label.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.ply import PlyFormatError, read_ply
from pipeline.frames.budgets import output_size, scale_intrinsics
from pipeline.scene.readers.assembly import assembled_scan
from pipeline.scene.readers.box_record import parse_row_axes_box
from pipeline.scene.readers.file_checks import read_root_file, root_file_region, scans_root_of
from pipeline.scene.readers.label_lookup import apply_label_map, optional_label_map
from pipeline.scene.parsed import Frame, Mesh, OrientedBox, ParsedScan, SceneObject
from pipeline.frames.video import resized

DATASET = "arkitscenes"
METADATA_NAME = "metadata.csv"
MAX_METADATA_BYTES = 16 << 20  # the real 3DOD metadata.csv (5,047 rows) is about 0.3 MB
SKY_ROTATION = {"Up": 0, "Left": 90, "Down": 180, "Right": 270}  # degrees clockwise that bring the sky up
UNKNOWN_SKY = ("NA", "")
BOX_TOLERANCE = 1e-3  # metres: a centroid on a box face (the object's own outer faces) is inside
POSE_MATCH_SECONDS = 0.005  # the toolkit's tolerance between a frame's and a pose's timestamp


@dataclass
class ARKitObject(SceneObject):
    uid: str = ""


def mesh_name(scene_id: str) -> str:
    return f"{scene_id}_3dod_mesh.ply"


def annotation_name(scene_id: str) -> str:
    return f"{scene_id}_3dod_annotation.json"


def frames_dir(scene_id: str) -> str:
    return f"{scene_id}_frames"


def is_arkitscenes_scene(folder) -> bool:
    return (folder / mesh_name(folder.name)).exists() or (folder / annotation_name(folder.name)).exists()


def read_sky_directions(
    path: Path, key: str = "?", *, region: str | None = None, allow_outside: bool = False
) -> dict[str, str]:
    """video_id -> ``sky_direction`` as written (``Up``/``Down``/``Left``/``Right`` or ``NA``) in a ``metadata.csv``.

    Every scan reads this one file at the scans root, so it is refused like the label map (``read_root_file``):
    a link out of ``region``, a FIFO or device, or a size over ``MAX_METADATA_BYTES`` is one line, never a hang.
    """
    data = read_root_file(path, key, path.name, MAX_METADATA_BYTES, region=region, allow_outside=allow_outside)
    try:
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ScanError(key, path.name, f"unreadable CSV ({type(exc).__name__})") from None
    if rows and not {"video_id", "sky_direction"} <= set(rows[0]):
        raise ScanError(key, path.name, "no video_id/sky_direction columns")
    return {str(row["video_id"]).strip(): (row.get("sky_direction") or "").strip() for row in rows}


def sky_rotation(direction: str, key: str, filename: str) -> tuple[int, list[str]]:
    """Clockwise degrees to sky-up for one scan's ``sky_direction``; ``NA``/empty (4 rows of the real file) is Up."""
    if direction in SKY_ROTATION:
        return SKY_ROTATION[direction], []
    if direction in UNKNOWN_SKY:
        return 0, [f"{filename}: sky_direction is {direction!r} for this scan: taken as Up"]
    raise ScanError(key, filename, f"sky_direction {direction!r} is not Up/Down/Left/Right/NA")


def find_metadata(folder: Path) -> Path | None:
    """``metadata.csv`` at the scans root: the scene's parent or up to two levels above (``3dod/Training/``)."""
    for parent in (folder.parent, folder.parent.parent, folder.parent.parent.parent):
        candidate = parent / METADATA_NAME
        if candidate.exists():
            return candidate
    return None


def _load_json(path: Path, key: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ScanError(key, path.name, "file missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable JSON ({type(exc).__name__}: {exc})".splitlines()[0]) from None


def read_annotation(path: Path, key: str) -> tuple[list[ARKitObject], list[str]]:
    anno = _load_json(path, key)
    data = anno.get("data") if isinstance(anno, dict) else None
    if not isinstance(data, list):
        raise ScanError(key, path.name, "no data list")
    objects, ids = [], []
    for n, entry in enumerate(data):
        where = f"data[{n}]"
        if not isinstance(entry, dict) or "label" not in entry:
            raise ScanError(key, path.name, f"{where} lacks label")
        segments = entry.get("segments")
        if not isinstance(segments, dict) or segments.get("obbAligned") is None:
            raise ScanError(key, path.name, f"{where}.segments lacks obbAligned")
        box = parse_row_axes_box(
            segments["obbAligned"], key=key, file=path.name, where=f"{where}.segments.obbAligned"
        )
        label = str(entry["label"])
        uid = str(entry.get("uid", ""))
        objects.append(ARKitObject(object_id=n, raw_label=label, box=box, category=label, uid=uid))
        ids.append(entry.get("objectId"))
    warnings = []
    try:
        numbered = [int(i) for i in ids]
    except (TypeError, ValueError):
        numbered = None
    if numbered is not None and len(set(numbered)) == len(numbered):
        for obj, oid in zip(objects, numbered):
            obj.object_id = oid
    elif objects:
        warnings.append(f"{path.name}: objectIds missing or repeated; objects numbered by position in data[]")
    objects.sort(key=lambda o: o.object_id)
    return objects, warnings


def triangles_in_boxes(vertices: np.ndarray, triangles: np.ndarray, objects: list[ARKitObject]) -> np.ndarray:
    """Owner object id per triangle: the smallest box containing its centroid, -1 when none does.

    Triangles on a box face that face into the box touch it from outside and are not its object's.
    """
    owner = np.full(len(triangles), -1, dtype=np.int32)
    if not len(triangles):
        return owner
    corners_of_triangles = vertices[triangles]
    centroids = corners_of_triangles.sum(axis=1) / 3.0
    normals = np.cross(
        corners_of_triangles[:, 1] - corners_of_triangles[:, 0], corners_of_triangles[:, 2] - corners_of_triangles[:, 0]
    )
    # Triangles sorted by centroid x once: each box then tests only the slice inside its x range.
    order = np.argsort(centroids[:, 0], kind="stable")
    sorted_x = centroids[order, 0]
    best_volume = np.full(len(triangles), np.inf)
    for obj in objects:
        box: OrientedBox = obj.box
        corners = box.corners()
        lo, hi = corners.min(axis=0) - BOX_TOLERANCE, corners.max(axis=0) + BOX_TOLERANCE
        near = order[np.searchsorted(sorted_x, lo[0], "left") : np.searchsorted(sorted_x, hi[0], "right")]
        c = centroids[near]
        near = near[(c[:, 1] >= lo[1]) & (c[:, 1] <= hi[1]) & (c[:, 2] >= lo[2]) & (c[:, 2] <= hi[2])]
        inside = near[box.contains(centroids[near], tol=BOX_TOLERANCE)]
        inside = inside[~_touching_from_outside(box, centroids[inside], normals[inside])]
        volume = float(np.prod(box.extent))
        better = inside[volume < best_volume[inside]]
        owner[better] = obj.object_id
        best_volume[better] = volume
    return owner


def _touching_from_outside(box: OrientedBox, centroids: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Per triangle: lies on one of the box's faces (within the tolerance) and its normal points into the box."""
    local = (centroids - box.center) @ box.rotation
    local_normals = normals @ box.rotation
    on_face = np.abs(np.abs(local) - np.asarray(box.extent) / 2.0) <= BOX_TOLERANCE
    return np.any(on_face & (np.sign(local) * local_normals < 0), axis=1)


def _ms(stamp: str) -> int:
    return int(round(float(stamp) * 1000.0))


def read_trajectory(path: Path, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps in seconds, camera-to-world OpenCV poses) of ``lowres_wide.traj``."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable trajectory ({type(exc).__name__})") from None
    stamps, poses = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            values = np.array(line.split(), dtype=float)
        except ValueError:
            raise ScanError(key, path.name, f"line {number} is not numeric") from None
        if values.size != 7 or not np.all(np.isfinite(values)):
            problem = f"line {number} has {values.size} values, expected 7 finite (ts rx ry rz tx ty tz)"
            raise ScanError(key, path.name, problem)
        world_to_camera = np.eye(4)
        world_to_camera[:3, :3] = Rotation.from_rotvec(values[1:4]).as_matrix()
        world_to_camera[:3, 3] = values[4:7]
        stamps.append(values[0])
        poses.append(np.linalg.inv(world_to_camera))
    return np.asarray(stamps, dtype=float), np.asarray(poses, dtype=float).reshape(-1, 4, 4)


def read_pincam(path: Path, key: str) -> tuple[int, int, np.ndarray]:
    try:
        values = np.array(path.read_text().split(), dtype=float)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable intrinsics ({type(exc).__name__})") from None
    if values.size != 6 or not np.all(np.isfinite(values)) or values[0] <= 0 or values[1] <= 0:
        raise ScanError(key, path.name, f"expected 6 numbers 'w h fx fy cx cy', found {values.size}")
    w, h, fx, fy, cx, cy = values
    return int(w), int(h), np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _pincam_for(folder: Path, scene_id: str, stamp: str) -> Path | None:
    """The frame's ``.pincam``, or one a millisecond off (the toolkit's own fallback)."""
    base = float(stamp)
    for name in (stamp, f"{base - 0.001:.3f}", f"{base + 0.001:.3f}"):
        candidate = folder / f"{scene_id}_{name}.pincam"
        if candidate.exists():
            return candidate
    return None


def read_lowres_frames(
    folder: Path, key: str, frames_config
) -> tuple[list[Frame], dict[int, Path], list[Path], list[str]]:
    """Frames (stored orientation), frame index -> PNG, the files read, and warnings."""
    scene_id = folder.name
    root = folder / frames_dir(scene_id)
    image_dir, intr_dir, traj = root / "lowres_wide", root / "lowres_wide_intrinsics", root / "lowres_wide.traj"
    if not image_dir.is_dir():
        return [], {}, [], [f"no {frames_dir(scene_id)}/lowres_wide frames: frame-dependent steps skip this scan"]
    if not traj.exists():
        raise ScanError(key, f"{frames_dir(scene_id)}/lowres_wide.traj", "file missing")
    prefix = f"{scene_id}_"
    stamped = []
    for png in image_dir.glob(f"{prefix}*.png"):
        stamp = png.stem[len(prefix):]
        try:
            stamped.append((_ms(stamp), stamp, png))
        except ValueError:
            raise ScanError(key, png.name, "frame name does not end in a timestamp") from None
    stamped.sort()
    traj_ts, traj_poses = read_trajectory(traj, key)
    frames, images, files, unposed = [], {}, [traj], 0
    for index, (ms, stamp, png) in enumerate(stamped):
        pincam = _pincam_for(intr_dir, scene_id, stamp)
        if pincam is None:
            raise ScanError(key, f"lowres_wide_intrinsics/{scene_id}_{stamp}.pincam", "intrinsics missing for a frame")
        width, height, k = read_pincam(pincam, key)
        pose = np.full((4, 4), np.nan)
        if len(traj_ts):
            nearest = int(np.argmin(np.abs(traj_ts - ms / 1000.0)))
            if abs(traj_ts[nearest] - ms / 1000.0) <= POSE_MATCH_SECONDS:
                pose = traj_poses[nearest].copy()
        if not np.all(np.isfinite(pose)):
            unposed += 1
        out = output_size(width, height, frames_config)
        k_out = scale_intrinsics(k, (width, height), out)
        image_file = png.relative_to(folder).as_posix()
        frames.append(Frame(index, (ms - stamped[0][0]) / 1000.0, pose, k_out, out[0], out[1], image_file))
        images[index] = png
        files += [png, pincam]
    warnings = []
    if unposed:
        warnings.append(f"{unposed} of {len(frames)} frames have no pose within 5 ms in lowres_wide.traj: dropped")
    return frames, images, files, warnings


def read_arkitscenes(folder: Path, config: Config, *, source_uri: str | None = None) -> tuple[ParsedScan, list[Path]]:
    """Parse a local ARKitScenes 3DOD scene folder; also returns the input files read (for the checksum)."""
    folder = Path(folder)
    scene_id = folder.name
    key = f"{DATASET}/{scene_id}"
    if not folder.is_dir():
        raise ScanError(key, str(folder), "scene folder not found")
    warnings: list[str] = []
    files: list[Path] = []
    rotation = 0
    metadata = find_metadata(folder)
    if metadata is None:
        warnings.append(f"no {METADATA_NAME} above the scene: sky direction taken as Up")
    else:
        files.append(metadata)
        region = root_file_region(metadata, scans_root_of(folder, config))
        directions = read_sky_directions(metadata, key, region=region, allow_outside=config.allow_links_outside_root)
        if scene_id in directions:
            rotation, sky_warnings = sky_rotation(directions[scene_id], key, metadata.name)
            warnings += sky_warnings
        else:
            warnings.append(f"{METADATA_NAME} has no row for {scene_id}: sky direction taken as Up")

    anno_path = folder / annotation_name(scene_id)
    objects, anno_warnings = read_annotation(anno_path, key)
    warnings += anno_warnings
    label_map, label_map_path = optional_label_map(folder, config, key, warnings)
    apply_label_map(objects, label_map)
    files += [label_map_path] if label_map_path else []
    mesh_path = folder / mesh_name(scene_id)
    if not mesh_path.exists():
        raise ScanError(key, mesh_path.name, "file missing")
    try:
        ply = read_ply(mesh_path)
    except (PlyFormatError, OSError) as exc:
        raise ScanError(key, mesh_path.name, str(exc)) from None
    files += [anno_path, mesh_path]
    owners = triangles_in_boxes(ply.vertices, ply.triangles, objects)
    for obj in objects:
        obj.vertex_indices = np.unique(ply.triangles[owners == obj.object_id]).astype(np.int64)
    mesh = Mesh(ply.vertices, ply.triangles, ply.colors, owners)

    frames, images, frame_files, frame_warnings = read_lowres_frames(folder, key, config.frames)
    warnings += frame_warnings
    files += frame_files
    load_image = None
    if frames:

        def load_image(frame_index: int) -> np.ndarray:
            path = images.get(int(frame_index))
            image = cv2.imread(str(path), cv2.IMREAD_COLOR) if path is not None else None
            if image is None:
                name = path.name if path else f"frame {frame_index}"
                raise ScanError(key, name, "colour image missing or does not decode")
            return resized(image, (frames[int(frame_index)].width, frames[int(frame_index)].height))

    steps = np.diff([f.timestamp for f in frames])
    steps = steps[steps > 0]
    parsed = assembled_scan(
        DATASET, scene_id, source_uri or str(folder), mesh=mesh, objects=objects, frames=frames,
        source_fps=float(1.0 / np.median(steps)) if len(steps) else 0.0,
        load_image=load_image, warnings=warnings, seed=config.seed, image_rotation=rotation,
    )
    return parsed, files
