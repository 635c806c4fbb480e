"""PinpointQA's intermediate spatial representation of one scan, as two tables.

``pinpoint_targets``: small-vocabulary objects whose lowercase label is unique
in the scene, with their chosen supporting surface. ``pinpoint_neighbors``:
per target, every non-structural object whose centroid lies within
``neighborhood_radius`` of the target's (plus the chosen support when it is a
large object whose centroid lies farther, e.g. a phone at the edge of a bed:
support candidates also include every object whose box comes within
``contact_distance + max_support_gap`` of the target's, and the floor), with
the measurements every task is
generated from (shortest distance, horizontal separation, vertical offset,
contact, same level, relation, support). Questions are generated from these
tables alone, so a reviewer can audit any answer against one row.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.errors import ConfigError
from pipeline.pinpoint.config import PinpointConfig
from pipeline.geometry.distance import obb_pair_distances
from pipeline.pinpoint.geometry import ObjectGeometry, scene_geometry, shortest_distance
from pipeline.pinpoint.relations import PairEvidence, classify_relation
from pipeline.pinpoint.support import choose_support, placement, resting_height, support_candidate
from pipeline.scene.parsed import ParsedScan
from pipeline.vocab import small_object_category


def eligible_targets(geoms: dict[int, ObjectGeometry]) -> list[ObjectGeometry]:
    """Small-vocabulary objects whose lowercase label occurs once in the scene (ambiguous ones are dropped)."""
    counts = Counter(g.label for g in geoms.values())
    return [g for g in geoms.values() if g.small and not g.structural and counts[g.label] == 1]


def _floors(geoms: dict[int, ObjectGeometry], cfg: PinpointConfig) -> list[ObjectGeometry]:
    labels = cfg.support.floor_labels
    return [g for g in geoms.values() if g.structural and (g.label in labels or g.category in labels)]


def _labelled(geom: ObjectGeometry, labels: tuple[str, ...]) -> bool:
    return geom.label in labels or geom.category in labels


def _same_support(
    other: ObjectGeometry, support: ObjectGeometry | None, support_top: float | None, is_support: bool, cfg: PinpointConfig,
    resting: dict[tuple[int, int], float | None] | None = None,
) -> bool:
    """The neighbour stands on the target's support at the same height (same board of a shelf).

    ``resting`` keeps each (object, surface) resting height of the scan: neighbours of several targets on the
    same support ask for the same one (it depends on the two objects only).
    """
    if support is None or is_support or support_top is None:
        return False
    pair = (other.object_id, support.object_id)
    if resting is not None and pair in resting:
        height = resting[pair]
    else:
        height = resting_height(other, support, cfg)
        if resting is not None:
            resting[pair] = height
    return height is not None and abs(height - support_top) <= cfg.representation.same_level_dz


def _large_surfaces(
    target: ObjectGeometry, others: list[ObjectGeometry], neighbours: list[ObjectGeometry], cfg: PinpointConfig
) -> list[ObjectGeometry]:
    """Objects outside the centroid radius whose box nearly touches the target: a bed or counter can carry it."""
    reach = cfg.representation.contact_distance + cfg.support.max_support_gap
    near = {g.object_id for g in neighbours}
    candidates = [g for g in others if g.object_id != target.object_id and g.object_id not in near]
    if not candidates:
        return []
    # One batched call (bit-identical to one ``box_distance`` per pair: the same elementwise arithmetic).
    distances = obb_pair_distances([target.box] * len(candidates), [g.box for g in candidates])
    return [g for g, d in zip(candidates, distances) if float(d) <= reach]


def build_representation(
    key: str,
    objects: pl.DataFrame,
    scan: ParsedScan | None = None,
    config: PinpointConfig | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pinpoint_targets, pinpoint_neighbors) for one scan; ``scan`` may be None for box-only annotations."""
    cfg = config or PinpointConfig()
    rep = cfg.representation
    if rep.mesh_distance not in ("vertices", "surface"):
        raise ConfigError(f"pinpointqa.representation.mesh_distance: {rep.mesh_distance!r} is not 'vertices' or 'surface'")
    geoms = scene_geometry(scan, objects.filter(pl.col("key") == key) if "key" in objects.columns else objects)
    floors = _floors(geoms, cfg)
    others = [g for g in geoms.values() if not g.structural]
    centroids = np.array([g.centroid for g in others]) if others else np.empty((0, 3))
    target_rows: list[dict] = []
    neighbor_rows: list[dict] = []
    resting: dict[tuple[int, int], float | None] = {}
    for target in eligible_targets(geoms):
        samples = target.footprint_samples(rep.footprint_samples, rep.footprint_shrink)
        ring = target.footprint_samples(rep.footprint_samples, rep.footprint_shrink, rep.support_search_margin)
        dist = np.linalg.norm(centroids - target.centroid, axis=1) if len(others) else np.empty(0)
        neighbours = [g for g, d in zip(others, dist) if d <= rep.neighborhood_radius and g.object_id != target.object_id]
        large = _large_surfaces(target, others, neighbours, cfg)
        pool = neighbours + large + floors
        measured = {g.object_id: shortest_distance(target, g, rep.mesh_distance) for g in pool}
        inner = {g.object_id: placement(target, g, samples) for g in pool}
        candidates = [support_candidate(target, g, measured[g.object_id][0], inner[g.object_id], ring) for g in pool]
        support = choose_support(candidates, cfg)
        support_geom = support.geom if support is not None else None
        support_top = None
        if support is not None:
            p = support.placement
            support_top = target.z_range[0] if p.inside_box or p.top is None else p.top
        if support_geom is not None and support_geom in large:
            neighbours = sorted([*neighbours, support_geom], key=lambda g: g.object_id)
        for g in neighbours:
            shortest, source = measured[g.object_id]
            dz = float(target.centroid[2] - g.centroid[2])
            dh = float(np.linalg.norm(target.centroid[:2] - g.centroid[:2]))
            contact = shortest <= rep.contact_distance
            is_support = support_geom is not None and g.object_id == support_geom.object_id
            p = inner[g.object_id]
            evidence = PairEvidence(
                is_support=is_support,
                contact=contact,
                shortest=shortest,
                dz=dz,
                dh=dh,
                rests_on_neighbor=p.overlaps and p.gap is not None and abs(p.gap) <= cfg.support.rest_gap,
                over_neighbor=p.overlaps,
                neighbor_covers=p.covers,
                same_support=_same_support(g, support_geom, support_top, is_support, cfg, resting),
                neighbor_vertical=_labelled(g, cfg.relations.vertical_labels),
                target_attachable=_labelled(target, cfg.relations.attachable_labels),
            )
            neighbor_rows.append(
                {
                    "key": key,
                    "target_id": target.object_id,
                    "neighbor_id": g.object_id,
                    "neighbor_label": g.label,
                    "centroid_distance": float(np.linalg.norm(target.centroid - g.centroid)),
                    "shortest_distance": shortest,
                    "horizontal_distance": dh,
                    "vertical_offset": dz,
                    "contact": contact,
                    "same_level": abs(dz) <= rep.same_level_dz,
                    "relation": classify_relation(evidence, cfg),
                    "is_support": is_support,
                    "distance_source": source,
                }
            )
        target_rows.append(
            {
                "key": key,
                "object_id": target.object_id,
                "label": target.label,
                "category": small_object_category(target.label),
                "center": [float(v) for v in target.centroid],
                "support_object_id": None if support_geom is None else support_geom.object_id,
                "support_label": None if support_geom is None else support_geom.label,
                "neighbor_count": len(neighbours),
                "distance_source": "mesh" if target.has_mesh else "box",
            }
        )
    targets = schemas.from_rows("pinpoint_targets", target_rows).sort("object_id")
    neighbors = schemas.from_rows("pinpoint_neighbors", neighbor_rows).sort(["target_id", "neighbor_id"])
    return targets, neighbors
