"""Which surface a small object rests on (the PinpointQA "supporting surface").

The paper names the criteria (contact first, then geometrically consistent
placement, semantic suitability and proximity) but not the rule. Ours:

1. Placement of the target over a candidate: vertical lines through points of
   the target's footprint (its centre plus an n x n grid over the shrunk box
   footprint) are intersected with the candidate's surface. Per line we take
   the highest surface point at or below the target's centroid height; the
   candidate's *local top* is the median over lines (robust to stray vertices
   of scanned segments); the candidate *overlaps* the target horizontally
   when any line meets it there. ``gap`` = target bottom - local top (negative when
   the target sinks into the surface, e.g. a cushion).
   Scanned surfaces have holes where the object occluded them, so when the
   footprint meets nothing the same query runs over the footprint grown by
   ``support_search_margin`` (such candidates rank after direct ones).
2. A candidate is *geometrically valid* when it overlaps, the target's centroid
   is above its local top and gap <= ``max_support_gap`` (any negative gap is
   accepted: cushions and segmentation bleed sink a target into its surface).
   A candidate found only over the grown footprint must instead satisfy
   |gap| <= ``max_support_gap`` and be in contact (shortest distance <=
   ``contact_distance``).
   A box-only candidate with a suitable label is also valid when its box
   contains the target centroid: the annotated box of a shelf, cabinet or
   sofa encloses the boards and seat we cannot see, so an object inside it
   rests on it.
3. Valid candidates are ranked by: contact, resting gap (|gap| <= ``rest_gap``),
   semantic suitability (label in ``surface_labels``), direct over grown
   footprint, coverage (share of footprint lines meeting the surface:
   a target bleeding over the rim of a neighbouring bed stays on its
   nightstand), |gap|, shortest
   distance, object id. The first is the support; none valid means no support.

The floor is structural (never a neighbour) but is a candidate here, so an
object lying on the floor is "on the floor".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.pinpoint.config import PinpointConfig
from pipeline.pinpoint.geometry import ObjectGeometry


@dataclass(frozen=True)
class Placement:
    """How a target sits relative to one other object's surface, straight above or below it."""

    overlaps: bool  # some footprint line meets the other's surface at or below the target centroid
    top: float | None  # median over footprint lines of the highest such surface point
    gap: float | None  # target bottom - top
    covers: bool  # the other has surface above the target's top inside the footprint (target is under it)
    coverage: float  # fraction of footprint lines that meet the other's surface at or below the target centroid
    inside_box: bool  # box-only other whose box contains the target centroid


def placement(target: ObjectGeometry, other: ObjectGeometry, samples: np.ndarray) -> Placement:
    cz = float(target.centroid[2])
    z_bottom, z_top = target.z_range
    heights = other.surface_heights(samples)
    below = [h[h <= cz] for h in heights]
    tops = [float(h.max()) for h in below if len(h)]
    # Median over the footprint lines, not max: scanned segments carry stray vertices (floor bits up a wall).
    top = float(np.median(tops)) if tops else None
    covers = any(bool(np.any(h > z_top)) for h in heights)
    inside = not other.has_mesh and bool(other.box.contains(target.centroid[None, :])[0])
    return Placement(
        overlaps=top is not None,
        top=top,
        gap=None if top is None else z_bottom - top,
        covers=covers,
        coverage=len(tops) / len(heights) if heights else 0.0,
        inside_box=inside,
    )


@dataclass(frozen=True)
class SupportCandidate:
    geom: ObjectGeometry
    shortest: float
    placement: Placement  # over the footprint, or over the grown footprint when the footprint met nothing
    direct: bool  # the placement comes from the footprint itself


def support_candidate(
    target: ObjectGeometry, other: ObjectGeometry, shortest: float, inner: Placement, ring_samples: np.ndarray
) -> SupportCandidate:
    """Reconstructed surfaces have holes where an object occluded them, so fall back to the grown footprint."""
    if inner.overlaps or inner.inside_box:
        return SupportCandidate(other, shortest, inner, True)
    return SupportCandidate(other, shortest, placement(target, other, ring_samples), False)


def is_suitable(geom: ObjectGeometry, cfg: PinpointConfig) -> bool:
    labels = cfg.support.surface_labels
    return geom.label in labels or geom.category in labels


def is_valid_support(cand: SupportCandidate, cfg: PinpointConfig) -> bool:
    p = cand.placement
    if p.inside_box and is_suitable(cand.geom, cfg):
        return True
    if not p.overlaps or p.gap is None or p.gap > cfg.support.max_support_gap:
        return False
    if cand.direct:
        return True  # centroid above the surface right under it; a negative gap is sinking or segment bleed
    # Surface found only around the footprint (a hole under the object) is weak evidence: require contact.
    return p.gap >= -cfg.support.max_support_gap and cand.shortest <= cfg.representation.contact_distance


def support_rank(cand: SupportCandidate, cfg: PinpointConfig) -> tuple:
    p = cand.placement
    gap = abs(p.gap) if p.gap is not None and not p.inside_box else cfg.support.max_support_gap
    return (
        cand.shortest > cfg.representation.contact_distance,
        gap > cfg.support.rest_gap,
        not is_suitable(cand.geom, cfg),
        not cand.direct,
        -round(p.coverage, 2),
        round(gap, 6),
        round(cand.shortest, 6),
        cand.geom.object_id,
    )


def choose_support(candidates: list[SupportCandidate], cfg: PinpointConfig) -> SupportCandidate | None:
    valid = [c for c in candidates if is_valid_support(c, cfg)]
    return min(valid, key=lambda c: support_rank(c, cfg)) if valid else None


def resting_height(obj: ObjectGeometry, surface: ObjectGeometry, cfg: PinpointConfig) -> float | None:
    """Height of ``surface`` under ``obj`` when ``obj`` stands on it (resting gap), else None.

    Used for "shares the target's supporting surface": two objects on the same
    bookshelf but on different boards rest at different heights and are not
    side by side.
    """
    rep = cfg.representation
    p = placement(obj, surface, obj.footprint_samples(rep.footprint_samples, rep.footprint_shrink))
    if not p.overlaps:
        grown = obj.footprint_samples(rep.footprint_samples, rep.footprint_shrink, rep.support_search_margin)
        p = placement(obj, surface, grown)
    if p.inside_box and is_suitable(surface, cfg):
        return obj.z_range[0]
    if p.overlaps and p.gap is not None and abs(p.gap) <= cfg.support.rest_gap:
        return p.top
    return None
