"""Which surface a small object rests on (the PinpointQA "supporting surface").

The paper names the criteria (contact first, then geometrically consistent
placement, semantic suitability and proximity) but not the rule. Ours:

1. Placement of the target over a candidate: vertical lines through points of
   the target's footprint (its centre plus an n x n grid over the shrunk box
   footprint) are intersected with the candidate's surface. The candidate's
   *local top* is the highest surface point met at or below the target's
   centroid height; the candidate *overlaps* the target horizontally when any
   line meets it there. ``gap`` = target bottom - local top (negative when
   the target sinks into the surface, e.g. a cushion).
2. A candidate is *geometrically valid* when it overlaps, the target's centroid
   is above its local top, and it is in contact (shortest distance <=
   ``contact_distance``) or its gap is within ``max_support_gap``.
   A box-only candidate with a suitable label is also valid when its box
   contains the target centroid: the annotated box of a shelf, cabinet or
   sofa encloses the boards and seat we cannot see, so an object inside it
   rests on it.
3. Valid candidates are ranked by: contact, resting gap (|gap| <= ``rest_gap``),
   semantic suitability (label in ``surface_labels``), |gap|, shortest
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
    top: float | None  # highest such surface point
    gap: float | None  # target bottom - top
    covers: bool  # the other has surface above the target's top inside the footprint (target is under it)
    inside_box: bool  # box-only other whose box contains the target centroid


def placement(target: ObjectGeometry, other: ObjectGeometry, samples: np.ndarray) -> Placement:
    cz = float(target.centroid[2])
    z_bottom, z_top = target.z_range
    heights = other.surface_heights(samples)
    below = [h[h <= cz] for h in heights]
    tops = [float(h.max()) for h in below if len(h)]
    top = max(tops) if tops else None
    covers = any(bool(np.any(h > z_top)) for h in heights)
    inside = not other.has_mesh and bool(other.box.contains(target.centroid[None, :])[0])
    return Placement(
        overlaps=top is not None,
        top=top,
        gap=None if top is None else z_bottom - top,
        covers=covers,
        inside_box=inside,
    )


@dataclass(frozen=True)
class SupportCandidate:
    geom: ObjectGeometry
    shortest: float
    placement: Placement


def is_suitable(geom: ObjectGeometry, cfg: PinpointConfig) -> bool:
    labels = cfg.support.surface_labels
    return geom.label in labels or geom.category in labels


def is_valid_support(cand: SupportCandidate, cfg: PinpointConfig) -> bool:
    p = cand.placement
    if p.inside_box and is_suitable(cand.geom, cfg):
        return True
    if not p.overlaps or p.gap is None:
        return False
    contact = cand.shortest <= cfg.representation.contact_distance
    return abs(p.gap) <= cfg.support.max_support_gap or (contact and p.gap <= cfg.support.max_support_gap)


def support_rank(cand: SupportCandidate, cfg: PinpointConfig) -> tuple:
    p = cand.placement
    gap = abs(p.gap) if p.gap is not None and not p.inside_box else cfg.support.max_support_gap
    return (
        cand.shortest > cfg.representation.contact_distance,
        gap > cfg.support.rest_gap,
        not is_suitable(cand.geom, cfg),
        round(gap, 6),
        round(cand.shortest, 6),
        cand.geom.object_id,
    )


def choose_support(candidates: list[SupportCandidate], cfg: PinpointConfig) -> SupportCandidate | None:
    valid = [c for c in candidates if is_valid_support(c, cfg)]
    return min(valid, key=lambda c: support_rank(c, cfg)) if valid else None


def rests_on(obj: ObjectGeometry, surface: ObjectGeometry, cfg: PinpointConfig) -> bool:
    """Whether ``obj`` stands on ``surface`` too (used for "shares the target's supporting surface")."""
    samples = obj.footprint_samples(cfg.representation.footprint_samples, cfg.representation.footprint_shrink)
    p = placement(obj, surface, samples)
    if p.inside_box and is_suitable(surface, cfg):
        return True
    return p.overlaps and p.gap is not None and abs(p.gap) <= cfg.support.rest_gap
