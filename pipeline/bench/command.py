"""``scan2qa bench <target>``: throughput of a pipeline step against a baseline measured in the same run.

A speed figure means little on a shared 2-core machine unless it is set
against the raw cost of the work underneath, measured seconds apart on the
same data. Each target builds its own input (no network data) and reports the
step's throughput, the baseline's, and their ratio. Targets register in
``BENCHES``; other steps add theirs the same way. Targets that drive Dagster,
the gate or a deployment (build, dataset, answers, scaling, latency) live above
``pipeline``, in ``benches/``, and register there.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import Config
from pipeline.frames.budgets import mark_all_frame
from pipeline.scene.parsed import Mesh
from pipeline.seeding import rng


@dataclass(frozen=True)
class Bench:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
    format: Callable[[dict], str]


BENCHES: dict[str, Bench] = {}


def register(name: str, bench: Bench) -> None:
    BENCHES[name] = bench


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for name, bench in BENCHES.items():
        p = sub.add_parser(name, help=bench.help, description=bench.help)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        bench.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    bench = BENCHES[args.target]
    result = bench.run(args)
    print(json.dumps(result, sort_keys=True) if args.json else bench.format(result))
    return 0


# --- synthetic room: a large mesh with many objects and a camera walk -------------------------------------------


def _grid_quad(origin: np.ndarray, u: np.ndarray, v: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A parallelogram ``origin + [0,1]u + [0,1]v`` split into n x n cells (2n² triangles)."""
    s = np.linspace(0.0, 1.0, n + 1)
    a, b = np.meshgrid(s, s, indexing="ij")
    verts = origin + a.reshape(-1, 1) * u + b.reshape(-1, 1) * v
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    p = (i * (n + 1) + j).reshape(-1)
    tris = np.concatenate([np.stack([p, p + n + 1, p + n + 2], 1), np.stack([p, p + n + 2, p + 1], 1)])
    return verts, tris


def _box(lo: np.ndarray, hi: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    size = hi - lo
    ex, ey, ez = np.diag(size)
    faces = [
        (lo, ex, ey), (lo + ez, ey, ex), (lo, ez, ex), (lo + ey, ex, ez), (lo, ey, ez), (lo + ex, ez, ey),
    ]
    vs, ts, off = [], [], 0
    for origin, u, v in faces:
        fv, ft = _grid_quad(origin, u, v, n)
        vs.append(fv)
        ts.append(ft + off)
        off += len(fv)
    return np.concatenate(vs), np.concatenate(ts)


def synthetic_room(triangles: int = 150_000, objects: int = 80, seed: int = 0) -> Mesh:
    """An 8 x 6 x 3 m room (floor, ceiling, 4 walls) with ``objects`` boxes, subdivided to >= ``triangles``.

    Object ids: 0 floor, 1 ceiling, 2-5 walls, 6.. furniture (some stacked
    small boxes on top of larger ones, so small objects are partly occluded).
    """
    gen = rng(seed, "bench", "synthetic_room")
    size = np.array([8.0, 6.0, 3.0])
    structure = [
        (np.array([0, 0, 0.0]), np.array([size[0], 0, 0]), np.array([0, size[1], 0])),
        (np.array([0, 0, size[2]]), np.array([0, size[1], 0]), np.array([size[0], 0, 0])),
        (np.array([0, 0, 0.0]), np.array([size[0], 0, 0]), np.array([0, 0, size[2]])),
        (np.array([0, size[1], 0]), np.array([0, 0, size[2]]), np.array([size[0], 0, 0])),
        (np.array([0, 0, 0.0]), np.array([0, 0, size[2]]), np.array([0, size[1], 0])),
        (np.array([size[0], 0, 0]), np.array([0, size[1], 0]), np.array([0, 0, size[2]])),
    ]
    boxes = []
    for k in range(objects):
        if k % 4 == 3 and boxes:
            lo_b, hi_b = boxes[-1]
            s = gen.uniform(0.1, 0.3, 3)
            lo = np.array([lo_b[0], lo_b[1], hi_b[2]])
            boxes.append((lo, lo + s))
        else:
            s = gen.uniform([0.3, 0.3, 0.3], [1.2, 1.0, 1.6])
            wall_side = gen.integers(0, 4)
            x = gen.uniform(0.2, size[0] - s[0] - 0.2)
            y = gen.uniform(0.2, size[1] - s[1] - 0.2)
            if wall_side == 0:
                y = 0.05
            elif wall_side == 1:
                y = size[1] - s[1] - 0.05
            lo = np.array([x, y, 0.0])
            boxes.append((lo, lo + s))
    # Each structural quad gets n_s² x 2 triangles, each box 12 n_b²; pick n so the total reaches the target.
    n = 1
    while 12 * n * n * (len(structure) / 6 * 4 + len(boxes)) < triangles:
        n += 1
    n_struct = 2 * n
    vs, ts, ids, off = [], [], [], 0
    for oid, (origin, u, v) in enumerate(structure):
        fv, ft = _grid_quad(origin, u, v, n_struct)
        vs.append(fv), ts.append(ft + off), ids.append(np.full(len(ft), oid))
        off += len(fv)
    for k, (lo, hi) in enumerate(boxes):
        fv, ft = _box(lo, hi, n)
        vs.append(fv), ts.append(ft + off), ids.append(np.full(len(ft), 6 + k))
        off += len(fv)
    return Mesh(
        vertices=np.concatenate(vs) - np.array([size[0] / 2, size[1] / 2, 0.0]),
        triangles=np.concatenate(ts).astype(np.int32),
        triangle_object_ids=np.concatenate(ids).astype(np.int32),
    )


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Camera-to-world pose (OpenCV axes) at ``eye`` looking at ``target``, z up."""
    z = target - eye
    z = z / np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = x, y, z, eye
    return pose


def camera_walk(key: str, frames: int, radius: float = 1.5, height: float = 1.5, fps: float = 10.0) -> pl.DataFrame:
    """A ``frames`` table: a slow loop around the origin looking outward, with a gentle pitch wobble."""
    K = [577.87, 0.0, 319.5, 0.0, 577.87, 239.5, 0.0, 0.0, 1.0]
    rows = []
    for i in range(frames):
        a = 2.0 * np.pi * i / max(frames, 1) * 2.0
        eye = np.array([radius * np.cos(a), radius * np.sin(a) * 0.8, height])
        heading = a + 0.6 * np.sin(i / 37.0)
        target = eye + np.array([np.cos(heading), np.sin(heading), -0.35 + 0.2 * np.sin(i / 23.0)])
        rows.append(
            {
                "key": key,
                "frame_index": i,
                "timestamp": i / fps,
                "pose": look_at(eye, target).ravel().tolist(),
                "intrinsics": K,
                "width": 640,
                "height": 480,
                "valid": True,
                "in_all_frame": False,
            }
        )
    return mark_all_frame(schemas.from_rows("frames", rows), fps)


# --- visibility ---------------------------------------------------------------------------------------------------


def _visibility_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--triangles", type=int, default=150_000, help="minimum mesh triangles (default 150000)")
    parser.add_argument("--frames", type=int, default=1000, help="frames in the camera walk (default 1000)")
    parser.add_argument("--scale", type=float, default=0.5, help="resolution_scale of the reduced mode (default 0.5)")


def run_visibility_bench(triangles: int = 150_000, frames: int = 1000, scale: float = 0.5) -> dict:
    """Full visibility step vs raw casting of the same rays, and the reduced-resolution trade-off."""
    from pipeline.geometry.raycast import CameraRays, MeshRaycaster
    from pipeline.visibility.cast import compute_visibility

    key = "synthetic/bench0000_00"
    mesh = synthetic_room(triangles)
    table = camera_walk(key, frames)
    config = Config()
    config.visibility.cast = "full"  # this bench measures the one-ray-per-pixel step; `bench build` the adaptive one
    raycaster = MeshRaycaster(mesh.vertices, mesh.triangles)
    poses = [np.asarray(p).reshape(4, 4) for p in table["pose"].to_list()]
    K = np.asarray(table["intrinsics"][0]).reshape(3, 3)
    cam = CameraRays(K, 640, 480)

    # Raw throughput is Open3D's cast of precomputed rays, nothing else timed. The machine is
    # shared, so raw and full runs alternate in chunks of frames: both see the same load.
    from pipeline.geometry.raycast import o3d

    raw = full_s = reduced_s = raw_cpu = full_cpu = 0.0
    full_parts, reduced_parts = [], []
    chunk = 25
    for start in range(0, frames, chunk):
        part = table.slice(start, chunk)
        tensors = [o3d.core.Tensor(cam.rays(pose).copy()) for pose in poses[start : start + chunk]]
        t0, c0 = time.perf_counter(), time.process_time()
        for tensor in tensors:
            raycaster.scene.cast_rays(tensor)
        raw += time.perf_counter() - t0
        raw_cpu += time.process_time() - c0
        del tensors
        t0, c0 = time.perf_counter(), time.process_time()
        full_parts.append(compute_visibility(key, part, mesh, config, raycaster=raycaster, resolution_scale=1.0))
        full_s += time.perf_counter() - t0
        full_cpu += time.process_time() - c0
        t0 = time.perf_counter()
        reduced_parts.append(
            compute_visibility(key, part, mesh, config, raycaster=raycaster, resolution_scale=scale)
        )
        reduced_s += time.perf_counter() - t0
    full = pl.concat(full_parts)
    reduced = pl.concat(reduced_parts)

    joined = full.join(reduced, on=["frame_index", "object_id"], how="left", suffix="_reduced").filter(
        pl.col("frame_fraction") > 0.01
    )
    err = (joined["frame_fraction"] - joined["frame_fraction_reduced"].fill_null(0.0)).abs()
    frames_per_s = frames / full_s
    raw_frames_per_s = frames / raw
    return {
        "triangles": int(len(mesh.triangles)),
        "objects": int(len(np.unique(mesh.triangle_object_ids))),
        "frames": frames,
        "width": 640,
        "height": 480,
        "seconds": round(full_s, 3),
        "frames_per_s": round(frames_per_s, 2),
        "raw_frames_per_s": round(raw_frames_per_s, 2),
        "ratio": round(frames_per_s / raw_frames_per_s, 4),
        # CPU seconds of this process: less sensitive than wall time to other load on a shared machine.
        "cpu_ms_per_frame": round(full_cpu / frames * 1000.0, 2),
        "raw_cpu_ms_per_frame": round(raw_cpu / frames * 1000.0, 2),
        "cpu_ratio": round(raw_cpu / full_cpu, 4) if full_cpu > 0 else None,
        "visibility_rows": full.height,
        "reduced_scale": scale,
        "reduced_seconds": round(reduced_s, 3),
        "reduced_frames_per_s": round(frames / reduced_s, 2),
        "reduced_speedup": round(full_s / reduced_s, 3),
        "reduced_max_fraction_error_pp": round(float(err.max() or 0.0) * 100.0, 4),
        "reduced_compared_rows": joined.height,
    }


def _format_visibility(r: dict) -> str:
    return "\n".join(
        [
            f"visibility bench: {r['triangles']} triangles, {r['objects']} objects, {r['frames']} frames at "
            f"{r['width']}x{r['height']}",
            f"  full step : {r['frames_per_s']:.1f} frames/s ({r['seconds']:.1f} s)",
            f"  raw cast  : {r['raw_frames_per_s']:.1f} frames/s",
            f"  ratio     : {r['ratio']:.3f} (CPU time: {r['cpu_ms_per_frame']:.1f} vs {r['raw_cpu_ms_per_frame']:.1f} "
            f"ms/frame, ratio {r['cpu_ratio']:.3f})",
            f"  scale {r['reduced_scale']}: {r['reduced_frames_per_s']:.1f} frames/s, speed-up x{r['reduced_speedup']:.2f}, "
            f"max fraction error {r['reduced_max_fraction_error_pp']:.3f} pp over {r['reduced_compared_rows']} "
            "object-frames above 1% coverage",
        ]
    )


register(
    "visibility",
    Bench(
        help="per-frame object visibility vs raw ray casting on a >=150k-triangle synthetic room",
        add_arguments=_visibility_arguments,
        run=lambda args: run_visibility_bench(args.triangles, args.frames, args.scale),
        format=_format_visibility,
    ),
)


# --- exact OBB distance (target owned by pipeline/bench/distance.py) ------------------------------------

from pipeline.bench import distance as distance_bench  # noqa: E402

register(
    "distance",
    Bench(
        help="exact OBB distance vs dense surface sampling (<=5 mm grid) on random furniture box pairs 0.5-5 m apart",
        add_arguments=distance_bench.add_arguments,
        run=distance_bench.run_distance_bench,
        format=distance_bench.format_result,
    ),
)


# --- scan discovery (target owned by pipeline/bench/discovery.py) -------------------------------------------------

from pipeline.bench import discovery as discovery_bench  # noqa: E402

register(
    "discovery",
    Bench(
        help="one scan_discovery tick vs the old full-listing tick on a generated ScanNet-layout root (or --root)",
        add_arguments=discovery_bench.add_arguments,
        run=discovery_bench.run_discovery_bench,
        format=discovery_bench.format_result,
    ),
)


# --- the synthetic renderer (target owned by pipeline/bench/synth.py) ---------------------------------------------

from pipeline.bench import synth as synth_bench  # noqa: E402

register(
    "synth",
    Bench(
        help="scan2qa synth's rendering: CPU-s per scene and per frame against the first renderer, "
        "with bit-identical frames",
        add_arguments=synth_bench.add_arguments,
        run=synth_bench.run_synth_bench,
        format=synth_bench.format_result,
    ),
)
