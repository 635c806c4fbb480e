"""The nine PinpointQA relations of a target to one neighbour.

The paper lists the relations and the evidence (object category, contact,
relative height, horizontal separation, shared supporting surface) but not
the mapping. Ours, first match wins (dz = target centroid z - neighbour
centroid z, dh = horizontal centroid separation, "contact" = shortest
distance <= 2 cm, placement as in ``pipeline.pinpoint.support``):

1. the neighbour is the target's chosen support                         -> on
2. contact, and the target rests on the neighbour (overlap, |gap| <= rest_gap) -> on
3. contact, and the neighbour covers the target (surface above its top)  -> under
4. contact otherwise (side by side): attached_to when the neighbour is a
   vertical / wall-mounted thing (``vertical_labels``), or the target is a
   mountable thing (``attachable_labels``) that does not share the
   neighbour's support; else                                            -> next_to
5. no contact, the neighbour covers the target and dz < 0               -> under
6. the target is over the neighbour (overlap) with |dz| > same_level_dz
   and they do not share a support                                      -> above
7. level: same supporting surface, or |dz| <= same_level_dz, or
   dh > level_ratio * |dz|: next_to when shortest <= next_to_distance,
   else                                                                 -> near
8. dz > 0: above when dh <= side_ratio * |dz|, else                     -> side_above
9. dz < 0: below when dh <= side_ratio * |dz|, else                     -> side_below
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.pinpoint.config import PinpointConfig

RELATIONS: tuple[str, ...] = (
    "on", "under", "above", "below", "side_above", "side_below", "next_to", "near", "attached_to",
)


@dataclass(frozen=True)
class PairEvidence:
    is_support: bool
    contact: bool
    shortest: float
    dz: float  # target centroid z - neighbour centroid z
    dh: float  # horizontal (xy) centroid separation
    rests_on_neighbor: bool  # target overlaps the neighbour with a resting gap
    over_neighbor: bool  # target overlaps the neighbour (any gap)
    neighbor_covers: bool  # neighbour has surface above the target's top inside its footprint
    same_support: bool  # neighbour stands on the target's chosen support at the same height (same shelf board)
    neighbor_vertical: bool  # neighbour label is a vertical / wall-mounted thing
    target_attachable: bool  # target label is a usually mounted / plugged thing


def classify_relation(e: PairEvidence, cfg: PinpointConfig) -> str:
    rel = cfg.relations
    same_level_dz = cfg.representation.same_level_dz
    adz = abs(e.dz)
    if e.is_support:
        return "on"
    if e.contact:
        if e.rests_on_neighbor:
            return "on"
        if e.neighbor_covers and e.dz < 0:
            return "under"
        if e.neighbor_vertical or (e.target_attachable and not e.same_support):
            return "attached_to"
        return "next_to"
    if e.neighbor_covers and e.dz < 0:
        return "under"
    if e.over_neighbor and e.dz > same_level_dz and not e.same_support:
        return "above"
    if e.same_support or adz <= same_level_dz or e.dh > rel.level_ratio * adz:
        return "next_to" if e.shortest <= rel.next_to_distance else "near"
    if e.dz > 0:
        return "above" if e.dh <= rel.side_ratio * adz else "side_above"
    return "below" if e.dh <= rel.side_ratio * adz else "side_below"
