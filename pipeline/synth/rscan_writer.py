"""Write a synthetic scene in 3RScan's layout, with 3RScan's conventions.

3RScan stores what the synthetic scene knows in its own shapes: per-vertex
``objectId`` in ``labels.instances.annotated.v2.ply`` (0 reserved for
unannotated surface, so object ``k`` is stored as ``k + 1``) with the release's
header property for property (``float`` xyz, ``uchar`` rgb, ``ushort``
``objectId``/``globalId``, ``uchar`` ``NYU40``/``Eigen13``/``RIO27``, faces
``list uchar uint``; the C++ toolkit's ``RIOPlyData`` reads NYU40 into a
``uint8`` vector), boxes in
``semseg.v2.json`` with *row* ``normalizedAxes``, the geometry also as
``mesh.refined.v2.obj``, and the sequence with images stored rotated by 90°
(the synthetic upright image turned counter-clockwise, as a sensor held
sideways records it). Each pose and the intrinsics in ``_info.txt`` describe
the stored (rotated) image (``pipeline.geometry.turned_camera``, pixel centres
at integer coordinates): camera axes x' = y, y' = -x, and
``fx' = fy, fy' = fx, cx' = cy, cy' = W - 1 - cx``. Poses are written with full
float precision, so a reader recovers them exactly. 3RScan has no timestamps;
every frame is written and the reader plays them at 4 fps, so the all-frame
sequence holds the same frames as the 10 fps synthetic stream.

The scan folder is named by a UUID derived from the synthetic scene id (3RScan
ids are UUIDs); ``<folder>/scan2qa_truth.json`` carries the exact truth.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import cv2
import numpy as np
import polars as pl

from pipeline.geometry.obb import normalized_axes_of
from pipeline.geometry.turned_camera import turned_intrinsics
from pipeline.synth.label_map import nyu40_ids, write_label_map
from pipeline.formats.ply import write_ply
from pipeline.synth.render import JPEG_QUALITY, FrameRenderer
from pipeline.synth.scannet_writer import LABEL_MAP_NAME, truth_dict
from pipeline.synth.scene import SynthScene

TRUTH_NAME = "scan2qa_truth.json"
# NYU40 -> Eigen13 as 3RScan's data/mapping.txt assigns it (its ``Eigen`` column; one value per NYU40 class there).
EIGEN13_OF_NYU40 = {
    1: 12, 2: 5, 3: 6, 4: 1, 5: 4, 6: 9, 7: 10, 8: 0, 9: 13, 10: 6, 11: 8, 12: 6, 13: 7, 14: 10, 15: 6, 16: 7, 17: 6,
    18: 7, 19: 7, 20: 7, 21: 7, 22: 3, 23: 2, 24: 6, 25: 11, 26: 7, 27: 7, 28: 7, 29: 7, 30: 7, 32: 6, 33: 6, 34: 6,
    35: 7, 36: 6, 37: 7, 38: 0, 39: 6, 40: 7,
}
# RIO27 class of the NYU40 class with the same name (3RScan's repository has no NYU40 -> RIO27 table):
# 1 wall .. 25 bathtub, 26 object (NYU40 otherprop); classes without a namesake stay 0 (unlabeled).
RIO27_OF_NYU40 = {
    1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 15: 11, 16: 12, 18: 13, 21: 14, 22: 15,
    24: 16, 25: 17, 27: 18, 29: 20, 32: 21, 33: 22, 34: 23, 35: 24, 36: 25, 40: 26,
}
RIO27_OF_LABEL = {"plant": 19, "blanket": 27}
# Stored camera axes in the upright camera's frame: columns x' = y, y' = -x (image turned 90° counter-clockwise).
STORED_CAMERA = np.array([[0.0, -1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def rscan_scan_id(scene: SynthScene) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"scan2qa-synthetic/{scene.scene_id}"))


STORED_TURN_CW = 270  # the stored image is the upright one turned 90° counter-clockwise


def stored_intrinsics(k: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pinhole matrix of the image turned 90° counter-clockwise (pixel centres at integer coordinates)."""
    return turned_intrinsics(k, width, height, STORED_TURN_CW)[0]


def _full(values) -> str:
    return " ".join(repr(float(v)) for v in np.asarray(values, dtype=float).ravel())


def _info_txt(k_stored: np.ndarray, width: int, height: int, frames: int) -> str:
    k4 = np.eye(4)
    k4[:3, :3] = k_stored
    lines = [
        "m_versionNumber = 4",
        "m_sensorName = scan2qa synthetic (ray cast)",
        f"m_colorWidth = {width}",
        f"m_colorHeight = {height}",
        f"m_depthWidth = {width}",
        f"m_depthHeight = {height}",
        "m_depthShift = 1000",
        f"m_calibrationColorIntrinsic = {_full(k4)}",
        f"m_calibrationColorExtrinsic = {_full(np.eye(4))}",
        f"m_calibrationDepthIntrinsic = {_full(k4)}",
        f"m_calibrationDepthExtrinsic = {_full(np.eye(4))}",
        f"m_frames.size = {frames}",
    ]
    return "\n".join(lines) + "\n"


def _semseg(scene: SynthScene, scan_id: str) -> dict:
    groups = []
    for obj in scene.objects:
        box = obj.box.to_oriented()
        start, stop = scene.object_vertex_ranges[obj.object_id]
        segments = sorted({int(s) for s in np.unique(scene.segments[start:stop])})
        groups.append(
            {
                "id": obj.object_id + 1,
                "objectId": obj.object_id + 1,
                "label": obj.label,
                "segments": segments,
                "obb": {
                    "centroid": [float(v) for v in box.center],
                    "axesLengths": [float(v) for v in box.extent],
                    "normalizedAxes": [float(v) for v in normalized_axes_of(box)],
                },
            }
        )
    segments_file = "mesh.refined.0.010000.segs.v2.json"
    return {"scan_id": scan_id, "appId": "scan2qa-synthetic", "segGroups": groups, "segmentsFile": segments_file}


def _write_obj(path: Path, vertices: np.ndarray, triangles: np.ndarray) -> None:
    v = pl.DataFrame({"k": "v", "x": vertices[:, 0], "y": vertices[:, 1], "z": vertices[:, 2]})
    f = pl.DataFrame({"k": "f", "a": triangles[:, 0] + 1, "b": triangles[:, 1] + 1, "c": triangles[:, 2] + 1})
    with open(path, "wb") as fh:
        fh.write(b"# scan2qa synthetic scan, +Z up, metres\n")
        v.write_csv(fh, separator=" ", include_header=False, float_precision=6, quote_style="never")
        f.write_csv(fh, separator=" ", include_header=False, quote_style="never")


def write_3rscan(scene: SynthScene, out_dir, scan_id: str | None = None, progress=None) -> Path:
    """Write one scan under ``out_dir/<scan uuid>/`` (and the label map at ``out_dir``); returns the scan folder."""
    root = Path(out_dir)
    scan_id = scan_id or rscan_scan_id(scene)
    folder = root / scan_id
    seq = folder / "sequence"
    seq.mkdir(parents=True, exist_ok=True)
    write_label_map(root / LABEL_MAP_NAME)
    mesh = scene.mesh
    vertex_count = len(mesh.vertices)
    owner = np.zeros(vertex_count, dtype=np.uint16)
    nyu, eigen, rio = (np.zeros(vertex_count, dtype=np.uint8) for _ in range(3))
    nyu_of = nyu40_ids()
    for obj in scene.objects:
        start, stop = scene.object_vertex_ranges[obj.object_id]
        owner[start:stop] = obj.object_id + 1
        nyu40 = nyu_of[obj.label]
        nyu[start:stop] = nyu40
        eigen[start:stop] = EIGEN13_OF_NYU40.get(nyu40, 0)
        rio[start:stop] = RIO27_OF_LABEL.get(obj.label, RIO27_OF_NYU40.get(nyu40, 0))
    write_ply(
        folder / "labels.instances.annotated.v2.ply",
        mesh.vertices,
        mesh.triangles,
        mesh.colors,
        vertex_properties={"objectId": owner, "globalId": owner, "NYU40": nyu, "Eigen13": eigen, "RIO27": rio},
        comment=None,
        alpha=False,
        index_type="uint",
    )
    _write_obj(folder / "mesh.refined.v2.obj", mesh.vertices, mesh.triangles)
    (folder / "semseg.v2.json").write_text(json.dumps(_semseg(scene, scan_id), indent=1) + "\n")
    segs = {"sceneId": scan_id, "segIndices": [int(s) for s in scene.segments]}
    (folder / "mesh.refined.0.010000.segs.v2.json").write_text(json.dumps(segs) + "\n")
    n = len(scene.poses)
    k_stored = stored_intrinsics(scene.intrinsics, scene.width, scene.height)
    (seq / "_info.txt").write_text(_info_txt(k_stored, scene.height, scene.width, n))
    renderer = FrameRenderer(scene)
    for i in range(n):
        frame = renderer.render(i)
        color = cv2.rotate(frame.color_bgr, cv2.ROTATE_90_COUNTERCLOCKWISE)
        ok, jpg = cv2.imencode(".jpg", color, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise RuntimeError("JPEG encoding failed")
        (seq / f"frame-{i:06d}.color.jpg").write_bytes(jpg.tobytes())
        cv2.imwrite(str(seq / f"frame-{i:06d}.depth.pgm"), cv2.rotate(frame.depth_mm, cv2.ROTATE_90_COUNTERCLOCKWISE))
        pose = scene.poses[i] @ STORED_CAMERA
        (seq / f"frame-{i:06d}.pose.txt").write_text("".join(_full(row) + "\n" for row in pose))
        if progress is not None:
            progress(i + 1, n)
    (folder / TRUTH_NAME).write_text(json.dumps(truth_dict(scene), indent=1) + "\n")
    return folder
