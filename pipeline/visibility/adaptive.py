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

That gives an estimated count and box per object, which only guides what to
cast next. What decisions read are sound bounds (``FrameCast.bounds``): at least
the cast pixels showing the object, at most those plus every uncast pixel inside
its footprint (``pipeline.visibility.footprints``: no pixel outside can show it).
``resolve`` casts uncast pixels of chosen footprints; once none is left the
object's count and box are those of its cast pixels - exactly the full cast's.
Which objects a frame must resolve is decided by
``pipeline.visibility.coarse_to_fine`` from the decisions that read the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.visibility.footprints import FrameFootprints

UNCAST = -1
CLOSE, OTHERS, OWN = "close", "others", "own"  # what FrameCast.resolve casts


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
        self.scratch = np.empty(self.width * self.height, dtype=np.int32)  # one frame's codes while its quadtree is cast


@dataclass
class FrameCounts:
    """Per object code: pixel counts, inclusive boxes, and whether each count is exact."""

    counts: np.ndarray
    x_min: np.ndarray
    y_min: np.ndarray
    x_max: np.ndarray
    y_max: np.ndarray
    exact: np.ndarray
    rays: int


class FrameCast:
    """The coarse-to-fine cast of one frame, kept between passes; ``resolve`` casts more of it.

    What is kept per frame is small: which pixels are still uncast (a packed bit mask), the quadtree's
    leaf blocks, and per object code the number and the box of the cast pixels showing it. The codes
    of cast pixels are not needed again, so a frame is never cast twice.
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
        m = codes + 1
        big = np.iinfo(np.int64).max
        self.cast_counts = np.zeros(m, dtype=np.int64)
        self.box = np.array([[big] * m, [big] * m, [-1] * m, [-1] * m], dtype=np.int64)  # x0, y0, x1, y1
        self.rays = 0
        self.closed = np.zeros(codes, dtype=bool)  # objects with no uncast pixel left in their footprint
        self._footprints: FrameFootprints | None = None
        img = grid.scratch
        img.fill(UNCAST)
        self._image = img
        cast = [grid.lattice]
        self._cast(grid.lattice)
        self._leaves: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (level, i, j, code)
        self._states: list[np.ndarray] = []
        i, j = grid.top_blocks
        for level, c in enumerate(grid.sizes):
            state = np.full(grid.shapes[level], -2, dtype=np.int32)
            x0, x1 = np.minimum(i * c, W - 1), np.minimum((i + 1) * c, W - 1)
            y0, y1 = np.minimum(j * c, H - 1), np.minimum((j + 1) * c, H - 1)
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
                corner_pixels = np.unique(corner_pixels)
                cast.append(corner_pixels)
                self._cast(corner_pixels)
            i, j = ci, cj
        # Blocks still mixed at size 2 were split into single pixels, every one of which is now cast.
        self._image = None
        uncast = img == UNCAST
        self._estimate = self._quadtree_estimate(np.concatenate(cast))
        self._packed = np.packbits(uncast)
        self._uncast: np.ndarray | None = None

    def _quadtree_estimate(self, cast: np.ndarray) -> np.ndarray:
        """Per code: cast pixels, plus the area of leaf blocks of its code not counting their cast pixels."""
        W, H, m = self.grid.width, self.grid.height, self.codes + 1
        area = np.zeros(m, dtype=np.int64)
        for (level, i, j, code), c in zip(self._leaves, self.grid.sizes):
            if i.size:
                block = (np.minimum((i + 1) * c, W) - i * c) * (np.minimum((j + 1) * c, H) - j * c)
                area += np.bincount(code, weights=block, minlength=m).astype(np.int64)
        leaf = self._locate(cast)
        in_leaf = np.bincount(leaf[leaf >= 0], minlength=m)
        return area + self.cast_counts - in_leaf

    # --- state between uses ------------------------------------------------------------------------------------------

    def open(self) -> np.ndarray:
        """The uncast mask as a flat bool array (unpacked until ``close``)."""
        if self._uncast is None:
            self._uncast = np.unpackbits(self._packed, count=self.grid.width * self.grid.height).view(bool)
        return self._uncast

    def close(self) -> None:
        if self._uncast is not None:
            self._packed = np.packbits(self._uncast)
            self._uncast = None

    # --- casting ---------------------------------------------------------------------------------------------------

    def _cast(self, pixels: np.ndarray) -> None:
        """Cast grid pixels (ascending: row-major, so neighbouring rays share BVH nodes) and tally them."""
        codes = self.lut[self.raycaster.cast_triangle_ids(self.cam.rays_at(self.pose, pixels))]
        if self._image is not None:
            self._image[pixels] = codes
        else:
            self._uncast[pixels] = False
        m = self.codes + 1
        self.cast_counts += np.bincount(codes, minlength=m)
        py, px = np.divmod(pixels, self.grid.width)
        np.minimum.at(self.box[0], codes, px)
        np.minimum.at(self.box[1], codes, py)
        np.maximum.at(self.box[2], codes, px)
        np.maximum.at(self.box[3], codes, py)
        self.rays += int(pixels.size)

    def footprints(self, boxes) -> FrameFootprints:
        if self._footprints is None:
            self._footprints = FrameFootprints(boxes, self.cam, self.pose)
        return self._footprints

    def resolve(self, wanted: np.ndarray, boxes, mode: str = CLOSE) -> int:
        """Cast uncast pixels that could show an object flagged in ``wanted`` (per code); returns the rays cast.

        ``close``: every such pixel, so each flagged object's interval closes (its exact count). ``others``:
        only those whose leaf block shows another code, which lowers the upper end where the object is
        probably not; ``own``: only those whose leaf block shows a flagged code, which raises the lower end.
        """
        wanted = np.asarray(wanted, dtype=bool)[: self.codes]
        if not wanted.any():
            return 0
        if mode == CLOSE:
            self.closed |= wanted
        found = self.footprints(boxes).pixels(wanted)
        if found is None:
            return 0
        (v0, v1, u0, u1), mask = found
        W = self.grid.width
        uncast = self.open()
        roi = uncast.reshape(self.grid.height, W)[v0 : v1 + 1, u0 : u1 + 1]
        rows, cols = np.nonzero(mask & roi)
        pixels = (rows + v0) * W + (cols + u0)
        if mode != CLOSE and pixels.size:
            guess = self._locate(pixels)
            flagged = np.append(wanted, False)[guess]  # guess is a code (background last) for every uncast pixel
            pixels = pixels[flagged if mode == OWN else ~flagged]
        if pixels.size:
            self._cast(pixels)
        return int(pixels.size)

    # --- counting ----------------------------------------------------------------------------------------------------

    def bounds(self, boxes) -> tuple[np.ndarray, np.ndarray]:
        """Per object code: (lower, upper) pixel counts, both sound (see the module docstring)."""
        lower = self.cast_counts[: self.codes].copy()
        uncast = self.open().reshape(self.grid.height, self.grid.width)
        upper = lower + self.footprints(boxes).uncast_upper(uncast, self.codes)
        return lower, np.where(self.closed, lower, upper)

    def estimate(self) -> np.ndarray:
        """Per code: the quadtree's count (cast pixels, plus leaf blocks taken to show their corners' code)."""
        return self._estimate

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

    def counts(self, lower: np.ndarray, upper: np.ndarray) -> FrameCounts:
        """Counts and inclusive boxes per code: the exact ones where ``lower == upper``, else estimates.

        An estimate is the quadtree's count clipped to ``[lower, upper]``; its box covers its cast pixels
        and the leaf blocks of its code. A closed interval's box is that of its cast pixels only.
        """
        n = self.codes
        exact = lower == upper
        counts = np.where(exact, lower, np.clip(self._estimate[:n], lower, upper))
        W, H = self.grid.width, self.grid.height
        x_min, y_min, x_max, y_max = (b.copy() for b in self.box)
        for (level, i, j, code), c in zip(self._leaves, self.grid.sizes):
            if i.size == 0:
                continue
            np.minimum.at(x_min, code, i * c)
            np.minimum.at(y_min, code, j * c)
            np.maximum.at(x_max, code, np.minimum((i + 1) * c, W) - 1)
            np.maximum.at(y_max, code, np.minimum((j + 1) * c, H) - 1)
        cx0, cy0, cx1, cy1 = self.box[:, :n]
        return FrameCounts(
            counts,
            np.where(exact, cx0, x_min[:n]),
            np.where(exact, cy0, y_min[:n]),
            np.where(exact, cx1, x_max[:n]),
            np.where(exact, cy1, y_max[:n]),
            exact,
            self.rays,
        )
