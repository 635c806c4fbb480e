"""Exact per-frame object visibility by ray casting, and the SPEC §3 decision per budget.

Every frame of the all-frame sequence is rendered by casting one ray per
pixel against the scene mesh (``pipeline.geometry.raycast``, the renderer the
synthetic generator uses too); each hit triangle's object id is that pixel's
object, so occlusion by walls, floor, ceiling and furniture is exact for the
mesh. Per frame we keep only the objects actually seen (a sparse table).

The per-frame cost must stay close to the cast itself (1,500 frames per scan),
so nothing here loops over pixels in Python: camera-space directions are
computed once per camera model, triangle ids map to compact object codes with
one gather, and counts and bounding boxes come from run-lengths along image
rows, which are few even at 640x480.

``object_visibility`` then applies the budget rule: an object is visible under
a budget when, in its best sampled frame, it covers more than
``fraction_threshold`` of the frame, or - for small-vocabulary objects, which
never reach 5% - at least ``small_object_pixels`` pixels. Reviewer overrides
win over both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import Config
from pipeline.errors import ConfigError, ScanError
from pipeline.frames.budgets import all_frame_table, budget_sort_key, output_size, scale_intrinsics
from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.geometry.turned_camera import turned_intrinsics, turned_pose
from pipeline.scene.parsed import Mesh
from pipeline.visibility.coarse_to_fine import CastFrame, CoarseToFineScan, object_flags

RULE_FRACTION = "fraction"
RULE_PIXEL_FLOOR = "pixel_floor"
RULE_OVERRIDE = "override"

# Rays of the last adaptive cast in this process, by what they were cast for (read by the benches).
LAST_ADAPTIVE_RUN: dict | None = None


class TriangleObjects:
    """Lookup from hit triangle to a compact object code (one gather per frame).

    Codes ``0..n-1`` are the sorted object ids; code ``n`` is "no object"
    (unannotated triangle or a miss). The table has one extra last entry so that
    a miss, which the caster reports as -1, indexes it directly.
    """

    def __init__(self, triangle_object_ids: np.ndarray | None, triangle_count: int):
        ids = (
            np.full(triangle_count, -1, dtype=np.int64)
            if triangle_object_ids is None
            else np.asarray(triangle_object_ids, dtype=np.int64)
        )
        if ids.shape != (triangle_count,):
            raise ValueError(f"triangle_object_ids has {ids.shape[0]} entries for {triangle_count} triangles")
        self.object_ids = np.unique(ids[ids >= 0]).astype(np.int32)
        self.background = len(self.object_ids)
        codes = np.full(triangle_count + 1, self.background, dtype=np.int32)
        labelled = ids >= 0
        codes[:triangle_count][labelled] = np.searchsorted(self.object_ids, ids[labelled])
        self.codes = codes

    def object_image(self, triangle_ids: np.ndarray) -> np.ndarray:
        """Object id per pixel (-1 where no object), from hit triangle ids (-1 where no hit)."""
        lut = np.append(self.object_ids, np.int32(-1))
        return lut[self.codes[triangle_ids]]


@dataclass
class FrameObjects:
    """Objects seen in one rendered grid: compact codes with pixel counts and inclusive grid bboxes."""

    codes: np.ndarray
    counts: np.ndarray
    x_min: np.ndarray
    y_min: np.ndarray
    x_max: np.ndarray
    y_max: np.ndarray


def frame_objects(codes: np.ndarray, background: int) -> FrameObjects:
    """Per-code pixel counts and bounding boxes of an (h, w) code image, via row run-lengths."""
    h, w = codes.shape
    flat = codes.reshape(-1)
    change = np.empty(flat.shape[0], dtype=bool)
    change[0] = True
    np.not_equal(flat[1:], flat[:-1], out=change[1:])
    change[::w] = True  # a run never crosses a row end
    starts = np.flatnonzero(change)
    lengths = np.diff(starts, append=flat.shape[0])
    run_codes = flat[starts]
    seen = run_codes != background
    starts, lengths, run_codes = starts[seen], lengths[seen], run_codes[seen]
    if starts.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return FrameObjects(empty, empty, empty, empty, empty, empty)
    rows = starts // w
    x0 = starts - rows * w
    order = np.argsort(run_codes, kind="stable")
    sorted_codes = run_codes[order]
    group = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    x0s, rows_s, len_s = x0[order], rows[order], lengths[order]
    return FrameObjects(
        codes=sorted_codes[group].astype(np.int64),
        counts=np.add.reduceat(len_s, group),
        x_min=np.minimum.reduceat(x0s, group),
        y_min=np.minimum.reduceat(rows_s, group),
        x_max=np.maximum.reduceat(x0s + len_s - 1, group),
        y_max=np.maximum.reduceat(rows_s, group),
    )


def _matrix(values, shape: tuple[int, int]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(shape)


def scan_raycaster(key: str, mesh: Mesh | None) -> MeshRaycaster:
    """The scan's mesh in a BVH, or a ScanError naming what is wrong with it."""
    if mesh is None or mesh.triangles is None or len(mesh.triangles) == 0:
        raise ScanError(key, "mesh", "mesh has no triangles; visibility needs a triangle mesh")
    if mesh.triangle_object_ids is not None and len(mesh.triangle_object_ids) != len(mesh.triangles):
        raise ScanError(
            key,
            "mesh",
            f"{len(mesh.triangle_object_ids)} triangle object ids for {len(mesh.triangles)} triangles",
        )
    return MeshRaycaster(mesh.vertices, mesh.triangles)


def compute_visibility(
    key: str,
    frames: pl.DataFrame,
    mesh: Mesh | None,
    config: Config | None = None,
    *,
    image_rotation: int = 0,
    raycaster: MeshRaycaster | None = None,
    resolution_scale: float | None = None,
    objects: pl.DataFrame | None = None,
    overrides: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The sparse ``visibility`` table of one scan from its ``frames`` table and mesh.

    Renders every all-frame frame at the output video size (640x480 or 480x640
    by orientation) with the frame's intrinsics rescaled to it. Rays are cast
    for the sky-up camera (the stored one turned by ``image_rotation``, degrees
    clockwise), so ``bbox`` is in the pixel coordinates of the written video and
    a scan stored sideways sees exactly what the same scan stored sky-up sees.
    Frames whose pose is not finite are never cast.

    ``visibility.cast`` picks how: ``full`` (the default) casts one ray per pixel
    (every row exact); ``adaptive`` casts coarse-to-fine and proves exact every
    count a SPEC §3 decision reads (``pipeline.visibility.coarse_to_fine``), using
    the scan's ``objects`` (small-object flags; without them every object is
    treated as small) and reviewer ``overrides`` (an overridden object's rule is
    settled in every frame) when given. With
    ``resolution_scale`` < 1 (default from config) a reduced grid is cast instead
    and pixel counts are rescaled to the full frame (every row an estimate).
    """
    config = config or Config()
    scale = config.visibility.resolution_scale if resolution_scale is None else resolution_scale
    if not 0 < scale <= 1:
        raise ConfigError(f"visibility.resolution_scale must be in (0, 1], got {scale}")
    scan_frames = frames.filter(pl.col("key") == key)
    seq = all_frame_table(scan_frames)
    if seq.height == 0:
        return schemas.empty("visibility")  # nothing to cast: an annotation-only scan needs no mesh here
    if raycaster is None:
        raycaster = scan_raycaster(key, mesh)
    lookup = TriangleObjects(None if mesh is None else mesh.triangle_object_ids, raycaster.triangle_count)
    adaptive = scale == 1 and config.visibility.cast == "adaptive"
    cameras: dict[tuple, CameraRays] = {}
    planned: list[CastFrame] = []
    for frame_index, pose_values, k_values, width, height in zip(
        seq["frame_index"].to_list(),
        seq["pose"].to_list(),
        seq["intrinsics"].to_list(),
        seq["width"].to_list(),
        seq["height"].to_list(),
    ):
        pose = _matrix(pose_values, (4, 4))
        if not np.all(np.isfinite(pose)):
            continue
        cam_key = (tuple(k_values), width, height)
        cam = cameras.get(cam_key)
        if cam is None:
            out_w, out_h = output_size(width, height, config.frames)
            K = scale_intrinsics(_matrix(k_values, (3, 3)), (width, height), (out_w, out_h))
            K, out_w, out_h = turned_intrinsics(K, out_w, out_h, image_rotation)
            cam = cameras[cam_key] = CameraRays(K, out_w, out_h, scale)
        planned.append(CastFrame(int(frame_index), turned_pose(pose, image_rotation), cam))
    if adaptive:
        return _adaptive_table(key, scan_frames, planned, raycaster, lookup, mesh, config, objects, overrides)
    parts: list[tuple[int, FrameObjects, CameraRays]] = []
    codes_lut = lookup.codes
    for frame in planned:
        cam = frame.cam
        triangle_ids = raycaster.cast_triangle_ids(cam.rays(frame.pose))
        codes = codes_lut[triangle_ids].reshape(cam.grid_height, cam.grid_width)
        parts.append((frame.frame_index, frame_objects(codes, lookup.background), cam))
    return _visibility_table(key, parts, lookup)


def _adaptive_table(
    key: str,
    frames: pl.DataFrame,
    planned: list[CastFrame],
    raycaster: MeshRaycaster,
    lookup: TriangleObjects,
    mesh: Mesh | None,
    config: Config,
    objects: pl.DataFrame | None,
    overrides: pl.DataFrame | None,
) -> pl.DataFrame:
    if not planned:
        return schemas.empty("visibility")
    flags = object_flags(objects, key, lookup.object_ids)
    every_frame = None
    if overrides is not None and overrides.height:
        touched = _key_overrides(key, overrides)["object_id"].to_numpy()
        every_frame = np.isin(lookup.object_ids, touched)
    scan = CoarseToFineScan(
        key, frames, planned, raycaster, lookup.codes, lookup.object_ids, mesh.vertices, mesh.triangles, config, flags,
        every_frame,
    )
    results = scan.run()
    global LAST_ADAPTIVE_RUN
    LAST_ADAPTIVE_RUN = {"rays": dict(scan.rays), "full_rays": int(scan.pixels.sum()), "passes": scan.passes}
    n = lookup.background
    cols: dict[str, list[np.ndarray]] = {n_: [] for n_ in ("frame", "obj", "px", "frac", "x0", "y0", "x1", "y1", "exact")}
    for frame, counts in zip(planned, results):
        codes = np.flatnonzero(counts.counts[:n] > 0)
        if codes.size == 0:
            continue
        px = counts.counts[codes]
        cols["frame"].append(np.full(codes.size, frame.frame_index, dtype=np.int64))
        cols["obj"].append(lookup.object_ids[codes])
        cols["px"].append(px)
        cols["frac"].append(px / (frame.cam.grid_width * frame.cam.grid_height))
        cols["x0"].append(counts.x_min[codes])
        cols["y0"].append(counts.y_min[codes])
        cols["x1"].append(counts.x_max[codes])
        cols["y1"].append(counts.y_max[codes])
        cols["exact"].append(counts.exact[codes])
    if not cols["frame"]:
        return schemas.empty("visibility")
    cat = {name: np.concatenate(v) for name, v in cols.items()}
    return _table(key, cat)


def _table(key: str, cat: dict[str, np.ndarray]) -> pl.DataFrame:
    bbox = np.stack([cat["x0"], cat["y0"], cat["x1"], cat["y1"]], axis=1).astype(np.int32)
    df = pl.DataFrame(
        {
            "frame_index": cat["frame"].astype(np.int32),
            "object_id": cat["obj"].astype(np.int32),
            "visible_pixels": cat["px"].astype(np.int32),
            "frame_fraction": cat["frac"].astype(np.float64),
            "bbox": pl.Series("bbox", bbox).cast(pl.List(pl.Int32)),
            "pixels_exact": cat["exact"].astype(bool),
        }
    )
    return schemas.conform("visibility", df.with_columns(key=pl.lit(key)).sort("frame_index", "object_id"))


def _visibility_table(key: str, parts: list[tuple[int, FrameObjects, CameraRays]], lookup: TriangleObjects) -> pl.DataFrame:
    if not parts:
        return schemas.empty("visibility")
    cols: dict[str, list[np.ndarray]] = {n: [] for n in ("frame", "obj", "px", "frac", "x0", "y0", "x1", "y1")}
    reduced = any(cam.grid_width != cam.width or cam.grid_height != cam.height for _, _, cam in parts)
    for frame_index, fo, cam in parts:
        n = fo.codes.size
        if n == 0:
            continue
        grid_pixels = cam.grid_width * cam.grid_height
        sx = cam.width / cam.grid_width
        sy = cam.height / cam.grid_height
        x0 = np.floor(fo.x_min * sx + 1e-9).astype(np.int64)
        y0 = np.floor(fo.y_min * sy + 1e-9).astype(np.int64)
        x1 = np.ceil((fo.x_max + 1) * sx - 1e-9).astype(np.int64) - 1
        y1 = np.ceil((fo.y_max + 1) * sy - 1e-9).astype(np.int64) - 1
        cols["frame"].append(np.full(n, frame_index, dtype=np.int64))
        cols["obj"].append(lookup.object_ids[fo.codes])
        cols["px"].append(np.rint(fo.counts * (cam.width * cam.height / grid_pixels)).astype(np.int64))
        cols["frac"].append(fo.counts / grid_pixels)
        for name, arr in (("x0", x0), ("y0", y0), ("x1", x1), ("y1", y1)):
            cols[name].append(arr)
    if not cols["frame"]:
        return schemas.empty("visibility")
    cat = {name: np.concatenate(v) for name, v in cols.items()}
    cat["exact"] = np.full(cat["frame"].shape[0], not reduced)
    return _table(key, cat)


def object_visibility(
    key: str,
    visibility: pl.DataFrame,
    frame_samples: pl.DataFrame,
    objects: pl.DataFrame | None = None,
    overrides: pl.DataFrame | None = None,
    config: Config | None = None,
) -> pl.DataFrame:
    """The ``object_visibility`` table of one scan: SPEC §3 per budget and object.

    Per sampled frame an object "meets the rule" when its fraction exceeds
    ``fraction_threshold`` or, for ``objects.small_object`` rows, its pixels
    reach ``small_object_pixels``. A reviewer override ``(object_id,
    frame_index, visible)`` replaces that per-frame decision for every budget
    sampling the frame; a null ``frame_index`` overrides every frame of the
    object (a frame-specific override beats it). The object is visible under a
    budget when some sampled frame meets the rule; ``rule`` says ``override``
    when an override touched the budget's frames, else ``fraction`` when the
    best frame passes the fraction threshold, else ``pixel_floor`` for small
    objects and ``fraction`` for the rest. ``best_frame``/``max_*`` stay the
    measured values. Every object of ``objects`` gets a row per budget, seen or not.
    """
    config = config or Config()
    thr = float(config.visibility.fraction_threshold)
    floor = int(config.visibility.small_object_pixels)
    vis = visibility.filter(pl.col("key") == key)
    samples = frame_samples.filter(pl.col("key") == key)
    if objects is not None:
        objs = objects.filter(pl.col("key") == key).select(
            pl.col("object_id").cast(pl.Int32), pl.col("small_object").fill_null(False)
        )
    else:
        objs = pl.DataFrame(schema={"object_id": pl.Int32, "small_object": pl.Boolean})
    seen_ids = vis.select(pl.col("object_id").cast(pl.Int32)).unique()
    objs = pl.concat(
        [objs, seen_ids.join(objs, on="object_id", how="anti").with_columns(small_object=pl.lit(False))]
    ).unique("object_id", keep="first")
    ov = _key_overrides(key, overrides)
    budgets = sorted(set(samples["budget"].to_list()), key=budget_sort_key)
    out: list[pl.DataFrame] = []
    for budget in budgets:
        frames_b = (
            samples.filter(pl.col("budget") == budget)
            .group_by("frame_index")
            .agg(pl.col("rank").min(), pl.col("timestamp").first())
            .with_columns(pl.col("frame_index").cast(pl.Int32))
        )
        out.append(_budget_decisions(budget, vis, frames_b, objs, ov, thr, floor))
    if not out:
        return schemas.empty("object_visibility")
    table = pl.concat(out).with_columns(key=pl.lit(key))
    order = {b: i for i, b in enumerate(budgets)}
    table = table.with_columns(_order=pl.col("budget").replace_strict(order, return_dtype=pl.Int32))
    return schemas.conform("object_visibility", table.sort("_order", "object_id").drop("_order"))


def _key_overrides(key: str, overrides: pl.DataFrame | None) -> pl.DataFrame:
    schema = {"object_id": pl.Int32, "frame_index": pl.Int32, "override": pl.Boolean}
    if overrides is None or overrides.height == 0:
        return pl.DataFrame(schema=schema)
    ov = schemas.conform("visibility_overrides", overrides).filter(pl.col("key") == key)
    return ov.select(
        pl.col("object_id"), pl.col("frame_index"), pl.col("visible").alias("override")
    ).unique(["object_id", "frame_index"], keep="last", maintain_order=True)


def _budget_decisions(
    budget: str,
    vis: pl.DataFrame,
    frames_b: pl.DataFrame,
    objs: pl.DataFrame,
    ov: pl.DataFrame,
    thr: float,
    floor: int,
) -> pl.DataFrame:
    seen = (
        vis.select("frame_index", "object_id", "visible_pixels", "frame_fraction")
        .join(frames_b, on="frame_index", how="inner")
        .join(objs, on="object_id", how="left")
        .with_columns(
            meets=(pl.col("frame_fraction") > thr)
            | (pl.col("small_object").fill_null(False) & (pl.col("visible_pixels") >= floor))
        )
    )
    measured = (
        seen.sort("frame_fraction", "rank", descending=[True, False])
        .group_by("object_id", maintain_order=True)
        .agg(
            best_frame=pl.col("frame_index").first(),
            max_fraction=pl.col("frame_fraction").first(),
            max_pixels=pl.col("visible_pixels").first(),
            frames_visible=(pl.col("visible_pixels") > 0).sum().cast(pl.Int32),
        )
    )
    frame_ov = ov.filter(pl.col("frame_index").is_not_null()).join(frames_b, on="frame_index", how="inner")
    object_ov = (
        ov.filter(pl.col("frame_index").is_null())
        .drop("frame_index")
        .join(frames_b, how="cross")
        .join(frame_ov.select("object_id", "frame_index"), on=["object_id", "frame_index"], how="anti")
    )
    applied = pl.concat([frame_ov, object_ov.select(frame_ov.columns)])
    decisions = (
        seen.select("object_id", "frame_index", "rank", "timestamp", "meets")
        .join(applied, on=["object_id", "frame_index"], how="full", coalesce=True)
        .with_columns(
            rank=pl.coalesce("rank", "rank_right"),
            timestamp=pl.coalesce("timestamp", "timestamp_right"),
            decision=pl.coalesce("override", "meets", pl.lit(False)),
        )
    )
    decided = (
        decisions.sort("rank")
        .group_by("object_id", maintain_order=True)
        .agg(
            visible=pl.col("decision").any(),
            overridden=pl.col("override").is_not_null().any(),
            first_frame=pl.col("frame_index").filter(pl.col("decision")).first(),
            first_timestamp=pl.col("timestamp").filter(pl.col("decision")).first(),
        )
    )
    table = (
        objs.join(measured, on="object_id", how="left")
        .join(decided, on="object_id", how="left")
        .with_columns(
            budget=pl.lit(budget),
            max_fraction=pl.col("max_fraction").fill_null(0.0),
            max_pixels=pl.col("max_pixels").fill_null(0),
            frames_visible=pl.col("frames_visible").fill_null(0),
            visible=pl.col("visible").fill_null(False),
        )
        .with_columns(
            rule=pl.when(pl.col("overridden").fill_null(False))
            .then(pl.lit(RULE_OVERRIDE))
            .when(pl.col("max_fraction") > thr)
            .then(pl.lit(RULE_FRACTION))
            .when(pl.col("small_object"))
            .then(pl.lit(RULE_PIXEL_FLOOR))
            .otherwise(pl.lit(RULE_FRACTION))
        )
    )
    return table.select(
        "budget",
        "object_id",
        "best_frame",
        "max_fraction",
        "max_pixels",
        "frames_visible",
        "first_frame",
        "first_timestamp",
        "visible",
        "rule",
    )


OVERRIDES_TABLE = "visibility_overrides"


def read_visibility_overrides(tables_root: str, storage_options: dict | None = None) -> pl.DataFrame:
    """Reviewer overrides from ``<tables_root>/visibility_overrides.parquet``; none when the file is absent."""
    from pipeline.storage import read_table, upath

    path = upath(f"{tables_root.rstrip('/')}/{OVERRIDES_TABLE}.parquet", storage_options)
    if not path.exists():
        return schemas.empty(OVERRIDES_TABLE)
    return read_table(path, OVERRIDES_TABLE)
