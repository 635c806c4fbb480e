"""Gravity-aligned oriented boxes (ReVSI Algorithm 1) and conversions between box conventions.

Open3D's free minimal OBB tilts on noisy segmentation masks, which corrupts
object sizes; ReVSI instead rotates boxes only about z: the minimum-area
rectangle of the object's xy footprint, with the z extent from min/max z.

Box conventions differ between datasets: ours (``OrientedBox``) has the box
axes as *columns* of ``rotation``; ScanNet++/ARKitScenes/MultiScan/VSI-Bench
``normalizedAxes`` hold one axis per *row*. The helpers here are the only place
that conversion happens.
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely.geometry import MultiPoint

from pipeline.geometry.shapes import OrientedBox

_Z = np.array([0.0, 0.0, 1.0])


def rotation_about_z(angle: float) -> np.ndarray:
    """3x3 rotation whose columns are the box axes after turning by ``angle`` radians about z."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _canonical_axis(direction: np.ndarray) -> np.ndarray:
    """Unit xy direction with a fixed sign so that identical footprints give identical rotations."""
    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    if d[0] < -1e-12 or (abs(d[0]) <= 1e-12 and d[1] < 0):
        d = -d
    return d


def footprint_hull(xy: np.ndarray):
    """GEOS's convex hull of 2-D points, given to GEOS as one coordinate sequence.

    ``MultiPoint(xy)`` makes shapely build one Point geometry per input point
    before GEOS takes the hull, which for a wall or a floor (tens of thousands
    of mesh vertices) cost most of a scan's box fitting. GEOS's hull reads only
    the coordinates of its input, so a LineString through the same points in
    the same order gives the same hull to the bit (checked on every object of
    generated scans and on random, gridded, quantised, duplicated and collinear
    point sets: ``tests/test_obb.py``) at a tenth of the cost. A LineString
    needs two points; a single point keeps the MultiPoint.
    """
    return (shapely.linestrings(xy) if len(xy) >= 2 else MultiPoint(xy)).convex_hull


def _footprint_rectangle(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Centre, unit long axis, long and short side of the minimum-area rectangle around 2-D points."""
    hull = footprint_hull(xy)
    rect = shapely.minimum_rotated_rectangle(hull)
    if rect.geom_type == "Point":
        return np.array(rect.coords[0], dtype=float), np.array([1.0, 0.0]), 0.0, 0.0
    coords = np.asarray(rect.coords if rect.geom_type == "LineString" else rect.exterior.coords, dtype=float)
    if rect.geom_type == "LineString":
        start, end = coords[0], coords[-1]
        length = float(np.linalg.norm(end - start))
        if length == 0.0:
            return start, np.array([1.0, 0.0]), 0.0, 0.0
        return (start + end) / 2.0, _canonical_axis(end - start), length, 0.0
    edge_a = coords[1] - coords[0]
    edge_b = coords[2] - coords[1]
    len_a, len_b = float(np.linalg.norm(edge_a)), float(np.linalg.norm(edge_b))
    center = coords[:4].mean(axis=0)
    if len_a >= len_b:
        return center, _canonical_axis(edge_a), len_a, len_b
    return center, _canonical_axis(edge_b), len_b, len_a


def gravity_aligned_obb(points: np.ndarray) -> OrientedBox:
    """Box rotated only about z: minimum-area xy rectangle, z range from min/max.

    Rotation columns: 0 = longer horizontal side, 1 = shorter horizontal side
    (z x column 0, so the frame is right-handed), 2 = world z. Extents are full
    side lengths in that order.
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
        raise ValueError(f"need a non-empty (N, 3) point array, got shape {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points contain NaN or inf")
    center_xy, axis_u, len_u, len_v = _footprint_rectangle(pts[:, :2])
    u = np.array([axis_u[0], axis_u[1], 0.0])
    v = np.cross(_Z, u)
    z_min, z_max = float(pts[:, 2].min()), float(pts[:, 2].max())
    return OrientedBox(
        center=np.array([center_xy[0], center_xy[1], (z_min + z_max) / 2.0]),
        extent=np.array([len_u, len_v, z_max - z_min]),
        rotation=np.column_stack([u, v, _Z]),
    )


def is_rotation_about_z(rotation: np.ndarray, tol: float = 1e-9) -> bool:
    """True when one box axis is world z (up or down) and the others lie in the floor plane."""
    r = np.asarray(rotation, dtype=float)
    vertical = int(np.argmax(np.abs(r[2, :])))
    return bool(abs(abs(r[2, vertical]) - 1.0) <= tol and np.all(np.abs(np.delete(r[2, :], vertical)) <= tol))


def box_from_columns(center, extent, rotation) -> OrientedBox:
    """Box from our convention (ReVSI ``rotation``): columns are the box axes."""
    return OrientedBox(
        center=np.asarray(center, dtype=float).reshape(3),
        extent=np.asarray(extent, dtype=float).reshape(3),
        rotation=np.asarray(rotation, dtype=float).reshape(3, 3),
    )


def box_from_normalized_axes(centroid, axes_lengths, normalized_axes) -> OrientedBox:
    """Box from a row-axis ``normalizedAxes`` (9 floats, one box axis per row) as ScanNet++/ARKit/VSI-Bench store it."""
    rows = np.asarray(normalized_axes, dtype=float).reshape(3, 3)
    return box_from_columns(centroid, axes_lengths, rows.T)


def normalized_axes_of(box: OrientedBox) -> np.ndarray:
    """The row-axis form (9 floats) of a box, for writing formats that use ``normalizedAxes``."""
    return np.asarray(box.rotation, dtype=float).T.reshape(9)
