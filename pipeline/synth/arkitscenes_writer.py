"""Write a synthetic scene in ARKitScenes' 3DOD layout (``<video_id>/``), ``metadata.csv`` and the label map at the root.

Conventions of the format, which the reader must undo: boxes are
``segments.obbAligned`` with row-axis ``normalizedAxes``; the mesh carries no
object ids; poses are *world-to-camera* axis-angle + translation lines in
``lowres_wide.traj``; frames, ``lowres_depth`` and ``.pincam`` intrinsics are
named ``<video_id>_<timestamp>``; and the frames are stored the way the phone
was held, so for a sky direction other than ``Up`` every image (colour and
depth) is stored turned (sky on the left for ``Left``...) with the camera
(pose, intrinsics, size) of the turned image. ``lowres_depth/`` holds uint16
millimetre PNGs the size of the colour frames, ray cast with the same camera:
the toolkit's ``threedod/benchmark_scripts/utils/tenFpsDataLoader.py`` lists
its frames from that folder, reads depth / 1000 and back-projects
``K^-1 [u d, v d, d]`` at integer pixels with the inverted trajectory pose.

The video id is an 8-digit number as ARKitScenes' are (the toolkit parses
the timestamp as ``name.split("_")[1]``): ``9`` + the synthetic scene number
(5 digits) + its scan number (2 digits), so ``synth0003_00`` is ``90000300``,
above the real ids' range. Frames are written at the walk's 10 fps
(timestamps ``1000.000 + i / 10`` s), so resampling keeps them all. The exact
ground truth goes to ``<video_id>.scan2qa_truth.json``.

Each annotated box is the gravity-aligned box of the object's own vertices,
the box every reader with per-vertex instances fits (SPEC section 1), written
with all its digits: a perfect annotator's box, so that this layout and the
others describe the objects with the same numbers. Trajectory values carry all
their digits too (see ``pipeline.synth.lossless``).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from pipeline.formats.ply import write_ply
from pipeline.geometry.obb import gravity_aligned_obb, normalized_axes_of
from pipeline.geometry.turned_camera import rotated_camera
from pipeline.scene.readers.arkitscenes import (
    METADATA_NAME,
    SKY_ROTATION,
    annotation_name,
    frames_dir,
    mesh_name,
)
from pipeline.synth.render import FrameRenderer, depth_png
from pipeline.synth.label_map import write_label_map
from pipeline.synth.scannet_writer import LABEL_MAP_NAME, TRUTH_SUFFIX, truth_dict
from pipeline.synth.scene import SynthScene
from pipeline.frames.video import rotate_image

METADATA_COLUMNS = (
    "video_id",
    "visit_id",
    "sky_direction",
    "fold",
    "has_laser_scanner_point_clouds",
    "is_in_upsampling",
    "is_in_threedod",
)
FIRST_TIMESTAMP_MS = 1_000_000  # ARKit timestamps are device uptime seconds, never 0


def arkitscenes_video_id(scene: SynthScene) -> str:
    """``synthNNNN_MM`` -> ``9`` + NNNN as 5 digits + MM: an 8-digit ARKitScenes-style video id."""
    match = re.fullmatch(r"synth(\d{4,5})_(\d{2})", scene.scene_id)
    if not match:
        raise ValueError(f"not a synthetic scene id: {scene.scene_id!r}")
    return f"9{int(match.group(1)):05d}{match.group(2)}"


def _floats(values) -> list[float]:
    return [float(v) + 0.0 for v in np.asarray(values, dtype=float).reshape(-1)]


def _annotation(scene: SynthScene, video_id: str) -> dict:
    data = []
    for obj in scene.objects:
        box = gravity_aligned_obb(scene.mesh.vertices[scene.vertex_indices(obj.object_id)])
        data.append(
            {
                "uid": f"{video_id}-{obj.object_id:04d}",
                "objectId": obj.object_id,
                "label": obj.label,
                "segments": {
                    "obbAligned": {
                        "centroid": _floats(box.center),
                        "axesLengths": _floats(box.extent),
                        "normalizedAxes": _floats(normalized_axes_of(box)),
                    }
                },
            }
        )
    return {"data": data, "skipped": False}


def _stamp(scene: SynthScene, i: int) -> str:
    ms = FIRST_TIMESTAMP_MS + int(round(i * 1000.0 / scene.fps))
    return f"{ms // 1000}.{ms % 1000:03d}"


def _traj_line(stamp: str, camera_to_world: np.ndarray) -> str:
    rotation, centre = camera_to_world[:3, :3], camera_to_world[:3, 3]
    rotvec = Rotation.from_matrix(rotation.T).as_rotvec()  # world-to-camera: R^T, -R^T c
    values = [*rotvec, *(-rotation.T @ centre)]
    return stamp + " " + " ".join(repr(float(v) + 0.0) for v in values) + "\n"


def write_metadata(root: Path, video_id: str, sky_direction: str) -> Path:
    """Add or replace the scene's row in ``root/metadata.csv`` (rows sorted by video id)."""
    path = root / METADATA_NAME
    rows = {}
    if path.exists():
        with open(path, newline="", encoding="utf-8") as fh:
            rows = {row["video_id"]: row for row in csv.DictReader(fh)}
    rows[video_id] = {
        "video_id": video_id,
        "visit_id": "NA",
        "sky_direction": sky_direction,
        "fold": "Training",
        "has_laser_scanner_point_clouds": "False",
        "is_in_upsampling": "False",
        "is_in_threedod": "True",
    }
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=METADATA_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for vid in sorted(rows):
            writer.writerow({c: rows[vid].get(c, "") for c in METADATA_COLUMNS})
    return path


def write_arkitscenes(scene: SynthScene, out_dir, sky_direction: str = "Up", progress=None) -> Path:
    """Write one scan under ``out_dir/<scene_id>/``, its ``metadata.csv`` row and the label map; returns the scene folder."""
    if sky_direction not in SKY_ROTATION:
        raise ValueError(f"sky_direction must be one of {sorted(SKY_ROTATION)}, got {sky_direction!r}")
    root = Path(out_dir)
    vid = arkitscenes_video_id(scene)
    folder = root / vid
    frames = folder / frames_dir(vid)
    for sub in ("lowres_wide", "lowres_depth", "lowres_wide_intrinsics"):
        (frames / sub).mkdir(parents=True, exist_ok=True)
    write_label_map(root / LABEL_MAP_NAME)
    mesh = scene.mesh
    write_ply(folder / mesh_name(vid), mesh.vertices, mesh.triangles, mesh.colors, comment=None, alpha=False)
    (folder / annotation_name(vid)).write_text(json.dumps(_annotation(scene, vid), indent=1) + "\n")
    # The stored image is the sky-up one turned back: sky-up = stored turned SKY_ROTATION clockwise.
    store_turn = (360 - SKY_ROTATION[sky_direction]) % 360
    renderer = FrameRenderer(scene)
    traj = []
    n = len(scene.poses)
    for i in range(n):
        stamp = _stamp(scene, i)
        pose, k, w, h = rotated_camera(scene.poses[i], scene.intrinsics, scene.width, scene.height, store_turn)
        rendered = renderer.render(i)
        ok, png = cv2.imencode(".png", rotate_image(rendered.color_bgr, store_turn))
        if not ok:
            raise RuntimeError("PNG encoding failed")
        (frames / "lowres_wide" / f"{vid}_{stamp}.png").write_bytes(png.tobytes())
        (frames / "lowres_depth" / f"{vid}_{stamp}.png").write_bytes(depth_png(rotate_image(rendered.depth_mm, store_turn)))
        pincam = " ".join(str(v) for v in (w, h, float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2]))) + "\n"
        (frames / "lowres_wide_intrinsics" / f"{vid}_{stamp}.pincam").write_text(pincam)
        traj.append(_traj_line(stamp, pose))
        if progress is not None:
            progress(i + 1, n)
    (frames / "lowres_wide.traj").write_text("".join(traj))
    write_metadata(root, vid, sky_direction)
    (folder / f"{vid}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
