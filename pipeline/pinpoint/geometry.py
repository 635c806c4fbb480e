"""Per-object geometry the PinpointQA rules measure: vertices, triangles or only a box.

PinpointQA measures on mesh vertices (centroid = mean of an object's vertices,
shortest distance = closest pair of vertices). Box-only annotations (MultiScan
annotation JSON, VSI-Bench/ReVSI boxes) have no vertices; they fall back to
the box centre and exact box-to-box distances, and every measurement says
which source it came from.

Supports and "covers" need the height of an object's surface straight below or
above a point of the target's footprint. Vertices alone do not answer that on
coarse meshes (a desk top of a few large triangles has no vertex under a
phone), so surface heights come from intersecting vertical lines with the
object's triangles, or with the box when there are none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl
from scipy.spatial import cKDTree

from pipeline.geometry.distance import obb_distance
from pipeline.scene import OrientedBox, ParsedScan
from pipeline.vocab import is_small_object, is_structural, normalize_label


@dataclass
class ObjectGeometry:
    object_id: int
    label: str  # lowercase raw label, the wording used in questions
    category: str
    structural: bool
    small: bool
    box: OrientedBox
    vertices: np.ndarray | None = None  # (n, 3) world frame
    triangles: np.ndarray | None = None  # (t, 3, 3) world-frame corner coordinates
    _tree: cKDTree | None = field(default=None, repr=False)

    @property
    def has_mesh(self) -> bool:
        return self.vertices is not None and len(self.vertices) > 0

    @cached_property
    def centroid(self) -> np.ndarray:
        """Mean of the mesh vertices (PinpointQA), box centre without vertices."""
        if self.has_mesh:
            return self.vertices.mean(axis=0)
        return np.asarray(self.box.center, dtype=float)

    @cached_property
    def z_range(self) -> tuple[float, float]:
        pts = self.vertices if self.has_mesh else self.box.corners()
        return float(pts[:, 2].min()), float(pts[:, 2].max())

    @property
    def tree(self) -> cKDTree:
        if self._tree is None:
            self._tree = cKDTree(self.vertices)
        return self._tree

    def footprint_samples(self, n: int, shrink: float, margin: float = 0.0) -> np.ndarray:
        """(n*n + 1, 2) xy points spread over the box footprint (plus its centre), for surface queries.

        ``shrink`` scales the footprint, ``margin`` (metres) then grows it on every side.
        """
        vert = self.box.vertical_axis
        axes = [i for i in range(3) if i != vert]
        half = np.asarray(self.box.extent, dtype=float)[axes] / 2.0 * shrink + margin
        grid = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        uu, vv = np.meshgrid(grid, grid, indexing="ij")
        local = np.stack([uu.ravel() * half[0], vv.ravel() * half[1]], axis=1)
        dirs = np.asarray(self.box.rotation, dtype=float)[:2, axes]  # xy of the two horizontal box axes
        centre = self.centroid[:2]
        return np.vstack([centre, local @ dirs.T + np.asarray(self.box.center[:2], dtype=float)])

    def surface_heights(self, points_xy: np.ndarray) -> list[np.ndarray]:
        """Per xy point, the z values where a vertical line through it meets this object's surface."""
        if self.triangles is not None and len(self.triangles):
            return _triangle_heights(self.triangles, points_xy)
        if self.has_mesh:
            return _vertex_heights(self.vertices, points_xy, radius=0.02)
        return _box_heights(self.box, points_xy)


def _triangle_heights(tris: np.ndarray, pts: np.ndarray) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    lo = tris[:, :, :2].min(axis=1)
    hi = tris[:, :, :2].max(axis=1)
    for p in np.asarray(pts, dtype=float):
        near = np.all((lo <= p + 1e-9) & (hi >= p - 1e-9), axis=1)
        t = tris[near]
        if not len(t):
            out.append(np.empty(0))
            continue
        a, b, c = t[:, 0], t[:, 1], t[:, 2]
        v0, v1, v2 = b[:, :2] - a[:, :2], c[:, :2] - a[:, :2], p - a[:, :2]
        den = v0[:, 0] * v1[:, 1] - v1[:, 0] * v0[:, 1]
        ok = np.abs(den) > 1e-12  # vertical triangles have no height at a point
        den = np.where(ok, den, 1.0)
        u = (v2[:, 0] * v1[:, 1] - v1[:, 0] * v2[:, 1]) / den
        v = (v0[:, 0] * v2[:, 1] - v2[:, 0] * v0[:, 1]) / den
        inside = ok & (u >= -1e-9) & (v >= -1e-9) & (u + v <= 1 + 1e-9)
        z = a[:, 2] + u * (b[:, 2] - a[:, 2]) + v * (c[:, 2] - a[:, 2])
        out.append(np.sort(z[inside]))
    return out


def _vertex_heights(vertices: np.ndarray, pts: np.ndarray, radius: float) -> list[np.ndarray]:
    tree = cKDTree(vertices[:, :2])
    return [np.sort(vertices[idx, 2]) for idx in tree.query_ball_point(np.asarray(pts, dtype=float), r=radius)]


def _box_heights(box: OrientedBox, pts: np.ndarray) -> list[np.ndarray]:
    """Entry and exit z of a vertical line through a (possibly tilted) box: slab intersection."""
    rot = np.asarray(box.rotation, dtype=float)
    half = np.asarray(box.extent, dtype=float) / 2.0
    out: list[np.ndarray] = []
    for p in np.asarray(pts, dtype=float):
        origin = box.to_local(np.array([p[0], p[1], 0.0]))
        direction = rot[2, :]  # world z in box-local coordinates
        t0, t1 = -np.inf, np.inf
        for i in range(3):
            if abs(direction[i]) < 1e-12:
                if abs(origin[i]) > half[i]:
                    t0, t1 = np.inf, -np.inf
                    break
                continue
            a = (-half[i] - origin[i]) / direction[i]
            b = (half[i] - origin[i]) / direction[i]
            t0, t1 = max(t0, min(a, b)), min(t1, max(a, b))
        out.append(np.array([t0, t1]) if t0 <= t1 else np.empty(0))
    return out


def box_of_row(row: dict) -> OrientedBox:
    return OrientedBox(
        np.asarray(row["center"], dtype=float),
        np.asarray(row["extent"], dtype=float),
        np.asarray(row["rotation"], dtype=float).reshape(3, 3),
    )


def scene_geometry(scan: ParsedScan | None, objects: pl.DataFrame) -> dict[int, ObjectGeometry]:
    """Geometry of every object of the ``objects`` table, with vertices/triangles where the scan has them."""
    by_id = {o.object_id: o for o in scan.objects} if scan is not None else {}
    mesh = scan.mesh if scan is not None else None
    geoms: dict[int, ObjectGeometry] = {}
    for row in objects.sort("object_id").iter_rows(named=True):
        oid = int(row["object_id"])
        raw = normalize_label(row["raw_label"])
        category = normalize_label(row["category"] or raw)
        structural = bool(row["structural"]) or is_structural(raw, category)
        small = bool(row["small_object"]) if row["small_object"] is not None else is_small_object(raw)
        geom = ObjectGeometry(oid, raw, category, structural, small, box_of_row(row))
        source = by_id.get(oid)
        if mesh is not None and source is not None and source.vertex_indices is not None and len(source.vertex_indices):
            idx = np.unique(np.asarray(source.vertex_indices, dtype=np.int64))
            geom.vertices = np.asarray(mesh.vertices, dtype=float)[idx]
            geom.triangles = _object_triangles(mesh, oid, idx)
        geoms[oid] = geom
    return geoms


def _object_triangles(mesh, object_id: int, vertex_idx: np.ndarray) -> np.ndarray:
    tris = np.asarray(mesh.triangles, dtype=np.int64)
    if mesh.triangle_object_ids is not None:
        own = np.asarray(mesh.triangle_object_ids) == object_id
    else:
        member = np.zeros(len(mesh.vertices), dtype=bool)
        member[vertex_idx] = True
        own = member[tris].all(axis=1)
    return np.asarray(mesh.vertices, dtype=float)[tris[own]]


def box_distance(a: OrientedBox, b: OrientedBox) -> float:
    """Exact shortest distance between two oriented boxes (0 when they intersect)."""
    return float(obb_distance(a, b))


def shortest_distance(a: ObjectGeometry, b: ObjectGeometry) -> tuple[float, str]:
    """(metres, source): closest vertex pair when both have vertices, else box to box."""
    if a.has_mesh and b.has_mesh:
        small, large = (a, b) if len(a.vertices) <= len(b.vertices) else (b, a)
        d, _ = large.tree.query(small.vertices, k=1)
        return float(d.min()), "mesh"
    return box_distance(a.box, b.box), "box"
