"""The scan's visibility from a coarse-to-fine cast, exact wherever a SPEC §3 decision reads a count.

``pipeline.visibility.adaptive`` casts each frame coarsely, traces silhouettes at
full resolution and can make any object's count exact (``resolve``). This module
decides which counts must be exact - every count some decision depends on:

* **fraction threshold** (``frame_fraction > fraction_threshold``) and **pixel
  floor** (``visible_pixels >= small_object_pixels``, small objects): an
  estimate decides only when it is farther from the threshold than its error
  margin (``exact_margin * coarse_step * sqrt(E) + exact_margin_pixels``); otherwise the
  count is resolved. So every per-frame "meets the rule" is the full cast's,
  and with it ``visible``, ``first_frame`` and ``rule`` of every budget.
* **any pixel at all** (``visible_pixels > 0``: ``frames_visible`` and the
  query-drop frames of the dummy videos): an object that no cast pixel shows but
  whose footprint is in the frame is resolved, so "not seen" is proven, not
  guessed (for every object when the scan's ``objects`` are not given, else for
  the non-structural ones - the only ones questions and dummy videos name).
* **best frame** per budget: the winning frame's count is resolved, and so is
  every other frame of the budget whose estimate plus margin could beat or tie
  it; repeated until the winner is exact and no estimate can reach it. So
  ``best_frame``, ``max_fraction`` and ``max_pixels`` are the full cast's.

Budgets are ``pipeline.frames.budgets.sample_frames`` of the same frames and
config, as ``frame_samples`` is. Every other count (an object far from both
thresholds and not competing for a best frame) is an estimate: its row says
``pixels_exact = false``. The margin is a measured bound, not a proof: on the
synthetic scans and the ScanNet fixture the largest estimate error is a small
part of it (``scan2qa bench build`` prints the ratio).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.config import Config
from pipeline.frames.budgets import sample_frames
from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.visibility.adaptive import BlockGrid, FrameCast, FrameCounts
from pipeline.visibility.footprints import ObjectBoxes


@dataclass
class CastFrame:
    frame_index: int
    pose: np.ndarray  # the pose the rays are cast from (sky-up turned)
    cam: CameraRays


@dataclass
class ObjectFlags:
    """Per object code: small-vocabulary object (pixel floor applies), and whether 'not seen' must be proven."""

    small: np.ndarray
    prove_unseen: np.ndarray


def object_flags(objects: pl.DataFrame | None, key: str, object_ids: np.ndarray) -> ObjectFlags:
    """Flags from the scan's ``objects`` table; without it every object may be small and must be proven unseen."""
    n = len(object_ids)
    if objects is None:
        return ObjectFlags(np.ones(n, dtype=bool), np.ones(n, dtype=bool))
    rows = objects.filter(pl.col("key") == key) if "key" in objects.columns else objects
    small = dict(zip(rows["object_id"].to_list(), rows["small_object"].fill_null(False).to_list()))
    structural = dict(zip(rows["object_id"].to_list(), rows["structural"].fill_null(False).to_list()))
    ids = [int(i) for i in object_ids]
    # An object the table does not know is treated like the table's own small/non-structural ones.
    return ObjectFlags(
        np.array([bool(small.get(i, True)) for i in ids], dtype=bool),
        np.array([not bool(structural.get(i, False)) for i in ids], dtype=bool),
    )


class CoarseToFineScan:
    """All frames of one scan, cast coarse-to-fine, with the exact counts the decisions need."""

    def __init__(
        self,
        key: str,
        frames: pl.DataFrame,
        cast_frames: list[CastFrame],
        raycaster: MeshRaycaster,
        codes_lut: np.ndarray,
        object_ids: np.ndarray,
        vertices: np.ndarray,
        triangles: np.ndarray,
        config: Config,
        flags: ObjectFlags,
    ):
        v = config.visibility
        self.frames = cast_frames
        self.raycaster, self.lut = raycaster, codes_lut
        self.n = len(object_ids)
        self.flags = flags
        self.threshold = float(v.fraction_threshold)
        self.floor = int(v.small_object_pixels)
        self.margin_rel = float(v.exact_margin)
        self.margin_px = float(v.exact_margin_pixels)
        self.step = int(v.coarse_step)
        self.boxes = ObjectBoxes(vertices, triangles, codes_lut, self.n, float(v.footprint_cell))
        self._grids: dict[tuple[int, int], BlockGrid] = {}
        self._buffers: dict[tuple[int, int], np.ndarray] = {}
        self.budgets = self._budget_positions(key, frames, config)
        self.results: list[FrameCounts | None] = [None] * len(cast_frames)
        self.passes = 0
        self.frame_casts = 0

    def _budget_positions(self, key: str, frames: pl.DataFrame, config: Config) -> list[np.ndarray]:
        """Per budget: positions into ``self.frames`` in rank order (frames not cast are left out)."""
        position = {f.frame_index: p for p, f in enumerate(self.frames)}
        samples = sample_frames(frames.filter(pl.col("key") == key), config)
        out = []
        for budget in sorted(set(samples["budget"].to_list())):
            rows = samples.filter(pl.col("budget") == budget).sort("rank")
            seen: set[int] = set()
            positions = []
            for frame_index in rows["frame_index"].to_list():
                p = position.get(int(frame_index))
                if p is not None and p not in seen:  # a frame sampled twice keeps its first (lowest) rank
                    seen.add(p)
                    positions.append(p)
            out.append(np.array(positions, dtype=np.int64))
        return out

    # --- one frame ---------------------------------------------------------------------------------------------------

    def margin(self, counts: np.ndarray) -> np.ndarray:
        """How far an estimated count may be from the full cast's: exact_margin * step * sqrt(E) + exact_margin_pixels.

        Misses are detail thinner than a block inside blocks whose corners agree, so they grow with the
        silhouette length (about sqrt(E)) times the block size; on the ScanNet fixture the largest error at
        step 8 is about 2.8 sqrt(E) px, 70% of this margin at the default exact_margin 0.5.
        """
        return self.margin_rel * self.step * np.sqrt(counts) + self.margin_px

    def _uncertain(self, fc: FrameCast, pixels: int) -> np.ndarray:
        """Codes whose estimate could fall on either side of a per-frame decision."""
        n = self.n
        est, exact = fc.estimate()
        est, exact = est[:n].astype(np.float64), exact[:n]
        d = self.margin(est)
        lo, hi = np.maximum(est - d, 0.0), est + d
        fraction = (lo / pixels > self.threshold) != (hi / pixels > self.threshold)
        floor = self.flags.small & ((lo >= self.floor) != (hi >= self.floor))
        need = (fraction | floor) & ~exact
        unseen = (est == 0) & self.flags.prove_unseen & ~exact
        if unseen.any():
            need |= unseen & fc.footprints(self.boxes).in_view(n)
        return need

    def cast_frame(self, position: int, required: np.ndarray | None = None) -> FrameCounts:
        frame = self.frames[position]
        cam = frame.cam
        size = (cam.grid_width, cam.grid_height)
        grid = self._grids.get(size)
        if grid is None:
            grid = self._grids[size] = BlockGrid(cam.grid_width, cam.grid_height, self.step)
            self._buffers[size] = np.empty(cam.grid_width * cam.grid_height, dtype=np.int32)
        fc = FrameCast(grid, cam, frame.pose, self.raycaster, self.lut, self.n, self._buffers[size])
        self.frame_casts += 1
        if required is not None and required.any():
            fc.resolve(required, self.boxes)
        pixels = cam.grid_width * cam.grid_height
        while True:
            need = self._uncertain(fc, pixels)
            if not need.any():
                return fc.counts()
            fc.resolve(need, self.boxes)

    # --- the scan ----------------------------------------------------------------------------------------------------

    def run(self) -> list[FrameCounts | None]:
        for p in range(len(self.frames)):
            self.results[p] = self.cast_frame(p)
        self.passes = 1
        while True:
            requests = self._best_frame_requests()
            if not requests:
                return self.results
            self.passes += 1
            for p in sorted(requests):
                previous = self.results[p]
                required = previous.exact[: self.n] | requests[p]
                self.results[p] = self.cast_frame(p, required)

    def _best_frame_requests(self) -> dict[int, np.ndarray]:
        """Frames whose count of some object must be exact before that object's best frame is certain."""
        n = self.n
        requests: dict[int, np.ndarray] = {}
        for positions in self.budgets:
            if positions.size == 0:
                continue
            rows = [self.results[p] for p in positions]
            counts = np.stack([r.counts[:n] for r in rows]).astype(np.float64)  # (frames, codes)
            exact = np.stack([r.exact[:n] for r in rows])
            pixels = np.array([self.frames[p].cam.grid_width * self.frames[p].cam.grid_height for p in positions], float)
            value = counts / pixels[:, None]
            upper = np.where(exact, value, (counts + self.margin(counts)) / pixels[:, None])
            lower = np.where(exact, value, np.maximum(counts - self.margin(counts), 0.0) / pixels[:, None])
            seen = counts > 0
            # The winner's value is at least the best lower bound; every frame that could reach it must be exact.
            bar = np.where(seen, lower, -1.0).max(axis=0)
            want_all = seen & ~exact & (upper >= bar[None, :])
            for code in np.flatnonzero(want_all.any(axis=0)):
                want = np.flatnonzero(want_all[:, code])
                for w in want:
                    p = int(positions[w])
                    if p not in requests:
                        requests[p] = np.zeros(n, dtype=bool)
                    requests[p][code] = True
        return requests
