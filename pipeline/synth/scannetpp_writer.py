"""Write a synthetic scene in ScanNet++'s layout (``<scene_id>/scans/``, ``<scene_id>/iphone/``).

Conventions of the release, which the official toolkit (``scannetpp/scannetpp``)
reads and our reader undoes:

* ``scans/mesh_aligned_0.05.ply``: the mesh in the z-up metric frame.
* ``scans/segments.json``: ``segIndices`` gives every vertex its own segment
  (segment id = vertex index), and ``scans/segments_anno.json`` ``segGroups``
  list each object's *vertex ids* as its ``segments``: the toolkit's
  ``common/utils/anno.py`` ``load_annotation`` sets
  ``vertex_obj_ids[segments] = objectId`` ("each segment is a vertex"). Object
  ids start at 1 (``id`` = ``objectId`` = generator id + 1): the toolkit keeps 0
  for unannotated vertices and skips ids <= 0. Boxes are ``obb`` entries with
  row-axis ``normalizedAxes``.
* ``iphone/rgb.mkv``: the 60 fps colour stream (OpenCV's mp4v in Matroska; the
  release's name since ``scene_release.iphone_video_path`` moved from
  ``rgb.mp4``, which the reader still accepts), with one ``frame_%06d`` entry
  per video frame in ``iphone/pose_intrinsic_imu.json`` (``aligned_pose``
  camera-to-world in OpenCV axes, ``intrinsic`` 3x3).
* ``iphone/depth.bin``: 192 x 256 LiDAR-size depth per video frame, see
  ``pipeline.synth.depth_streams`` (ray cast with the colour camera scaled by
  256 / 640, as ``iphone/arkit_pcl.py`` scales it).

The synthetic camera walk runs at 10 fps. To keep exactly its frames after the
pipeline resamples the 60 fps stream back to 10 fps, each rendered frame is
written 6 times in a row (a camera held still for 1/10 s) and all 6 entries
carry its pose: resampling by time keeps the first frame of every 1/10 s slot,
i.e. video frame ``6 * i`` = synthetic frame ``i``. The exact ground truth goes
to ``<scene_id>.scan2qa_truth.json`` as for the ScanNet layout.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.formats.matroska import make_deterministic
from pipeline.formats.ply import write_ply
from pipeline.geometry.obb import normalized_axes_of
from pipeline.scene.readers.scannetpp import ANNOTATION_PATH, IPHONE_FPS, MESH_PATH, POSES_PATH, SEGMENTS_PATH
from pipeline.synth.depth_streams import LIDAR_SIZE, depth_camera, render_depth, scannetpp_depth_records
from pipeline.synth.label_map import write_label_map
from pipeline.synth.render import FrameRenderer, held_frames, write_held_video
from pipeline.synth.scannet_writer import LABEL_MAP_NAME, TRUTH_SUFFIX, truth_dict
from pipeline.synth.scene import SynthScene

VIDEO_NAME = "iphone/rgb.mkv"
DEPTH_NAME = "iphone/depth.bin"
ID_OFFSET = 1  # ScanNet++ object ids start at 1; 0 is "no object" in the toolkit


def _r(x) -> float:
    return round(float(x), 10)


def _annotation(scene: SynthScene) -> dict:
    groups = []
    for obj in scene.objects:
        start, stop = scene.object_vertex_ranges[obj.object_id]
        box = obj.box.to_oriented()
        groups.append(
            {
                "id": obj.object_id + ID_OFFSET,
                "objectId": obj.object_id + ID_OFFSET,
                "label": obj.label,
                "segments": list(range(start, stop)),  # vertex ids: every vertex is its own segment
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


def write_depth_bin(scene: SynthScene, path: Path, renderer: FrameRenderer, repeats: int) -> None:
    k_depth = depth_camera(scene.intrinsics, (scene.width, scene.height), LIDAR_SIZE)
    frames = (render_depth(renderer.raycaster, k_depth, pose, LIDAR_SIZE) for pose in scene.poses)
    with open(path, "wb") as fh:
        for record in scannetpp_depth_records(frames, repeats):
            fh.write(record)


def write_scannetpp(scene: SynthScene, out_dir, progress=None) -> Path:
    """Write one scan under ``out_dir/<scene_id>/`` (and the label map at ``out_dir``); returns the scene folder."""
    folder = Path(out_dir) / scene.scene_id
    (folder / "scans").mkdir(parents=True, exist_ok=True)
    (folder / "iphone").mkdir(parents=True, exist_ok=True)
    write_label_map(Path(out_dir) / LABEL_MAP_NAME)
    mesh = scene.mesh
    write_ply(folder / MESH_PATH, mesh.vertices, mesh.triangles, mesh.colors, comment=None, alpha=False)
    segments = {"sceneId": scene.scene_id, "segIndices": list(range(len(mesh.vertices)))}
    (folder / SEGMENTS_PATH).write_text(json.dumps(segments) + "\n")
    (folder / ANNOTATION_PATH).write_text(json.dumps(_annotation(scene)) + "\n")
    repeats = held_frames(scene.fps, IPHONE_FPS, "iPhone")
    (folder / POSES_PATH).write_text(json.dumps(_pose_entries(scene, repeats), indent=1) + "\n")
    renderer = FrameRenderer(scene)
    write_held_video(scene, folder / VIDEO_NAME, IPHONE_FPS, repeats, progress, renderer=renderer)
    # FFmpeg's Matroska muxer draws random UIDs: fix them so the same seed gives the same bytes.
    make_deterministic(folder / VIDEO_NAME, hashlib.md5(f"scan2qa-synthetic/{scene.seed}/{scene.scene_id}".encode()).digest())
    write_depth_bin(scene, folder / DEPTH_NAME, renderer, repeats)
    (folder / f"{scene.scene_id}{TRUTH_SUFFIX}").write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
