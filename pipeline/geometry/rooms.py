"""Room polygons in the floor plane: annotated when a dataset has them, derived otherwise.

ScanNet has no room annotation, so the scene polygon is derived the way
VSI-Bench does it: mesh vertices in a thin band above the floor, a seeded
subsample, and an alpha shape (union of the Delaunay triangles whose
circumradius is below a radius). Holes are filled because furniture standing
on the floor hides the floor but not the room. Every scan gets a ``"scene"``
polygon (the whole captured space, possibly several parts) and a ``"main"``
polygon (its largest part) so that both room-size questions can be asked.
"""

from __future__ import annotations

import numpy as np
import shapely
from scipy.spatial import Delaunay
from shapely.geometry import MultiPolygon, Polygon

from pipeline.scene.parsed import Room
from pipeline.seeding import rng

# Defaults of the derivation; callers may override each one.
FLOOR_PERCENTILE = 2.0  # floor height = this percentile of vertex z (robust to stray points below the floor)
FLOOR_BAND_M = 0.3  # vertices up to this height above the floor describe the footprint (floor + wall bases)
MAX_POINTS = 20000  # seeded subsample size before triangulation
ALPHA_RADIUS_M = 0.6  # Delaunay triangles with a larger circumradius are outside the shape
MIN_PART_AREA_M2 = 0.5  # smaller disconnected parts are reconstruction debris


def _fill_holes(geom) -> Polygon | MultiPolygon:
    parts = [Polygon(p.exterior) for p in getattr(geom, "geoms", [geom]) if isinstance(p, Polygon) and not p.is_empty]
    return shapely.union_all(parts) if parts else Polygon()


def _parts(geom) -> list[Polygon]:
    if geom.is_empty:
        return []
    if isinstance(geom, Polygon):
        return [geom]
    return [g for g in getattr(geom, "geoms", []) if isinstance(g, Polygon) and not g.is_empty]


def alpha_shape(xy: np.ndarray, radius: float) -> Polygon | MultiPolygon:
    """Union of the Delaunay triangles of ``xy`` whose circumradius is at most ``radius``."""
    pts = np.unique(np.asarray(xy, dtype=float), axis=0)
    if len(pts) < 3:
        return Polygon()
    try:
        tri = Delaunay(pts)
    except Exception:  # all points collinear: no area
        return Polygon()
    corners = pts[tri.simplices]  # (T, 3, 2)
    a = np.linalg.norm(corners[:, 1] - corners[:, 0], axis=1)
    b = np.linalg.norm(corners[:, 2] - corners[:, 1], axis=1)
    c = np.linalg.norm(corners[:, 0] - corners[:, 2], axis=1)
    cross = (corners[:, 1, 0] - corners[:, 0, 0]) * (corners[:, 2, 1] - corners[:, 0, 1]) - (
        corners[:, 1, 1] - corners[:, 0, 1]
    ) * (corners[:, 2, 0] - corners[:, 0, 0])
    area = np.abs(cross) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        circumradius = a * b * c / (4.0 * area)
    keep = (area > 0) & (circumradius <= radius)
    if not np.any(keep):
        return Polygon()
    return shapely.coverage_union_all([_triangle_multipolygon(corners[keep])])


def _triangle_multipolygon(corners: np.ndarray) -> MultiPolygon:
    """The (T, 3, 2) triangles as one MultiPolygon built straight from their coordinates.

    ``shapely.polygons`` would make a Python geometry object per triangle (tens of thousands per scan)
    only to have ``coverage_union_all`` collect them again; GEOS unions the MultiPolygon's triangles, in
    the same order, to the same polygon, bit for bit (``tests/test_rooms.py``).
    """
    count = len(corners)
    closed = np.concatenate([corners, corners[:, :1]], axis=1).reshape(-1, 2)  # rings repeat their first corner
    offsets = (np.arange(0, 4 * count + 1, 4), np.arange(count + 1), np.array([0, count]))
    return shapely.from_ragged_array(shapely.GeometryType.MULTIPOLYGON, closed, offsets)[0]


def derive_scene_polygon(
    vertices: np.ndarray,
    *,
    seed: int,
    floor_percentile: float = FLOOR_PERCENTILE,
    band: float = FLOOR_BAND_M,
    max_points: int = MAX_POINTS,
    radius: float = ALPHA_RADIUS_M,
    min_part_area: float = MIN_PART_AREA_M2,
) -> Polygon | MultiPolygon:
    """The captured floor footprint of a mesh.

    The subsample depends on the geometry and the seed only (points are put in
    a canonical order first), so the same mesh read from two dataset layouts,
    under two scan keys, gets the same polygon.
    """
    v = np.asarray(vertices, dtype=float)
    v = v[np.all(np.isfinite(v), axis=1)]
    if len(v) < 3:
        return Polygon()
    floor_z = float(np.percentile(v[:, 2], floor_percentile))
    low = v[(v[:, 2] >= floor_z - band) & (v[:, 2] <= floor_z + band), :2]
    if len(low) > max_points:
        low = low[np.lexsort(np.round(low, 3).T[::-1])]
        pick = rng(seed, "room_polygon").choice(len(low), size=max_points, replace=False)
        low = low[np.sort(pick)]
    shape = _fill_holes(alpha_shape(low, radius))
    parts = [p for p in _parts(shape) if p.area >= min_part_area]
    if not parts:
        return Polygon()
    parts.sort(key=lambda p: (-p.area, p.centroid.x, p.centroid.y))
    return parts[0] if len(parts) == 1 else MultiPolygon(parts)


def main_part(polygon) -> Polygon:
    """The largest part of a (multi)polygon: the dominant room of the scene."""
    parts = _parts(polygon)
    if not parts:
        return Polygon()
    return max(parts, key=lambda p: (p.area, -p.centroid.x, -p.centroid.y))


def rooms_from_polygon(polygon, source: str) -> list[Room]:
    """A scene room and its main part; empty when the polygon has no area."""
    if polygon is None or polygon.is_empty or polygon.area <= 0:
        return []
    return [
        Room(polygon=polygon, kind="scene", source=source),
        Room(polygon=main_part(polygon), kind="main", source=source),
    ]


def derive_rooms(vertices: np.ndarray, *, seed: int, **options) -> list[Room]:
    return rooms_from_polygon(derive_scene_polygon(vertices, seed=seed, **options), source="derived")
