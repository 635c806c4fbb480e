"""Gravity-aligned boxes: the one primitive every synthetic object is built from.

Everything in a synthetic scene (a wall, a table leg, a phone) is a box rotated
only about z. That keeps the analytic truth exact: a box's footprint is a
shapely rectangle, two boxes interpenetrate iff their footprints overlap *and*
their z-intervals overlap, and the distance between two such prisms splits into
a horizontal and a vertical part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import shapely
from shapely.geometry import Polygon

from pipeline.scene.parsed import OrientedBox

TOUCH_TOLERANCE = 1e-6  # metres; boxes closer than this to overlapping count as touching, not interpenetrating


@dataclass(frozen=True)
class Box:
    """A box rotated by ``yaw`` about z; ``extent`` is (along local x, along local y, height)."""

    center: tuple[float, float, float]
    extent: tuple[float, float, float]
    yaw: float = 0.0

    @property
    def rotation(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    @property
    def z_min(self) -> float:
        return self.center[2] - self.extent[2] / 2.0

    @property
    def z_max(self) -> float:
        return self.center[2] + self.extent[2] / 2.0

    def footprint(self) -> Polygon:
        """The box's rectangle in the xy plane, built once per box (layout asks for it thousands of times)."""
        cached = self.__dict__.get("_footprint")
        if cached is None:
            hx, hy = self.extent[0] / 2.0, self.extent[1] / 2.0
            local = np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy]])
            rot = self.rotation[:2, :2]
            world = local @ rot.T + np.asarray(self.center[:2])
            # A frozen dataclass refuses setattr; the cache is not a field, so equality and hashing ignore it.
            cached = self.__dict__["_footprint"] = Polygon(world)
        return cached

    def to_oriented(self) -> OrientedBox:
        return OrientedBox(np.array(self.center, dtype=float), np.array(self.extent, dtype=float), self.rotation)

    def placed(self, x: float, y: float, z: float, yaw: float) -> Box:
        """This box (given in an object's local frame) moved by the object's pose."""
        c, s = math.cos(yaw), math.sin(yaw)
        cx, cy, cz = self.center
        return Box((x + c * cx - s * cy, y + s * cx + c * cy, z + cz), self.extent, self.yaw + yaw)


def box_from_bounds(x0: float, y0: float, z0: float, x1: float, y1: float, z1: float) -> Box:
    """An axis-aligned box (in whatever frame the bounds are given)."""
    return Box(((x0 + x1) / 2.0, (y0 + y1) / 2.0, (z0 + z1) / 2.0), (x1 - x0, y1 - y0, z1 - z0), 0.0)


def union_box(parts: list[Box], yaw: float) -> Box:
    """The tightest box with heading ``yaw`` around parts that all share that heading (an object's box)."""
    c, s = math.cos(yaw), math.sin(yaw)
    to_local = np.array([[c, s], [-s, c]])
    pts = np.concatenate([np.asarray(p.footprint().exterior.coords[:4]) for p in parts])
    local = pts @ to_local.T
    lo, hi = local.min(axis=0), local.max(axis=0)
    mid = (lo + hi) / 2.0
    center_xy = mid @ to_local  # inverse rotation
    z0 = min(p.z_min for p in parts)
    z1 = max(p.z_max for p in parts)
    return Box((float(center_xy[0]), float(center_xy[1]), (z0 + z1) / 2.0), (float(hi[0] - lo[0]), float(hi[1] - lo[1]), z1 - z0), yaw)


def interpenetrates(a: Box, others: list[Box], tol: float = TOUCH_TOLERANCE) -> bool:
    """True if ``a`` shares volume with any of ``others`` (touching faces are allowed)."""
    if not others:
        return False
    z_overlap = np.array([min(a.z_max, o.z_max) - max(a.z_min, o.z_min) for o in others])
    candidates = [o for o, dz in zip(others, z_overlap) if dz > tol]
    if not candidates:
        return False
    areas = shapely.area(shapely.intersection(a.footprint(), [o.footprint() for o in candidates]))
    return bool(np.any(areas > tol))


def box_distance(a: Box, b: Box) -> float:
    """Exact shortest distance between two z-rotated boxes (prisms: horizontal and vertical parts add in quadrature)."""
    dxy = a.footprint().distance(b.footprint())
    dz = max(0.0, max(a.z_min, b.z_min) - min(a.z_max, b.z_max))
    return math.hypot(dxy, dz)


def parts_distance(a: list[Box], b: list[Box]) -> float:
    """Shortest distance between two objects made of parts (what the vertex distance of fine meshes converges to)."""
    return min(box_distance(p, q) for p in a for q in b)


# (normal axis, sign, u axis, v axis) for the six faces, u x v = outward normal so triangles wind outward.
_FACES = ((0, 1, 1, 2), (0, -1, 2, 1), (1, 1, 2, 0), (1, -1, 0, 2), (2, 1, 0, 1), (2, -1, 1, 0))


def mesh_box(box: Box, spacing: float, skip_bottom: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a box whose faces are gridded so no two grid neighbours are more than ``spacing`` apart.

    Faces do not share vertices (edges are duplicated), which keeps the code
    vectorised and never matters: an object's vertices are only ever used as a set.
    """
    ext = np.asarray(box.extent, dtype=float)
    verts: list[np.ndarray] = []
    tris: list[np.ndarray] = []
    offset = 0
    for axis, sign, u, v in _FACES:
        if skip_bottom and axis == 2 and sign < 0:
            continue
        nu = max(1, math.ceil(ext[u] / spacing - 1e-9))
        nv = max(1, math.ceil(ext[v] / spacing - 1e-9))
        gu = np.linspace(-ext[u] / 2.0, ext[u] / 2.0, nu + 1)
        gv = np.linspace(-ext[v] / 2.0, ext[v] / 2.0, nv + 1)
        uu, vv = np.meshgrid(gu, gv, indexing="ij")
        local = np.empty((uu.size, 3))
        local[:, axis] = sign * ext[axis] / 2.0
        local[:, u] = uu.ravel()
        local[:, v] = vv.ravel()
        idx = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1)
        a, b = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
        c, d = idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
        quads = np.concatenate([np.stack([a, b, c], axis=1), np.stack([a, c, d], axis=1)])
        verts.append(local)
        tris.append(quads + offset)
        offset += len(local)
    local_all = np.concatenate(verts)
    world = local_all @ box.rotation.T + np.asarray(box.center)
    return world, np.concatenate(tris).astype(np.int32)
