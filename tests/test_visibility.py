from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.frames.budgets import mark_all_frame, sample_frames
from pipeline.geometry.raycast import MeshRaycaster, pixel_rays
from pipeline.scene.parsed import Mesh
from pipeline.visibility.cast import TriangleObjects, compute_visibility, frame_objects, object_visibility

KEY = "synthetic/synth0000_00"
K640 = np.array([[500.0, 0, 320], [0, 500, 240], [0, 0, 1]])


def box(lo, hi):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    t = np.array(
        [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
         [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    )
    return v, t


def assemble(parts):
    """parts: list of ((V, T), object_id) -> Mesh with triangle_object_ids."""
    vs, ts, ids, off = [], [], [], 0
    for (v, t), oid in parts:
        vs.append(v)
        ts.append(t + off)
        ids.append(np.full(len(t), oid))
        off += len(v)
    return Mesh(np.concatenate(vs), np.concatenate(ts).astype(np.int32), triangle_object_ids=np.concatenate(ids).astype(np.int32))


def look_at(eye, target, up=(0, 0, 1)):
    eye, target, up = (np.asarray(a, float) for a in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = x, y, z, eye
    return pose


def frames_table(poses, K=K640, width=640, height=480, key=KEY):
    rows = [
        {
            "key": key,
            "frame_index": i,
            "timestamp": i / 10.0,
            "pose": np.asarray(p).ravel().tolist(),
            "intrinsics": np.asarray(K).ravel().tolist(),
            "width": width,
            "height": height,
            "valid": bool(np.all(np.isfinite(p))),
            "in_all_frame": False,
        }
        for i, p in enumerate(poses)
    ]
    return mark_all_frame(schemas.from_rows("frames", rows), 10.0)


def test_object_behind_wall_is_never_visible():
    wall = box((2, -5, 0), (2.1, 5, 3))
    hidden = box((3, -0.5, 0), (4, 0.5, 1))
    front = box((1, 1, 0), (1.5, 1.5, 1))
    mesh = assemble([(wall, 1), (hidden, 2), (front, 3)])
    poses = [look_at((0, y, 1.2), (5, y * 0.5, 0.8)) for y in np.linspace(-2, 2, 12)]
    vis = compute_visibility(KEY, frames_table(poses), mesh)
    assert 2 not in vis["object_id"].to_list()
    assert {1, 3} <= set(vis["object_id"].to_list())


def test_box_seen_head_on_matches_analytic_projection():
    # 1 m x 1 m face at distance 3.9 m, centred: projection is (f/3.9)^2 = 128.2x128.2 px
    target = box((3.9, -0.5, 0.7), (4.9, 0.5, 1.7))
    mesh = assemble([(target, 7)])
    pose = look_at((0, 0, 1.2), (3.9, 0, 1.2))
    vis = compute_visibility(KEY, frames_table([pose]), mesh)
    row = vis.row(0, named=True)
    analytic = (500 * 1.0 / 3.9) ** 2 / (640 * 480)
    assert row["object_id"] == 7
    assert abs(row["frame_fraction"] - analytic) / analytic < 0.02
    # Pixel centres are integer coordinates: the face spans 320 +- 64.1 px, which holds the 129 centres 256..384.
    assert row["visible_pixels"] == 129 * 129
    x0, y0, x1, y1 = row["bbox"]
    assert abs((x1 - x0 + 1) - 128.2) <= 1 and abs((y1 - y0 + 1) - 128.2) <= 1


@pytest.mark.parametrize("cast", ["full", "adaptive"])
def test_counts_and_boxes_equal_renderer_pixel_for_pixel(cast):
    """Full cast: every row is the renderer's. Adaptive: the same objects per frame, and every exact row is."""
    rng = np.random.default_rng(3)
    parts = [(box((-6, -6, -0.1), (6, 6, 0)), 0), (box((-6, -6, 3), (6, 6, 3.1)), 1)]
    for oid in range(2, 14):
        c = rng.uniform(-4, 4, 2)
        s = rng.uniform(0.2, 1.2, 3)
        parts.append((box((c[0], c[1], 0), (c[0] + s[0], c[1] + s[1], s[2])), oid))
    parts.append((box((5, -6, 0), (5.1, 6, 3)), -1))  # unannotated wall
    mesh = assemble(parts)
    poses = [look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.8)) for a in np.linspace(0, 6, 7)]
    config = Config()
    config.visibility.cast = cast
    vis = compute_visibility(KEY, frames_table(poses), mesh, config)
    assert vis["pixels_exact"].all() == (cast == "full")
    rc = MeshRaycaster(mesh.vertices, mesh.triangles)
    lookup = TriangleObjects(mesh.triangle_object_ids, len(mesh.triangles))
    for i, pose in enumerate(poses):
        ids = lookup.object_image(rc.render(K640, pose, 640, 480).triangle_ids)
        expected = {}
        for oid in np.unique(ids[ids >= 0]):
            ys, xs = np.nonzero(ids == oid)
            expected[int(oid)] = (len(xs), [xs.min(), ys.min(), xs.max(), ys.max()])
        rows = vis.filter(pl.col("frame_index") == i)
        got = {r["object_id"]: (r["visible_pixels"], r["bbox"]) for r in rows.iter_rows(named=True)}
        expected = {k: (n, [int(b) for b in bb]) for k, (n, bb) in expected.items()}
        assert set(got) == set(expected)  # without objects every object is proven unseen where it is
        exact = set(rows.filter(pl.col("pixels_exact"))["object_id"].to_list())
        assert {k: got[k] for k in exact} == {k: expected[k] for k in exact}


def test_frame_objects_run_lengths_agree_with_naive_count():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, size=(37, 53))
    codes[:, 10:30] = 2
    fo = frame_objects(codes, background=4)
    for c, n, x0, y0, x1, y1 in zip(fo.codes, fo.counts, fo.x_min, fo.y_min, fo.x_max, fo.y_max):
        ys, xs = np.nonzero(codes == c)
        assert (n, x0, y0, x1, y1) == (len(xs), xs.min(), ys.min(), xs.max(), ys.max())
    assert 4 not in fo.codes.tolist()


def test_pixel_rays_is_unchanged_by_the_camera_cache():
    pose = look_at((0.3, -0.2, 1.4), (3, 1, 0.5))
    rays = pixel_rays(K640, pose, 640, 480)
    assert rays.shape == (480, 640, 6) and rays.dtype == np.float32
    u, v = 100, 50
    d = np.linalg.inv(K640) @ np.array([u, v, 1.0])  # pixel centres at integer coordinates
    assert np.allclose(rays[v, u, 3:], pose[:3, :3] @ d, atol=1e-5)
    assert np.allclose(rays[v, u, :3], pose[:3, 3], atol=1e-6)


def test_nan_pose_frames_are_never_cast():
    mesh = assemble([(box((4, -0.5, 0.7), (5, 0.5, 1.7)), 7)])
    good = look_at((0, 0, 1.2), (4, 0, 1.2))
    frames = frames_table([good, np.full((4, 4), np.nan), good])
    vis = compute_visibility(KEY, frames, mesh)
    assert vis["frame_index"].to_list() == [0, 2]


def test_empty_mesh_is_a_scan_error():
    mesh = Mesh(np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int32))
    with pytest.raises(ScanError, match="mesh has no triangles"):
        compute_visibility(KEY, frames_table([np.eye(4)]), mesh)


def test_reduced_resolution_keeps_fractions_close():
    parts = [(box((-6, -6, -0.1), (6, 6, 0)), 0)]
    for oid, (x, y) in enumerate([(3, 0), (2, 2), (-2, 3), (-3, -1), (1, -3)], start=1):
        parts.append((box((x, y, 0), (x + 0.8, y + 0.6, 0.9)), oid))
    mesh = assemble(parts)
    poses = [look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.5)) for a in np.linspace(0, 6, 10)]
    frames = frames_table(poses)
    full = compute_visibility(KEY, frames, mesh)
    half = compute_visibility(KEY, frames, mesh, resolution_scale=0.5)
    joined = full.join(half, on=["frame_index", "object_id"], how="left", suffix="_half")
    big = joined.filter(pl.col("frame_fraction") > 0.01)
    assert big.height > 0
    err = (big["frame_fraction"] - big["frame_fraction_half"]).abs().max()
    assert err < 0.005


def _vis(rows):
    return schemas.from_rows(
        "visibility",
        [
            {"key": KEY, "frame_index": f, "object_id": o, "visible_pixels": int(fr * 307200), "frame_fraction": fr,
             "bbox": [0, 0, 1, 1]}
            for f, o, fr in rows
        ],
    )


def _samples(n_all=100):
    ts = np.arange(n_all) / 10.0
    rows = [
        {"key": KEY, "frame_index": i, "timestamp": float(t), "pose": np.eye(4).ravel().tolist(),
         "intrinsics": K640.ravel().tolist(), "width": 640, "height": 480, "valid": True, "in_all_frame": False}
        for i, t in enumerate(ts)
    ]
    return sample_frames(mark_all_frame(schemas.from_rows("frames", rows), 10.0), Config())


def _objects(small_ids=()):
    return pl.DataFrame(
        {"key": [KEY] * 4, "object_id": [1, 2, 3, 4], "small_object": [o in small_ids for o in (1, 2, 3, 4)]}
    )


def test_budget_rule_fraction_and_pixel_floor():
    samples = _samples()
    in16 = samples.filter(pl.col("budget") == "16")["frame_index"].to_list()
    not16 = sorted(set(range(100)) - set(samples.filter(pl.col("budget") == "64")["frame_index"].to_list()))
    vis = _vis(
        [
            (in16[3], 1, 0.06),  # visible in every budget by fraction
            (not16[0], 2, 0.20),  # only in the all-frame budget
            (in16[5], 3, 0.001),  # 307 px: small object passes the floor
            (in16[6], 4, 0.0004),  # 123 px: under the floor
            (in16[7], 1, 0.03),
        ]
    )
    ov = object_visibility(KEY, vis, samples, _objects(small_ids=(3, 4)))
    get = {(r["budget"], r["object_id"]): r for r in ov.iter_rows(named=True)}
    r = get[("16", 1)]
    assert r["visible"] and r["rule"] == "fraction" and r["best_frame"] == in16[3] and r["frames_visible"] == 2
    assert r["first_frame"] == in16[3]
    assert not get[("16", 2)]["visible"] and get[("16", 2)]["best_frame"] is None
    assert get[("all", 2)]["visible"]
    assert get[("16", 3)]["visible"] and get[("16", 3)]["rule"] == "pixel_floor"
    assert not get[("16", 4)]["visible"] and get[("16", 4)]["rule"] == "pixel_floor"
    assert ov["budget"].unique(maintain_order=True).to_list() == ["16", "32", "64", "all"]
    assert ov.height == 16


def test_overrides_win_over_computed_values():
    samples = _samples()
    in16 = samples.filter(pl.col("budget") == "16")["frame_index"].to_list()
    vis = _vis([(in16[2], 1, 0.5), (in16[4], 2, 0.01)])
    overrides = schemas.from_rows(
        "visibility_overrides",
        [
            {"key": KEY, "object_id": 1, "frame_index": in16[2], "visible": False},
            {"key": KEY, "object_id": 2, "frame_index": in16[9], "visible": True},
            {"key": KEY, "object_id": 3, "frame_index": None, "visible": True},
            {"key": "other/scan", "object_id": 4, "frame_index": None, "visible": True},
        ],
    )
    ov = object_visibility(KEY, vis, samples, _objects(), overrides)
    get = {(r["budget"], r["object_id"]): r for r in ov.iter_rows(named=True)}
    assert not get[("16", 1)]["visible"] and get[("16", 1)]["rule"] == "override"
    assert get[("16", 1)]["max_fraction"] == 0.5  # measurements stay measured
    assert get[("16", 2)]["visible"] and get[("16", 2)]["first_frame"] == in16[9]
    assert get[("16", 3)]["visible"] and get[("16", 3)]["first_frame"] == in16[0]
    assert not get[("16", 4)]["visible"] and get[("16", 4)]["rule"] == "fraction"


def test_source_resolution_intrinsics_are_rescaled_to_the_output_size():
    target = box((3.9, -0.5, 0.7), (4.9, 0.5, 1.7))
    mesh = assemble([(target, 7)])
    pose = look_at((0, 0, 1.2), (3.9, 0, 1.2))
    # The same camera at 1280x960: pixel centres at integer coordinates, so c = (320 + 0.5) * 2 - 0.5 = 640.5.
    K_source = np.array([[1000.0, 0, 640.5], [0, 1000, 480.5], [0, 0, 1]])
    full = compute_visibility(KEY, frames_table([pose]), mesh)
    source = compute_visibility(KEY, frames_table([pose], K=K_source, width=1280, height=960), mesh)
    assert source.select("visible_pixels", "bbox").equals(full.select("visible_pixels", "bbox"))


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_boxes_follow_the_sky_up_rotation_of_the_video(degrees):
    parts = [(box((3, -1.5, 0.2), (3.5, -0.4, 0.9)), 1), (box((4, 0.3, 1.0), (4.3, 1.2, 2.2)), 2)]
    mesh = assemble(parts)
    pose = look_at((0, 0, 1.2), (4, 0, 1.2))
    frames = frames_table([pose])
    plain = compute_visibility(KEY, frames, mesh)
    turned = compute_visibility(KEY, frames, mesh, image_rotation=degrees)
    rc = MeshRaycaster(mesh.vertices, mesh.triangles)
    ids = TriangleObjects(mesh.triangle_object_ids, len(mesh.triangles)).object_image(
        rc.render(K640, pose, 640, 480).triangle_ids
    )
    rotated = np.rot90(ids, k=-degrees // 90)  # clockwise, as the video frames
    for r in turned.iter_rows(named=True):
        ys, xs = np.nonzero(rotated == r["object_id"])
        assert r["bbox"] == [xs.min(), ys.min(), xs.max(), ys.max()]
    assert turned["visible_pixels"].to_list() == plain["visible_pixels"].to_list()
