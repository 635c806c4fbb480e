"""Every synthetic layout opened the way its dataset's official toolkit opens a download.

Each test re-implements, from the toolkit's documented formats, the few
functions it needs (no toolkit code is vendored) and compares what they load
with the generator's truth sidecar: poses, intrinsics, per-vertex instance
labels, box corners, and depth back-projected at integer pixel centres onto the
mesh. The toolkit files followed are named in each test's docstring (read from
the public repositories: ScanNet/ScanNet, scannetpp/scannetpp, apple/ARKitScenes,
WaldJohannaU/3RScan, smartscenes/multiscan).
"""

from __future__ import annotations

import glob
import json
import os
import struct
import zlib
from functools import partial

import cv2
import numpy as np
import open3d as o3d
import pytest
from plyfile import PlyData

from pipeline.geometry.obb import gravity_aligned_obb
from pipeline.geometry.turned_camera import rotated_camera
from pipeline.scene.readers.arkitscenes import SKY_ROTATION
from pipeline.synth.arkitscenes_writer import write_arkitscenes
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene
from tests.box_checks import sorted_corners

SEED = 7
FRAMES = 3
SKY = "Left"
TRUTH_DIGITS = 1e-7  # the sidecar's boxes carry 8 decimals
MEDIAN_MM = 0.5e-3  # acceptance: rendered depth back-projects onto the mesh within 0.5 mm median
WRITERS = {
    "scannet": write_scannet,
    "scannetpp": write_scannetpp,
    "arkitscenes": partial(write_arkitscenes, sky_direction=SKY),
    "3rscan": write_3rscan,
    "multiscan": write_multiscan,
}
# The real labels.instances.annotated.v2.ply header, property for property.
RSCAN_V2_VERTEX = [
    ("x", "float"), ("y", "float"), ("z", "float"), ("red", "uchar"), ("green", "uchar"), ("blue", "uchar"),
    ("objectId", "ushort"), ("globalId", "ushort"), ("NYU40", "uchar"), ("Eigen13", "uchar"), ("RIO27", "uchar"),
]
# MultiScan's documented <scan>.ply header (docs/read-the-docs/dataset/files/annotation.rst).
MULTISCAN_VERTEX = [
    ("x", "double"), ("y", "double"), ("z", "double"), ("nx", "double"), ("ny", "double"), ("nz", "double"),
    ("red", "uchar"), ("green", "uchar"), ("blue", "uchar"), ("alpha", "uchar"),
]
MULTISCAN_FACE = [("vertex_indices", "list uchar int"), ("objectId", "ushort"), ("partId", "ushort")]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    scene = generate_scene(SEED, 0, FRAMES)
    root = tmp_path_factory.mktemp("official")
    folders = {name: write(scene, root / name) for name, write in WRITERS.items()}
    # The sidecar is <scan id>.scan2qa_truth.json, or scan2qa_truth.json in a 3RScan folder.
    truths = {name: json.loads(next(folder.glob("*scan2qa_truth.json")).read_text()) for name, folder in folders.items()}
    mesh = o3d.t.geometry.RaycastingScene()
    mesh.add_triangles(
        o3d.core.Tensor(scene.mesh.vertices.astype(np.float32)), o3d.core.Tensor(scene.mesh.triangles.astype(np.uint32))
    )
    return {"scene": scene, "folders": folders, "truths": truths, "mesh": mesh}


# --- shared checks ------------------------------------------------------------------------------


def median_distance(layouts, points: np.ndarray) -> float:
    distances = layouts["mesh"].compute_distance(o3d.core.Tensor(points.astype(np.float32))).numpy()
    return float(np.median(distances))


def back_project(depth_m: np.ndarray, k: np.ndarray, camera_to_world: np.ndarray) -> np.ndarray:
    """``camera_to_world @ K^-1 [u d, v d, d]`` at integer pixel coordinates, valid depth only."""
    v, u = np.nonzero(depth_m > 0)
    d = depth_m[v, u].astype(np.float64)
    camera = np.linalg.inv(k) @ np.stack([u * d, v * d, d])
    return (camera_to_world[:3, :3] @ camera).T + camera_to_world[:3, 3]


def truth_corners(obj: dict) -> np.ndarray:
    return sorted_corners(obj["box"]["center"], obj["box"]["extent"], obj["box"]["rotation"])


def row_axes_corners(centroid, lengths, normalized_axes) -> np.ndarray:
    """Corners of a box whose ``normalizedAxes`` hold one axis per row (ARKitScenes ``compute_box_3d``)."""
    rows = np.asarray(normalized_axes, dtype=float).reshape(3, 3)
    return sorted_corners(centroid, lengths, rows.T)


def assert_instances(truth: dict, vertex_ids: np.ndarray, offset: int) -> None:
    """Every object's vertices carry its id (+ the layout's offset), and every vertex is annotated."""
    assert len(vertex_ids) == sum(o["vertex_range"][1] - o["vertex_range"][0] for o in truth["objects"])
    for obj in truth["objects"]:
        start, stop = obj["vertex_range"]
        assert np.all(vertex_ids[start:stop] == obj["id"] + offset), obj["label"]


def header_properties(path) -> dict[str, list[tuple[str, str]]]:
    """element -> [(property, type)] as the PLY header declares them."""
    with open(path, "rb") as fh:
        head = fh.read(4096).split(b"end_header")[0].decode("ascii").splitlines()
    out, element = {}, None
    for line in head:
        words = line.split()
        if words[:1] == ["element"]:
            element = words[1]
            out[element] = []
        elif words[:1] == ["property"]:
            out[element].append((words[-1], " ".join(words[1:-1])))
    return out


# --- ScanNet ----------------------------------------------------------------------------------------


def test_scannet_loads_with_the_benchmark_scripts_logic(layouts):
    """ScanNet/ScanNet BenchmarkScripts/3d_helpers/export_train_mesh_for_evaluation.py (read_aggregation:
    instance = objectId + 1, read_segmentation), SensorData.py's export layout (pose/<i>.txt camera-to-world,
    intrinsic/intrinsic_*.txt, depth/<i>.png in mm) and the <scene>.txt axisAlignment."""
    folder, truth = layouts["folders"]["scannet"], layouts["truths"]["scannet"]
    sid = folder.name
    segs = json.loads((folder / f"{sid}_vh_clean_2.0.010000.segs.json").read_text())["segIndices"]
    seg_to_verts: dict[int, list[int]] = {}
    for i, seg in enumerate(segs):
        seg_to_verts.setdefault(seg, []).append(i)
    instance = np.zeros(len(segs), dtype=np.uint32)
    for group in json.loads((folder / f"{sid}.aggregation.json").read_text())["segGroups"]:
        for seg in group["segments"]:
            instance[seg_to_verts[seg]] = group["objectId"] + 1
    assert_instances(truth, instance, offset=1)
    info = dict(line.split(" = ", 1) for line in (folder / f"{sid}.txt").read_text().splitlines())
    align = np.array(info["axisAlignment"].split(), dtype=float).reshape(4, 4)
    vertices = np.asarray([[v["x"], v["y"], v["z"]] for v in PlyData.read(str(folder / f"{sid}_vh_clean_2.ply"))["vertex"]])
    aligned = vertices @ align[:3, :3].T + align[:3, 3]
    for obj in truth["objects"]:
        start, stop = obj["vertex_range"]
        box = gravity_aligned_obb(aligned[start:stop])
        assert np.abs(sorted_corners(box.center, box.extent, box.rotation) - truth_corners(obj)).max() <= 0.01
    k_color = np.loadtxt(folder / "intrinsic" / "intrinsic_color.txt")[:3, :3]
    k_depth = np.loadtxt(folder / "intrinsic" / "intrinsic_depth.txt")[:3, :3]
    np.testing.assert_array_equal(k_color, truth["intrinsics"]["matrix"])
    for i, expected in enumerate(truth["poses"]):
        pose = align @ np.loadtxt(folder / "pose" / f"{i}.txt")
        np.testing.assert_allclose(pose, expected, rtol=0, atol=1e-12)
        depth = cv2.imread(str(folder / "depth" / f"{i}.png"), cv2.IMREAD_UNCHANGED) / 1000.0
        assert median_distance(layouts, back_project(depth, k_depth, pose)) <= MEDIAN_MM


# --- ScanNet++ --------------------------------------------------------------------------------------


def decode_depth_bin(path, height: int = 192, width: int = 256) -> list[np.ndarray]:
    """iphone/prepare_iphone_data.py extract_depth: one raw-deflate float32 stream, else per-frame records
    (uint32 size + LZ4 uint16 mm or raw-deflate float32 m; LZ4 is not installed here, as in the toolkit's fallback)."""
    data = open(path, "rb").read()
    try:
        return list(np.frombuffer(zlib.decompress(data, wbits=-zlib.MAX_WBITS), dtype=np.float32).reshape(-1, height, width))
    except (zlib.error, ValueError):
        pass
    frames, offset = [], 0
    while offset < len(data):
        (size,) = struct.unpack_from("<I", data, offset)
        record = zlib.decompress(data[offset + 4 : offset + 4 + size], wbits=-zlib.MAX_WBITS)
        frames.append(np.frombuffer(record, dtype=np.float32).reshape(height, width))
        offset += 4 + size
    return frames


def test_scannetpp_loads_with_the_toolkits_logic(layouts):
    """scannetpp/scannetpp common/utils/anno.py load_annotation (vertex_obj_ids[segments] = objectId, 0 = none),
    common/scene_release.py paths (scans/, iphone/rgb.mkv, iphone/depth.bin, pose_intrinsic_imu.json),
    iphone/prepare_iphone_data.py extract_depth and iphone/arkit_pcl.py backproject (K scaled to the depth size)."""
    folder, truth = layouts["folders"]["scannetpp"], layouts["truths"]["scannetpp"]
    scans = folder / "scans"
    segments = json.loads((scans / "segments.json").read_text())["segIndices"]
    assert segments == list(range(len(segments)))  # each vertex its own segment
    anno = json.loads((scans / "segments_anno.json").read_text())
    vertex_obj_ids = np.zeros(len(segments), dtype=np.int32)
    for group in anno["segGroups"]:
        vertex_obj_ids[np.array(group["segments"], dtype=np.int32)] = group["objectId"]
    assert_instances(truth, vertex_obj_ids, offset=1)
    assert 0 not in {g["objectId"] for g in anno["segGroups"]}  # the floor is an object, not "no object"
    for group, obj in zip(anno["segGroups"], truth["objects"]):
        obb = group["obb"]
        corners = row_axes_corners(obb["centroid"], obb["axesLengths"], obb["normalizedAxes"])
        assert np.abs(corners - truth_corners(obj)).max() <= 1e-6
    frames = json.loads((folder / "iphone" / "pose_intrinsic_imu.json").read_text())
    video = cv2.VideoCapture(str(folder / "iphone" / "rgb.mkv"))
    assert video.isOpened() and int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == len(frames) == 6 * FRAMES
    video.release()
    depth_frames = decode_depth_bin(folder / "iphone" / "depth.bin")
    assert len(depth_frames) == len(frames)
    width = truth["intrinsics"]["width"]
    for i, expected in enumerate(truth["poses"]):
        entry = frames[f"frame_{6 * i:06d}"]
        pose, k = np.array(entry["aligned_pose"]).reshape(4, 4), np.array(entry["intrinsic"]).reshape(3, 3)
        np.testing.assert_array_equal(pose, expected)
        np.testing.assert_allclose(k, truth["intrinsics"]["matrix"], rtol=0, atol=1e-9)
        depth = depth_frames[6 * i]
        k_depth = k.copy()
        k_depth[:2, :] *= depth.shape[1] / width  # arkit_pcl: fx, fy, cx, cy *= depth_w / image_w
        assert median_distance(layouts, back_project(depth, k_depth, pose)) <= MEDIAN_MM
        # extract_depth's PNGs: (depth * 1000).astype(uint16) truncates, so up to 1 mm shorter.
        png = (depth * 1000).astype(np.uint16) / 1000.0
        assert median_distance(layouts, back_project(png, k_depth, pose)) <= 1e-3


# --- ARKitScenes ------------------------------------------------------------------------------------

ARKITSCENES_CLASSES = (  # threedod/benchmark_scripts/utils/taxonomy.py class_names
    "cabinet", "refrigerator", "shelf", "stove", "bed", "sink", "washer", "toilet", "bathtub", "oven",
    "dishwasher", "fireplace", "stool", "chair", "table", "tv_monitor", "sofa",
)


def test_arkitscenes_loads_with_the_ten_fps_data_loader_logic(layouts):
    """apple/ARKitScenes threedod/benchmark_scripts/utils/tenFpsDataLoader.py: frame ids from lowres_depth/*.png
    (name.split("_")[1]), video id = path component [-3], TrajStringToMatrix (axis-angle world-to-camera,
    inverted), st2_camera_intrinsics (.pincam), generate_point (K^-1 [u d, v d, d], depth / 1000) and extract_gt
    with box_utils.compute_box_3d (row axes)."""
    folder, truth = layouts["folders"]["arkitscenes"], layouts["truths"]["arkitscenes"]
    root = str(folder / f"{folder.name}_frames")
    depth_folder = os.path.join(root, "lowres_depth")
    frame_ids = sorted(os.path.basename(x).split(".png")[0].split("_")[1] for x in glob.glob(os.path.join(depth_folder, "*.png")))
    video_id = depth_folder.split("/")[-3]
    assert video_id == folder.name and video_id.isdigit() and len(video_id) == 8
    assert len(frame_ids) == FRAMES
    poses = {}
    for line in open(os.path.join(root, "lowres_wide.traj")).read().splitlines():
        tokens = line.split()
        extrinsics = np.eye(4)
        extrinsics[:3, :3] = cv2.Rodrigues(np.array(tokens[1:4], dtype=float))[0]
        extrinsics[:3, 3] = np.array(tokens[4:7], dtype=float)
        poses[f"{round(float(tokens[0]), 3):.3f}"] = np.linalg.inv(extrinsics)
    turn = (360 - SKY_ROTATION[SKY]) % 360  # how the stored frames are turned from sky-up
    k_true, w, h = np.array(truth["intrinsics"]["matrix"]), truth["intrinsics"]["width"], truth["intrinsics"]["height"]
    for i, frame_id in enumerate(frame_ids):
        w_, h_, fx, fy, cx, cy = np.loadtxt(os.path.join(root, "lowres_wide_intrinsics", f"{video_id}_{frame_id}.pincam"))
        k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
        pose = poses[frame_id]
        expected_pose, expected_k, ew, eh = rotated_camera(np.array(truth["poses"][i]), k_true, w, h, turn)
        np.testing.assert_allclose(pose, expected_pose, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(k, expected_k)
        depth = cv2.imread(os.path.join(depth_folder, f"{video_id}_{frame_id}.png"), -1)
        image = cv2.imread(os.path.join(root, "lowres_wide", f"{video_id}_{frame_id}.png"))
        assert depth.shape == image.shape[:2] == (eh, ew) == (int(h_), int(w_))
        assert median_distance(layouts, back_project(depth / 1000.0, k, pose)) <= MEDIAN_MM
    gt = json.loads((folder / f"{video_id}_3dod_annotation.json").read_text())
    assert gt["skipped"] is False and len(gt["data"]) == len(truth["objects"])
    vertices = layouts["scene"].mesh.vertices
    kept = 0
    for entry, obj in zip(gt["data"], truth["objects"]):
        obb = entry["segments"]["obbAligned"]
        corners = row_axes_corners(obb["centroid"], obb["axesLengths"], obb["normalizedAxes"])
        assert np.abs(corners - truth_corners(obj)).max() <= 0.01
        # ARKitScenes has no per-vertex instances: the box is the object's; its vertices lie in it.
        start, stop = obj["vertex_range"]
        rows = np.array(obb["normalizedAxes"]).reshape(3, 3)
        local = (vertices[start:stop] - obb["centroid"]) @ rows.T
        assert np.all(np.abs(local) <= np.array(obb["axesLengths"]) / 2 + 1e-6)
        label = entry["label"]
        for delimiter in (" ", "-", "/"):
            label = label.replace(delimiter, "_")
        kept += label in ARKITSCENES_CLASSES
    assert kept > 0  # extract_gt keeps the taxonomy's classes (chair, table, sofa...) and skips the others


# --- 3RScan -----------------------------------------------------------------------------------------


def test_3rscan_loads_with_the_rio_lib_logic(layouts):
    """WaldJohannaU/3RScan c++/rio_lib: types.h/types.cc RIOPlyData (objectId ushort, NYU40 uchar vectors),
    sequence.cc LoadPose (row-major camera-to-world), LoadInfoIntrinsics (_info.txt parts 0, 5, 2, 6) and
    Backproject (depth mm at integer (col, row) with the depth intrinsics); semseg.v2.json obb rows."""
    folder, truth = layouts["folders"]["3rscan"], layouts["truths"]["3rscan"]
    ply_path = folder / "labels.instances.annotated.v2.ply"
    header = header_properties(ply_path)
    assert header["vertex"] == RSCAN_V2_VERTEX
    assert header["face"] == [("vertex_indices", "list uchar uint")]
    vertex = PlyData.read(str(ply_path))["vertex"].data
    assert vertex["objectId"].dtype == np.uint16 and vertex["NYU40"].dtype == np.uint8
    assert_instances(truth, vertex["objectId"], offset=1)
    for obj in truth["objects"]:
        start, stop = obj["vertex_range"]
        assert np.all(vertex["NYU40"][start:stop] == obj["nyu40id"])
    semseg = json.loads((folder / "semseg.v2.json").read_text())
    for group, obj in zip(semseg["segGroups"], truth["objects"]):
        assert group["objectId"] == obj["id"] + 1
        obb = group["obb"]
        assert np.abs(row_axes_corners(obb["centroid"], obb["axesLengths"], obb["normalizedAxes"]) - truth_corners(obj)).max() <= TRUTH_DIGITS

    def intrinsics(depth: bool) -> tuple[np.ndarray, int, int]:
        tag, tw, th = ("m_calibrationDepthIntrinsic", "m_depthWidth", "m_depthHeight") if depth else (
            "m_calibrationColorIntrinsic", "m_colorWidth", "m_colorHeight")
        info = dict(line.split(" = ", 1) for line in (folder / "sequence" / "_info.txt").read_text().splitlines())
        parts = info[tag].split(" ")
        fx, fy, cx, cy = (float(parts[i]) for i in (0, 5, 2, 6))
        return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]]), int(info[tw]), int(info[th])

    k, w, h = intrinsics(depth=False)
    k_depth, _, _ = intrinsics(depth=True)
    k_true = np.array(truth["intrinsics"]["matrix"])
    for i, expected in enumerate(truth["poses"]):
        pose = np.loadtxt(folder / "sequence" / f"frame-{i:06d}.pose.txt")
        expected_pose, expected_k, ew, eh = rotated_camera(np.array(expected), k_true, 640, 480, 270)  # stored sideways
        np.testing.assert_array_equal(pose, expected_pose)
        np.testing.assert_array_equal(k, expected_k)
        assert (w, h) == (ew, eh)
        depth = cv2.imread(str(folder / "sequence" / f"frame-{i:06d}.depth.pgm"), -1)
        assert depth.dtype == np.uint16 and depth.shape == (h, w)
        assert median_distance(layouts, back_project(depth / 1000.0, k_depth, pose)) <= MEDIAN_MM


# --- MultiScan --------------------------------------------------------------------------------------


def test_multiscan_loads_with_the_preprocessing_logic(layouts):
    """smartscenes/multiscan dataset/core.py Preprocess (_construct_mesh reads x..z, nx..nz, red..blue;
    semseg_triangles/object_triangles/part_triangles from the face objectId/partId), gen_instsegm_dataset.py
    (vertices of an object's triangles), gen_articulated_dataset.py (parts[part_id - 1], obb front/up),
    reconstruction/scripts/bridge.py get_meta (streams[0] colour, streams[1] depth resolution, depth_unit),
    all_cameras (column-major transform @ diag(1, -1, -1, 1), K_depth = diag(dw/cw, dh/ch, 1) K) and
    raw_depthframe (float16 frames of the raw-deflate .depth.zlib, utils.decompress)."""
    folder, truth = layouts["folders"]["multiscan"], layouts["truths"]["multiscan"]
    scan_id = folder.name
    ply_path = folder / f"{scan_id}.ply"
    header = header_properties(ply_path)
    assert header["vertex"] == MULTISCAN_VERTEX and header["face"] == MULTISCAN_FACE
    ply = PlyData.read(str(ply_path))
    vertices = np.column_stack([ply["vertex"][c] for c in "xyz"])
    normals = np.column_stack([ply["vertex"][c] for c in ("nx", "ny", "nz")])
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=1e-9)
    triangles = np.vstack(ply["face"].data["vertex_indices"])
    object_ids, part_ids = ply["face"].data["objectId"], ply["face"].data["partId"]
    annotations = json.loads((folder / f"{scan_id}.annotations.json").read_text())
    parts = annotations["parts"]
    instance = np.zeros(len(vertices), dtype=np.int64)
    for obj, expected in zip(annotations["objects"], truth["objects"]):
        assert obj["objectId"] == expected["id"] + 1
        faces = np.flatnonzero(object_ids == obj["objectId"])
        instance[np.unique(triangles[faces].ravel())] = obj["objectId"]
        covered = []
        for part_id in obj["partIds"]:
            assert parts[part_id - 1]["partId"] == part_id
            covered.append(np.flatnonzero((object_ids == obj["objectId"]) & (part_ids == part_id)))
            assert len(covered[-1]) > 0
        assert np.array_equal(np.sort(np.concatenate(covered)), faces)
        obb = obj["obb"]
        assert np.abs(row_axes_corners(obb["centroid"], obb["axesLengths"], obb["normalizedAxes"]) - truth_corners(expected)).max() <= TRUTH_DIGITS
        assert {tuple(obb["front"]), tuple(obb["up"])} <= {tuple(r) for r in np.array(obb["normalizedAxes"]).reshape(3, 3)} | {
            tuple(-r) for r in np.array(obb["normalizedAxes"]).reshape(3, 3)}
    assert_instances(truth, instance, offset=1)
    meta = json.loads((folder / f"{scan_id}.json").read_text())
    color_w, color_h = meta["streams"][0]["resolution"][1], meta["streams"][0]["resolution"][0]
    depth_w, depth_h = meta["streams"][1]["resolution"][1], meta["streams"][1]["resolution"][0]
    num_frames = min(meta["streams"][1]["number_of_frames"], meta["streams"][0]["number_of_frames"])
    assert (color_w, color_h) == (truth["intrinsics"]["width"], truth["intrinsics"]["height"])
    assert meta.get("depth_unit", "m") == "m" and num_frames == 6 * FRAMES
    raw = zlib.decompressobj(-zlib.MAX_WBITS)
    depth_bytes = raw.decompress((folder / f"{scan_id}.depth.zlib").read_bytes()) + raw.flush()
    depth_frames = np.frombuffer(depth_bytes, dtype=np.float16).reshape(-1, depth_h, depth_w)
    assert len(depth_frames) == num_frames
    align = np.array(json.loads((folder / f"{scan_id}.align.json").read_text())["coordinate_transform"]).reshape(4, 4).T
    lines = (folder / f"{scan_id}.jsonl").read_text().splitlines()
    for i, expected in enumerate(truth["poses"]):
        cam = json.loads(lines[6 * i])
        c = np.asarray(cam["transform"]).reshape(4, 4).transpose() @ np.diag([1, -1, -1, 1])
        c = c / c[3][3]
        pose = np.linalg.inv(align) @ c  # ARKit world -> the mesh's frame
        np.testing.assert_allclose(pose, expected, rtol=0, atol=1e-12)
        k = np.asarray(cam.get("intrinsics", meta["streams"][0]["intrinsics"])).reshape(3, 3).transpose()
        np.testing.assert_array_equal(k, truth["intrinsics"]["matrix"])
        k_depth = np.diag([depth_w / color_w, depth_h / color_h, 1.0]) @ k
        depth = depth_frames[6 * i].astype(np.float32)
        # float16 metres: a half-ulp is up to 2 mm at 4-8 m, so the median stays near a millimetre at most.
        assert median_distance(layouts, back_project(depth, k_depth, pose)) <= 1.5e-3
