"""Coarse-to-fine cast of one frame: the full-resolution answer where it matters, at a fraction of the rays.

Every ray cast here is a pixel of the full-resolution grid (``CameraRays.rays_at``,
bit-identical to the full cast's ray for that pixel), so a cast pixel's object is
exact. Unknown pixels are filled by a quadtree over that grid:

1. cast the lattice of every ``step``-th pixel (plus the last row and column);
2. a block whose four corner pixels show the same object is taken to show it
   everywhere (a *leaf*); any other block is split in four by casting its edge
   midpoints and centre, down to single pixels. Object silhouettes and id
   changes are therefore traced at full resolution; only detail that slips
   between four equal corners (a sliver thinner than the block) can be missed.

That gives an estimated count and box per object. ``resolve`` then makes chosen
objects exact: it casts every uncast pixel inside the object's footprint
(``pipeline.visibility.footprints``), the only pixels that can show it, after
which the object's count and box are those of its cast pixels - exactly what the
full cast would give. Which objects a frame must resolve is decided by the
caller (``pipeline.visibility.cast``) from the decisions that read the counts.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.visibility.footprints import FrameFootprints

UNCAST = -1


class BlockGrid:
    """The quadtree levels of one ray grid: block size per level and block counts.

    Level ``k`` has blocks of ``sizes[k]`` pixels; block ``(i, j)`` owns pixels
    ``[i*c, (i+1)*c) x [j*c, (j+1)*c)`` clipped to the grid and its corners are at
    ``min(i*c, W-1)``, ``min((i+1)*c, W-1)`` (likewise rows), so blocks at the last
    column and row reach the grid's edge.
    """

    def __init__(self, width: int, height: int, step: int):
        if step < 2 or step & (step - 1):
            raise ValueError(f"coarse step must be a power of two >= 2, got {step}")
        self.width, self.height = int(width), int(height)
        self.sizes: list[int] = []
        c = int(step)
        while c >= 2:
            self.sizes.append(c)
            c //= 2
        self.shapes = [(-(-self.height // c), -(-self.width // c)) for c in self.sizes]
        ny, nx = self.shapes[0]
        xs = np.minimum(np.arange(nx + 1) * step, self.width - 1)
        ys = np.minimum(np.arange(ny + 1) * step, self.height - 1)
        self.lattice = np.unique((ys[:, None] * self.width + xs[None, :]).ravel())
        jj, ii = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        self.top_blocks = (ii.ravel(), jj.ravel())


@dataclass
class FrameCounts:
    """Per object code (background last): pixel counts, inclusive boxes, and whether each count is exact."""

    counts: np.ndarray
    x_min: np.ndarray
    y_min: np.ndarray
    x_max: np.ndarray
    y_max: np.ndarray
    exact: np.ndarray
    rays: int


class FrameCast:
    """The coarse-to-fine cast of one frame, kept between passes; ``resolve`` makes chosen objects exact.

    ``bounds`` gives every object a sound interval: the lower end counts the cast
    pixels that show it, the upper end adds every uncast pixel inside its
    footprint (no pixel outside can show it). An object whose interval has
    closed (no uncast pixel left in its footprint) has the full cast's count and box.
    Between uses the pixel image is stored compressed (``close``/``open``), so a
    scan's frames are never cast twice.
    """

    def __init__(
        self,
        grid: BlockGrid,
        cam: CameraRays,
        pose: np.ndarray,
        raycaster: MeshRaycaster,
        codes_lut: np.ndarray,
        codes: int,
    ):
        self.grid, self.cam, self.pose = grid, cam, pose
        self.raycaster, self.lut, self.codes = raycaster, codes_lut, codes
        W, H = grid.width, grid.height
        self.image: np.ndarray | None = np.full(W * H, UNCAST, dtype=np.int32)
        self._packed: bytes | None = None
        self._cast_pixels: list[np.ndarray] = []
        self._footprints: FrameFootprints | None = None
        self._cast(grid.lattice)
        self._leaves: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (level, i, j, code)
        self._states: list[np.ndarray] = []
        i, j = grid.top_blocks
        for level, c in enumerate(grid.sizes):
            state = np.full(grid.shapes[level], -2, dtype=np.int32)
            x0, x1 = np.minimum(i * c, W - 1), np.minimum((i + 1) * c, W - 1)
            y0, y1 = np.minimum(j * c, H - 1), np.minimum((j + 1) * c, H - 1)
            img = self.image
            a = img[y0 * W + x0]
            same = (a == img[y0 * W + x1]) & (a == img[y1 * W + x0]) & (a == img[y1 * W + x1])
            state[j, i] = np.where(same, a, -1)
            self._states.append(state)
            self._leaves.append((level, i[same], j[same], a[same]))
            i, j = i[~same], j[~same]
            if i.size == 0:
                break
            # Split the mixed blocks: children at half size, and the pixels of their corners.
            h = c // 2
            ci = np.concatenate([2 * i, 2 * i + 1, 2 * i, 2 * i + 1])
            cj = np.concatenate([2 * j, 2 * j, 2 * j + 1, 2 * j + 1])
            exists = (ci * h < W) & (cj * h < H)
            ci, cj = ci[exists], cj[exists]
            xs = np.minimum(np.stack([ci * h, (ci + 1) * h]), W - 1)
            ys = np.minimum(np.stack([cj * h, (cj + 1) * h]), H - 1)
            corner_pixels = (ys[:, None, :] * W + xs[None, :, :]).ravel()
            corner_pixels = corner_pixels[img[corner_pixels] == UNCAST]
            if corner_pixels.size:
                self._cast(np.unique(corner_pixels))
            i, j = ci, cj
        # Blocks still mixed at size 2 were split into single pixels, every one of which is now cast.

    # --- state between passes ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Store the pixel image compressed (a frame waits for the next pass at a few kilobytes)."""
        if self.image is not None:
            self._packed = zlib.compress(self.image.astype(np.int16 if self.codes < 32000 else np.int32).tobytes(), 1)
            self._packed_dtype = np.int16 if self.codes < 32000 else np.int32
            self.image = None

    def open(self) -> None:
        if self.image is None:
            self.image = np.frombuffer(zlib.decompress(self._packed), dtype=self._packed_dtype).astype(np.int32)
            self._packed = None

    # --- casting ---------------------------------------------------------------------------------------------------

    def _cast(self, pixels: np.ndarray) -> None:
        """Cast grid pixels, in row-major order (neighbouring rays share BVH nodes: a cheaper cast per ray)."""
        triangles = self.raycaster.cast_triangle_ids(self.cam.rays_at(self.pose, pixels))
        self.image[pixels] = self.lut[triangles]
        self._cast_pixels.append(pixels)

    @property
    def rays(self) -> int:
        return int(sum(p.size for p in self._cast_pixels))

    def footprints(self, boxes) -> FrameFootprints:
        if self._footprints is None:
            self._footprints = FrameFootprints(boxes, self.cam, self.pose)
        return self._footprints

    def resolve(self, wanted: np.ndarray, boxes) -> int:
        """Cast every uncast pixel that could show an object flagged in ``wanted`` (per code); returns the rays cast.

        Afterwards each flagged object has no uncast pixel left in its footprint: its interval is closed.
        """
        wanted = np.asarray(wanted, dtype=bool)[: self.codes]
        if not wanted.any():
            return 0
        found = self.footprints(boxes).pixels(wanted)
        if found is None:
            return 0
        (v0, v1, u0, u1), mask = found
        W = self.grid.width
        roi = self.image.reshape(self.grid.height, W)[v0 : v1 + 1, u0 : u1 + 1]
        rows, cols = np.nonzero(mask & (roi == UNCAST))
        if rows.size:
            self._cast((rows + v0) * W + (cols + u0))
        return int(rows.size)

    def bounds(self, boxes) -> tuple[np.ndarray, np.ndarray]:
        """Per object code: (lower, upper) pixel counts, both sound (see the class docstring)."""
        self._tally()
        lower = self._cast_counts[: self.codes].copy()
        uncast = (self.image == UNCAST).reshape(self.grid.height, self.grid.width)
        return lower, lower + self.footprints(boxes).uncast_upper(uncast, self.codes)

    # --- counting ----------------------------------------------------------------------------------------------------

    def _locate(self, pixels: np.ndarray) -> np.ndarray:
        """The code of the leaf block holding each pixel, -1 for pixels of blocks split down to single pixels."""
        W = self.grid.width
        py, px = np.divmod(pixels, W)
        leaf = np.full(pixels.size, -1, dtype=np.int64)
        open_ = np.arange(pixels.size)
        for c, state in zip(self.grid.sizes, self._states):
            st = state[py[open_] // c, px[open_] // c]
            hit = st >= 0
            leaf[open_[hit]] = st[hit]
            open_ = open_[st == -1]
            if open_.size == 0:
                break
        return leaf

    def _tally(self) -> None:
        """Bring the running per-code tallies up to date with pixels cast since the last call."""
        n = self.codes + 1
        if not hasattr(self, "_cast_counts"):
            self._cast_counts = np.zeros(n, dtype=np.int64)
            self._in_leaf = np.zeros(n, dtype=np.int64)
            self._leaf_area = np.zeros(n, dtype=np.int64)
            self._tallied = 0
            W, H = self.grid.width, self.grid.height
            for (level, i, j, code), c in zip(self._leaves, self.grid.sizes):
                if i.size:
                    area = (np.minimum((i + 1) * c, W) - i * c) * (np.minimum((j + 1) * c, H) - j * c)
                    self._leaf_area += np.bincount(code, weights=area, minlength=n).astype(np.int64)
        if self._tallied < len(self._cast_pixels):
            pixels = np.concatenate(self._cast_pixels[self._tallied :])
            self._tallied = len(self._cast_pixels)
            self._cast_counts += np.bincount(self.image[pixels], minlength=n)
            leaf = self._locate(pixels)
            self._in_leaf += np.bincount(leaf[leaf >= 0], minlength=n)

    def estimate(self) -> np.ndarray:
        """Per code: the quadtree's count (cast pixels, plus leaf blocks taken to show their corners' code)."""
        self._tally()
        return self._leaf_area + self._cast_counts - self._in_leaf

    def counts(self, lower: np.ndarray, upper: np.ndarray) -> FrameCounts:
        """Counts and inclusive boxes per code: the exact ones where ``lower == upper``, else estimates.

        An estimate is the quadtree's count clipped to ``[lower, upper]``; its box covers its cast pixels
        and the leaf blocks of its code. A closed interval's box is that of its cast pixels only.
        """
        n = self.codes
        exact = lower == upper
        counts = np.where(exact, lower, np.clip(self.estimate()[:n], lower, upper))
        grid, W, H = self.grid, self.grid.width, self.grid.height
        pixels = np.concatenate(self._cast_pixels)
        codes = self.image[pixels]
        py, px = np.divmod(pixels, W)
        big = np.iinfo(np.int64).max
        m = n + 1
        cx_min, cy_min = np.full(m, big), np.full(m, big)
        cx_max, cy_max = np.full(m, -1), np.full(m, -1)
        np.minimum.at(cx_min, codes, px)
        np.minimum.at(cy_min, codes, py)
        np.maximum.at(cx_max, codes, px)
        np.maximum.at(cy_max, codes, py)
        x_min, y_min, x_max, y_max = cx_min.copy(), cy_min.copy(), cx_max.copy(), cy_max.copy()
        for (level, i, j, code), c in zip(self._leaves, grid.sizes):
            if i.size == 0:
                continue
            np.minimum.at(x_min, code, i * c)
            np.minimum.at(y_min, code, j * c)
            np.maximum.at(x_max, code, np.minimum((i + 1) * c, W) - 1)
            np.maximum.at(y_max, code, np.minimum((j + 1) * c, H) - 1)
        x_min = np.where(exact, cx_min[:n], x_min[:n])
        y_min = np.where(exact, cy_min[:n], y_min[:n])
        x_max = np.where(exact, cx_max[:n], x_max[:n])
        y_max = np.where(exact, cy_max[:n], y_max[:n])
        return FrameCounts(counts, x_min, y_min, x_max, y_max, exact, self.rays)
