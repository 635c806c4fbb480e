"""Write a synthetic scene in ScanNet++'s layout (``<scene_id>/scans/``, ``<scene_id>/iphone/``).

Conventions of the format, which the reader must undo: the mesh is stored in
the z-up metric frame (``mesh_aligned_0.05.ply``); object boxes are
``obb`` entries with row-axis ``normalizedAxes``; the iPhone stream is a
60 fps video with one ``frame_%06d`` entry per video frame in
``pose_intrinsic_imu.json`` (``aligned_pose`` camera-to-world in OpenCV axes,
``intrinsic`` 3x3).

The synthetic camera walk runs at 10 fps. To keep exactly its frames after the
pipeline resamples the 60 fps stream back to 10 fps, each rendered frame is
written 6 times in a row (a camera held still for 1/10 s) and all 6 entries
carry its pose: resampling by time keeps the first frame of every 1/10 s slot,
i.e. video frame ``6 * i`` = synthetic frame ``i``. The colour stream is
``rgb.mp4`` (OpenCV's mp4v encoder; real scenes ship ``rgb.mkv``, which the
reader also accepts). The exact ground truth goes to
``<scene_id>.scan2qa_truth.json`` as for the ScanNet layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline.formats.ply import write_ply
from pipeline.geometry.obb import normalized_axes_of
from pipeline.scene.readers.scannetpp import ANNOTATION_PATH, IPHONE_FPS, MESH_PATH, POSES_PATH, SEGMENTS_PATH
from pipeline.synth.render import held_frames, write_held_video
from pipeline.synth.label_map import write_label_map
from pipeline.synth.scannet_writer import LABEL_MAP_NAME, TRUTH_SUFFIX, truth_dict
from pipeline.synth.scene import SynthScene

VIDEO_NAME = "iphone/rgb.mp4"


def _r(x) -> float:
    return round(float(x), 10)


def _annotation(scene: SynthScene) -> dict:
    groups = []
    for obj in scene.objects:
        start, stop = scene.object_vertex_ranges[obj.object_id]
        box = obj.box.to_oriented()
        groups.append(
            {
                "id": obj.object_id,
                "objectId": obj.object_id,
                "label": obj.label,
                "segments": sorted(int(s) for s in np.unique(scene.segments[start:stop])),
                "obb": {
                    "centroid": [_r(v) for v in box.center],
                    "axesLengths": [_r(v) for v in box.extent],
                    "normalizedAxes": [_r(v) for v in normalized_axes_of(box)],
                },
            }
        )
    return {"sceneId": scene.scene_id, "segGroups": groups}


def _pose_entries(scene: SynthScene, repeats: int) -> dict:
    entries = {}
    K = [[_r(v) for v in row] for row in scene.intrinsics]
    for i, pose in enumerate(scene.poses):
        matrix = [[float(v) for v in row] for row in pose]  # full precision: poses round-trip exactly
        for r in range(repeats):
            number = i * repeats + r
            entries[f"frame_{number:06d}"] = {
                "aligned_pose": matrix,
                "intrinsic": K,
                "timestamp": _r(number / IPHONE_FPS),
            }
    return entries


def write_scannetpp(scene: SynthScene, out_dir, progress=None) -> Path:
    """Write one scan under ``out_dir/<scene_id>/`` (and the label map at ``out_dir``); returns the scene folder."""
    folder = Path(out_dir) / scene.scene_id
    (folder / "scans").mkdir(parents=True, exist_ok=True)
    (folder / "iphone").mkdir(parents=True, exist_ok=True)
    write_label_map(Path(out_dir) / LABEL_MAP_NAME)
    mesh = scene.mesh
    write_ply(folder / MESH_PATH, mesh.vertices, mesh.triangles, mesh.colors, comment=None, alpha=False)
    segments = {"sceneId": scene.scene_id, "segIndices": [int(s) for s in scene.segments]}
    (folder / SEGMENTS_PATH).write_text(json.dumps(segments) + "\n")
    (folder / ANNOTATION_PATH).write_text(json.dumps(_annotation(scene), indent=1) + "\n")
    repeats = held_frames(scene.fps, IPHONE_FPS, "iPhone")
    (folder / POSES_PATH).write_text(json.dumps(_pose_entries(scene, repeats), indent=1) + "\n")
    write_held_video(scene, folder / VIDEO_NAME, IPHONE_FPS, repeats, progress)
    (folder / f"{scene.scene_id}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
