"""The scan's visibility from a coarse-to-fine cast, exact wherever a SPEC §3 decision reads a count - by construction.

``pipeline.visibility.adaptive`` casts each frame coarsely and traces silhouettes
at full resolution. Every object then has a sound interval per frame: *lower* =
cast pixels showing it, *upper* = lower + uncast pixels inside its footprint (no
pixel outside a footprint can show the object). A decision is settled when the
interval cannot straddle it; otherwise more of that object's footprint is cast
(first the uncast pixels the quadtree guesses show something else or the object
itself, whichever side the estimate is on; then all of them, which closes the
interval: the full cast's count and box). No margin or estimate ever decides:

* **seen or not** (``visible_pixels > 0``: which rows exist, ``frames_visible``,
  the query-drop frames of the dummy videos): ``lower > 0`` proves seen,
  ``upper == 0`` proves unseen; every object in every frame (pass 1).
* **meets the rule** (``frame_fraction > fraction_threshold`` or, for small
  objects, ``visible_pixels >= small_object_pixels``), read by ``visible`` and
  ``first_frame``: settled per budget in rank order up to the first frame that
  surely meets it (in every frame for objects with a reviewer override).
* **best frame** per budget (largest fraction, ties to the lowest rank, as
  ``object_visibility`` sorts): a frame is out when its upper end is below some
  frame's lower end or below the best closed frame (equal and a later rank: out
  too); the rest compete until one closed frame beats them all. The likely winner
  (largest estimate) is closed first so that its value prunes the others.

Frames keep their cast state between rounds (nothing is cast twice). Rows whose
interval stayed open say ``pixels_exact = false``: their count is the quadtree's
estimate clipped to the interval, their box an estimate; no decision read them.
Budgets are ``pipeline.frames.budgets.sample_frames`` of the same frames and
config, as ``frame_samples`` is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.config import Config
from pipeline.frames.budgets import sample_frames
from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.visibility.adaptive import CLOSE, OTHERS, OWN, BlockGrid, FrameCast, FrameCounts
from pipeline.visibility.footprints import ObjectBoxes


@dataclass
class CastFrame:
    frame_index: int
    pose: np.ndarray  # the pose the rays are cast from (sky-up turned)
    cam: CameraRays


@dataclass
class ObjectFlags:
    """Per object code: which pixel rule ``object_visibility`` may apply (small objects also have the 150-pixel floor).

    An object the ``objects`` table does not describe may get either (``object_visibility`` is given its own
    ``objects``), so both rules are settled for it.
    """

    may_be_small: np.ndarray
    may_be_large: np.ndarray


def object_flags(objects: pl.DataFrame | None, key: str, object_ids: np.ndarray) -> ObjectFlags:
    """Flags from the scan's ``objects`` table; without it (or a row) both rules are settled."""
    n = len(object_ids)
    if objects is None:
        return ObjectFlags(np.ones(n, dtype=bool), np.ones(n, dtype=bool))
    rows = objects.filter(pl.col("key") == key) if "key" in objects.columns else objects
    small = dict(zip(rows["object_id"].to_list(), rows["small_object"].fill_null(False).to_list()))
    known = np.array([int(i) in small for i in object_ids], dtype=bool)
    is_small = np.array([bool(small.get(int(i), False)) for i in object_ids], dtype=bool)
    return ObjectFlags(is_small | ~known, ~is_small | ~known)


class CoarseToFineScan:
    """All frames of one scan, cast coarse-to-fine, with every count a decision reads proven exact."""

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
        every_frame: np.ndarray | None = None,
    ):
        v = config.visibility
        self.frames = cast_frames
        self.raycaster, self.lut = raycaster, codes_lut
        self.n = len(object_ids)
        self.flags = flags
        # Objects with a reviewer override: their per-frame rule is settled in every frame, not only up to
        # the first frame that meets it (an override can switch that frame off).
        self.every_frame = np.zeros(self.n, dtype=bool) if every_frame is None else every_frame
        self.threshold = float(v.fraction_threshold)
        self.floor = int(v.small_object_pixels)
        self.step = int(v.coarse_step)
        self.boxes = ObjectBoxes(vertices, triangles, codes_lut, self.n, float(v.footprint_cell))
        self._grids: dict[tuple[int, int], BlockGrid] = {}
        self.budgets = self._budget_positions(key, frames, config)
        self.casts: list[FrameCast] = []
        count = len(cast_frames)
        self.lower = np.zeros((count, self.n), dtype=np.int64)
        self.upper = np.zeros((count, self.n), dtype=np.int64)
        self.estimate = np.zeros((count, self.n), dtype=np.int64)
        self.pixels = np.array([f.cam.grid_width * f.cam.grid_height for f in cast_frames], dtype=np.int64)
        self.passes = 0
        self.rays = {"quadtree": 0, "unseen": 0, "first_frame": 0, "best_frame": 0}
        # Per frame and object: partial resolutions already tried (the next request for it closes the interval).
        self.tried = {OTHERS: np.zeros((count, self.n), dtype=bool), OWN: np.zeros((count, self.n), dtype=bool)}

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

    def _update(self, p: int) -> None:
        fc = self.casts[p]
        self.lower[p], self.upper[p] = fc.bounds(self.boxes)
        self.estimate[p] = np.clip(fc.estimate()[: self.n], self.lower[p], self.upper[p])

    def _first_cast(self, p: int) -> None:
        """Quadtree cast of frame ``p``, then 'seen or not' proven for every object (``visible_pixels > 0``)."""
        frame = self.frames[p]
        cam = frame.cam
        size = (cam.grid_width, cam.grid_height)
        grid = self._grids.get(size)
        if grid is None:
            grid = self._grids[size] = BlockGrid(cam.grid_width, cam.grid_height, self.step)
        fc = FrameCast(grid, cam, frame.pose, self.raycaster, self.lut, self.n)
        self.casts.append(fc)
        self.rays["quadtree"] += fc.rays
        self._update(p)
        # 'Not seen' needs every pixel that could show the object cast; 'seen' needs one cast pixel.
        unsure = (self.lower[p] == 0) & (self.upper[p] > 0)
        if unsure.any():
            self.rays["unseen"] += fc.resolve(unsure, self.boxes)
            self._update(p)
        fc.close()

    # --- the scan ----------------------------------------------------------------------------------------------------

    def run(self) -> list[FrameCounts]:
        for p in range(len(self.frames)):
            self._first_cast(p)
        self.passes = 1
        while True:
            requests = self._requests()
            if not requests:
                break
            self.passes += 1
            for p in sorted(requests):
                fc = self.casts[p]
                fc.open()
                for (reason, mode), wanted in requests[p].items():
                    self.rays[reason] += fc.resolve(wanted, self.boxes, mode)
                    if mode in self.tried:
                        self.tried[mode][p] |= wanted
                self._update(p)
                fc.close()
        results = []
        for p, fc in enumerate(self.casts):
            fc.open()
            results.append(fc.counts(self.lower[p], self.upper[p]))
            fc.close()
        return results

    def _requests(self) -> dict[int, dict[str, np.ndarray]]:
        """Per frame and reason: the objects whose interval must close before every decision is settled."""
        n = self.n
        requests: dict[int, dict[str, np.ndarray]] = {}

        def ask(positions: np.ndarray, want: np.ndarray, reason: str, mode: str) -> None:
            rows = np.flatnonzero(want.any(axis=1))
            for r in rows:
                per = requests.setdefault(int(positions[r]), {})
                per[reason, mode] = per.get((reason, mode), np.zeros(n, dtype=bool)) | want[r]

        def ask_cheaply(positions: np.ndarray, want: np.ndarray, reason: str, mode: str, tried: np.ndarray) -> None:
            """A partial resolution first; where it was already tried, close the interval."""
            ask(positions, want & ~tried, reason, mode)
            ask(positions, want & tried, reason, CLOSE)

        for positions in self.budgets:
            if positions.size == 0:
                continue
            lower, upper = self.lower[positions], self.upper[positions]
            pixels = self.pixels[positions][:, None].astype(np.float64)
            lo, hi = lower / pixels, upper / pixels
            closed = lower == upper
            rank = np.arange(positions.size)[:, None]
            est = self.estimate[positions]
            want_first = np.zeros(lower.shape, dtype=bool)
            guessed = np.zeros(lower.shape, dtype=bool)
            for small, applies in ((True, self.flags.may_be_small), (False, self.flags.may_be_large)):
                # SPEC §3 per frame ("meets the rule"): settled when both ends of the interval agree.
                meets_lo = (lo > self.threshold) | (small & (lower >= self.floor))
                meets_hi = (hi > self.threshold) | (small & (upper >= self.floor))
                unsettled = (meets_lo != meets_hi) & applies[None, :]
                # visible / first_frame read the rule in rank order up to the first frame that surely meets it,
                # or else up to the first one the estimate says meets (closed this round).
                likely_meets = unsettled & ((est / pixels > self.threshold) | (small & (est >= self.floor)))
                surely = np.where(meets_lo.any(axis=0), meets_lo.argmax(axis=0), positions.size)
                likely = np.where(likely_meets.any(axis=0), likely_meets.argmax(axis=0), positions.size)
                first = np.minimum(surely, likely)
                want = unsettled & ((rank <= first[None, :]) | self.every_frame[None, :])
                want_first |= want
                guessed |= want & likely_meets
            # best frame: the largest fraction, ties to the lowest rank (object_visibility's sort). A frame is out
            # when its upper end is below some frame's lower end, or loses to the best closed frame.
            seen = lower > 0
            bar = np.where(seen, lo, -1.0).max(axis=0)
            value = np.where(seen & closed, lo, -1.0)
            best = value.max(axis=0)
            best_rank = value.argmax(axis=0)
            beaten = (hi < bar[None, :]) | (hi < best[None, :]) | ((hi == best[None, :]) & (rank > best_rank[None, :]))
            compete = seen & ~closed & ~beaten
            # Until an object has a closed competitor, close only the one with the largest estimate (most likely the
            # winner, so its value prunes the rest); then every frame still competing.
            guess = compete.any(axis=0) & ~(seen & closed & ~beaten).any(axis=0)
            est_value = est / pixels
            if guess.any():
                top = np.where(compete, est_value, -1.0).argmax(axis=0)
                pick = np.zeros_like(compete)
                pick[top[guess], np.flatnonzero(guess)] = True
                compete = np.where(guess[None, :], pick, compete)
            tried_others, tried_own = self.tried[OTHERS][positions], self.tried[OWN][positions]
            # Probably meets: cast its own leaf blocks (raises the lower end); probably not: the others' (lowers the upper).
            ask_cheaply(positions, want_first & guessed, "first_frame", OWN, tried_own)
            ask_cheaply(positions, want_first & ~guessed, "first_frame", OTHERS, tried_others)
            # The likely winner is closed; a frame whose estimate cannot reach the best closed one tries 'others' first.
            hopeless = (est_value < best[None, :]) & ~guess[None, :]
            ask_cheaply(positions, compete & hopeless, "best_frame", OTHERS, tried_others)
            ask(positions, compete & ~hopeless, "best_frame", CLOSE)
        return requests
