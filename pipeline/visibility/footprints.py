"""Where in a frame an object can possibly be seen: projected boxes around pieces of its triangles.

The coarse-to-fine cast (``pipeline.visibility.adaptive``) makes an object's
pixel count exact by casting every pixel the object could cover. A pixel's
ray can only hit a triangle whose box it crosses, and a box in front of the
camera projects inside the rectangle around its projected corners; so the
union of those rectangles over an object's boxes holds every pixel of the
object, occluded or not. Boxes are the world-axis-aligned bounds of the
object's triangles grouped by a spatial grid (``cell`` metres), so a wall or an
L-shaped sofa is covered by many small boxes rather than one room-sized one.

The rectangles are in ray-grid pixel indices and are computed from the
camera's own per-column and per-row direction tables (``CameraRays.x``/``y``),
so they follow whatever pixel-centre convention the rays use. They are
widened by ``tolerance`` pixels, far more than the float32 rounding of rays and
vertices. A box crossing the camera plane is clipped to the points in front
(depth above ``NEAR``, a tenth of a micrometre); hits nearer than that cannot
be counted on.
"""

from __future__ import annotations

import numpy as np

from pipeline.geometry.raycast import CameraRays

NEAR = 1e-7
_BITS = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], dtype=bool)
_EDGES = np.array([(a, b) for a in range(8) for b in range(a + 1, 8) if (_BITS[a] ^ _BITS[b]).sum() == 1])


class ObjectBoxes:
    """Boxes around an object's triangles, one per occupied grid cell, with the owning object code."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, triangle_codes: np.ndarray, codes: int, cell: float):
        # The ray caster holds float32 vertices; bound those, not the float64 originals.
        verts = np.asarray(vertices, dtype=np.float32)
        tri_codes = np.asarray(triangle_codes[: len(triangles)], dtype=np.int64)
        keep = tri_codes < codes
        tris = np.asarray(triangles)[keep]
        owners = tri_codes[keep]
        if tris.shape[0] == 0:
            self.owner = np.zeros(0, dtype=np.int64)
            self.lo = self.hi = np.zeros((0, 3))
            return
        a, b, c = verts[tris[:, 0]], verts[tris[:, 1]], verts[tris[:, 2]]
        lo_t = np.minimum(np.minimum(a, b), c)
        hi_t = np.maximum(np.maximum(a, b), c)
        cells = np.floor((a.astype(np.float64) + b + c) / (3.0 * cell)).astype(np.int64)
        cells -= cells.min(axis=0)
        span = cells.max(axis=0) + 1
        keys = ((owners * span[0] + cells[:, 0]) * span[1] + cells[:, 1]) * span[2] + cells[:, 2]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        self.owner = owners[order[starts]]
        self.lo = np.minimum.reduceat(lo_t[order], starts, axis=0).astype(np.float64)
        self.hi = np.maximum.reduceat(hi_t[order], starts, axis=0).astype(np.float64)

    def __len__(self) -> int:
        return int(self.owner.shape[0])


class FrameFootprints:
    """The projected rectangles of every box for one camera pose, in inclusive pixel indices."""

    def __init__(self, boxes: ObjectBoxes, cam: CameraRays, pose: np.ndarray, tolerance: float = 0.5):
        width, height = cam.grid_width, cam.grid_height
        self.width, self.height = width, height
        self.owner = boxes.owner
        n = len(boxes)
        if n == 0:
            self.u0 = self.u1 = self.v0 = self.v1 = np.zeros(0, dtype=np.int64)
            self.seen = np.zeros(0, dtype=bool)
            return
        pose = np.asarray(pose, dtype=np.float64)
        corners = np.where(_BITS[None], boxes.hi[:, None, :], boxes.lo[:, None, :])  # (n, 8, 3)
        local = (corners - pose[:3, 3]) @ pose[:3, :3]  # camera coordinates (OpenCV axes)
        z = local[..., 2]
        front = z > NEAR
        with np.errstate(divide="ignore", invalid="ignore"):
            px = np.where(front, local[..., 0] / z, np.nan)
            py = np.where(front, local[..., 1] / z, np.nan)
        # Boxes crossing the camera plane: add where their edges cross it (at depth NEAR).
        crossing = front.any(axis=1) & ~front.all(axis=1)
        if crossing.any():
            sub = local[crossing]
            a, b = sub[:, _EDGES[:, 0]], sub[:, _EDGES[:, 1]]
            za, zb = a[..., 2], b[..., 2]
            cut = (za > NEAR) != (zb > NEAR)
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.where(cut, (NEAR - za) / (zb - za), 0.0)
            p = a + s[..., None] * (b - a)
            ex = np.where(cut, p[..., 0] / NEAR, np.nan)
            ey = np.where(cut, p[..., 1] / NEAR, np.nan)
            px = np.concatenate([px, np.full((n, ex.shape[1]), np.nan)], axis=1)
            py = np.concatenate([py, np.full((n, ey.shape[1]), np.nan)], axis=1)
            px[crossing, 8:] = ex
            py[crossing, 8:] = ey
        seen = front.any(axis=1)
        valid = ~np.isnan(px)
        xmin, xmax = np.where(valid, px, np.inf).min(axis=1), np.where(valid, px, -np.inf).max(axis=1)
        ymin, ymax = np.where(valid, py, np.inf).min(axis=1), np.where(valid, py, -np.inf).max(axis=1)
        u0, u1 = _index_range(cam.x, xmin, xmax, tolerance)
        v0, v1 = _index_range(cam.y, ymin, ymax, tolerance)
        u0, v0 = np.maximum(u0, 0), np.maximum(v0, 0)
        u1, v1 = np.minimum(u1, width - 1), np.minimum(v1, height - 1)
        self.seen = seen & (u0 <= u1) & (v0 <= v1)
        self.u0, self.u1, self.v0, self.v1 = u0, u1, v0, v1

    def in_view(self, codes: int) -> np.ndarray:
        """Per object code: whether any of its boxes projects into the frame."""
        return np.bincount(self.owner[self.seen], minlength=codes)[:codes] > 0

    def uncast_upper(self, uncast: np.ndarray, codes: int) -> np.ndarray:
        """Per object code: at least the number of ``uncast`` pixels (an (h, w) mask) inside its footprint.

        The smaller of two sound counts from one summed-area table: the sum over the object's
        rectangles (overlaps counted twice) and the count inside the rectangle around all of them.
        """
        out = np.zeros(codes, dtype=np.int64)
        pick = self.seen
        if not pick.any():
            return out
        h, w = uncast.shape
        table = np.zeros((h + 1, w + 1), dtype=np.int32)
        np.cumsum(uncast, axis=0, dtype=np.int32, out=table[1:, 1:])
        np.cumsum(table[1:, 1:], axis=1, out=table[1:, 1:])
        owner = self.owner[pick]
        u0, u1, v0, v1 = self.u0[pick], self.u1[pick] + 1, self.v0[pick], self.v1[pick] + 1

        def inside(u0, u1, v0, v1):
            return table[v1, u1].astype(np.int64) - table[v0, u1] - table[v1, u0] + table[v0, u0]

        summed = np.bincount(owner, weights=inside(u0, u1, v0, v1), minlength=codes)[:codes]
        big = np.iinfo(np.int64).max
        bu0, bv0 = np.full(codes, big), np.full(codes, big)
        bu1, bv1 = np.full(codes, -1), np.full(codes, -1)
        np.minimum.at(bu0, owner, u0)
        np.minimum.at(bv0, owner, v0)
        np.maximum.at(bu1, owner, u1)
        np.maximum.at(bv1, owner, v1)
        present = bu1 >= 0
        around = np.zeros(codes, dtype=np.int64)
        around[present] = inside(bu0[present], bu1[present], bv0[present], bv1[present])
        out[present] = np.minimum(summed[present].astype(np.int64), around[present])
        return out

    def pixels(self, wanted: np.ndarray) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
        """The union of the rectangles of the objects flagged in ``wanted`` (per code), as an ROI mask.

        Returns ``((v0, v1, u0, u1), mask)`` with ``mask`` of shape
        ``(v1 - v0 + 1, u1 - u0 + 1)``, or ``None`` when no such rectangle is in the frame.
        """
        pick = self.seen & wanted[self.owner]
        if not pick.any():
            return None
        u0, u1, v0, v1 = self.u0[pick], self.u1[pick], self.v0[pick], self.v1[pick]
        ru0, ru1, rv0, rv1 = int(u0.min()), int(u1.max()), int(v0.min()), int(v1.max())
        diff = np.zeros((rv1 - rv0 + 2, ru1 - ru0 + 2), dtype=np.int32)
        a, b, c, d = v0 - rv0, v1 - rv0 + 1, u0 - ru0, u1 - ru0 + 1
        np.add.at(diff, (a, c), 1)
        np.add.at(diff, (a, d), -1)
        np.add.at(diff, (b, c), -1)
        np.add.at(diff, (b, d), 1)
        mask = np.cumsum(np.cumsum(diff, axis=0), axis=1)[:-1, :-1] > 0
        return (rv0, rv1, ru0, ru1), mask


def _index_range(table: np.ndarray, lo: np.ndarray, hi: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive index ranges of an increasing affine direction table covering [lo, hi], widened by ``tolerance``."""
    table = np.asarray(table, dtype=np.float64)
    if table.shape[0] < 2:
        return np.zeros(lo.shape, dtype=np.int64), np.zeros(hi.shape, dtype=np.int64)
    step = (table[-1] - table[0]) / (table.shape[0] - 1)
    if not step > 0:  # not an increasing table: every index may be hit
        return np.full(lo.shape, 0, dtype=np.int64), np.full(hi.shape, table.shape[0] - 1, dtype=np.int64)
    big = 1e9
    with np.errstate(invalid="ignore"):
        lo_i = np.clip(np.nan_to_num((lo - table[0]) / step, nan=big, posinf=big, neginf=-big), -big, big)
        hi_i = np.clip(np.nan_to_num((hi - table[0]) / step, nan=-big, posinf=big, neginf=-big), -big, big)
    return np.ceil(lo_i - tolerance).astype(np.int64), np.floor(hi_i + tolerance).astype(np.int64)
