"""Relative direction: standing by A, facing B (or facing away from B), where is C?

A, B and C are categories with one instance each in the scene, all visible.
The angle and its bin come from ``pipeline.geometry.direction``; this module
only chooses the triples (size and separation thresholds of the profile:
closest-point distance in 3D and, with ``min_footprint_distance_m``, between
the boxes' floor-plane footprints, as the released ReVSI generator requires)
and words the question. Large scans have ~n³ triples, so they are visited in
an order seeded by (seed, scan, budget, type) and the search stops after the
profile's ``candidates_per_scene`` valid questions. Options are the bin
labels of the question's mode.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import shapely

from pipeline.geometry.direction import MODES, DirectionTable, direction_table
from pipeline.geometry.footprint import box_footprints
from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question
from pipeline.qa.rules import TaskRule
from pipeline.qa.templates import render
from pipeline.seeding import rng


def _r(x: float) -> float:
    return round(float(x), 4)


def rel_direction(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    p = rule.params
    mode = str(p.get("bins", "easy"))
    backward = p.get("facing", "toward") == "away"
    max_xy = p.get("max_xy_extent_m")
    min_pair = float(p.get("min_pair_distance_m") or 0.0)
    max_pair = p.get("max_pair_distance_m")
    margin = float(p.get("margin_deg", 0.0))
    max_corners = p.get("max_corners_other_bin")
    max_corners = 8 if max_corners is None else int(max_corners)
    labels = list(MODES[mode].labels)

    min_footprint = p.get("min_footprint_distance_m")
    objects = [
        inst
        for inst in ctx.unique_visible()
        if not rule.excludes(inst.category) and (max_xy is None or float(max(inst.box.xy_extent)) <= float(max_xy))
    ]
    footprints = (
        dict(zip([inst.object_id for inst in objects], box_footprints([inst.box for inst in objects])))
        if min_footprint is not None and objects else {}
    )
    # Triples are visited in a seeded order and the search stops after `candidates_per_scene` valid questions:
    # a large scan has ~n³ triples and the dataset-wide step keeps only a few per scene anyway. With
    # `per_class_candidates` a class that has that many stops taking more, so rare answers ("back") are
    # still looked for after the common ones are full (the answer-distribution control needs them).
    limit = int(p.get("candidates_per_scene", 60))
    per_class = p.get("per_class_candidates")
    per_class = None if per_class is None else int(per_class)
    taken = {label: 0 for label in labels}
    # Every ordered triple's answer at once (bit-identical to ``direction_answer`` per triple, a few ms instead of
    # ~0.1 ms per triple visited); the visit order and the stopping rule below are unchanged.
    table = _shared_direction_table([inst.box for inst in objects], backward, mode, margin, max_corners)
    n = len(objects)
    triples = ordered_triples(n)
    order = rng(ctx.seed, "rel_direction", ctx.key, ctx.budget, rule.question_type).permutation(len(triples))
    # Which triples pass the separation and footprint thresholds and have an answer, decided for all at once
    # over pair matrices (the same float values as one ``ctx.distance`` / shapely call per visited pair); the
    # visiting order and the stopping rule are unchanged, so the same questions come out.
    visit = triples[order]
    ia, ib, ic = visit[:, 0], visit[:, 1], visit[:, 2]
    at = np.array([ctx.index_of(inst) for inst in objects], dtype=np.int64)
    dist = ctx.distances[np.ix_(at, at)].reshape(n, n)  # the values ctx.distance gives, read in one step
    dist[np.arange(n), np.arange(n)] = 0.0
    ab, ac, bc = dist[ia, ib], dist[ia, ic], dist[ib, ic]
    keep = np.minimum(np.minimum(ab, ac), bc) >= min_pair
    if max_pair is not None:
        keep &= np.maximum(np.maximum(ab, ac), bc) <= float(max_pair)
    floor_of: dict[tuple[int, int], float] = {}
    if footprints:
        polygons = [footprints[inst.object_id] for inst in objects]
        # The distinct (x, y) pairs of the kept triples in lexicographic order, as ``np.unique(..., axis=0)``
        # gives them, from an n x n mask instead of a row sort.
        needed = np.zeros((n, n), dtype=bool)
        kept = visit[keep]
        for x, y in ((0, 1), (0, 2), (1, 2)):
            needed[kept[:, x], kept[:, y]] = True
        pairs_needed = np.argwhere(needed).astype(np.int64).reshape(-1, 2)
        floor = np.full((n, n), np.inf)
        if len(pairs_needed):  # one vectorised GEOS call: the same distance per pair as polygon.distance
            polygons = np.asarray(polygons, dtype=object)
            floor[pairs_needed[:, 0], pairs_needed[:, 1]] = shapely.distance(
                polygons[pairs_needed[:, 0]], polygons[pairs_needed[:, 1]]
            )
            floor_of.update(zip(map(tuple, pairs_needed.tolist()), floor[pairs_needed[:, 0], pairs_needed[:, 1]].tolist()))
        keep &= np.minimum(np.minimum(floor[ia, ib], floor[ia, ic]), floor[ib, ic]) >= float(min_footprint)
    keep &= table.label_index[ia, ib, ic] >= 0
    questions = []
    for i, j, k in visit[keep].tolist():
        if len(questions) >= limit or (per_class is not None and min(taken.values()) >= per_class):
            break
        a, b, c = objects[i], objects[j], objects[k]
        pairs = [float(dist[i, j]), float(dist[i, k]), float(dist[j, k])]
        if footprints:
            floor = [floor_of[(i, j)], floor_of[(i, k)], floor_of[(j, k)]]
        result = table.answer(i, j, k)
        label, info = result
        if per_class is not None and taken[label] >= per_class:
            continue
        taken[label] += 1
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, A=a.category, B=b.category, C=c.category),
                used_obj_ids=[a.object_id, b.object_id, c.object_id],
                geometry={
                    "names": [a.category, b.category, c.category],
                    "angle_deg": _r(info["angle_deg"]),
                    "boundary_margin_deg": _r(info["boundary_margin_deg"]),
                    "corner_outliers": int(info["corner_outliers"]),
                    "backward": backward,
                    "mode": mode,
                    "pair_distances_m": [_r(x) for x in pairs],
                    **({"footprint_distances_m": [_r(x) for x in floor]} if footprints else {}),
                },
                answer_text=label,
                options=labels,
            )
        )
    return questions


def ordered_triples(n: int) -> np.ndarray:
    """(n(n-1)(n-2), 3) every ordered triple of distinct indices, in ``itertools.permutations`` order."""
    grid = np.indices((n, n, n)).reshape(3, -1).T  # lexicographic, as permutations of range(n) come
    distinct = (grid[:, 0] != grid[:, 1]) & (grid[:, 0] != grid[:, 2]) & (grid[:, 1] != grid[:, 2])
    return np.ascontiguousarray(grid[distinct], dtype=np.int64).reshape(-1, 3)


# Budgets of a scan (and the two profiles) mostly see the same unique objects and ask with the same
# thresholds, so the same direction table comes up several times per scan: it is kept for reuse, keyed
# by the boxes' exact values and the parameters (the table is read, never changed, by its users).
_TABLES: OrderedDict[tuple, DirectionTable] = OrderedDict()
_TABLES_KEPT = 8


def _shared_direction_table(boxes, backward: bool, mode: str, margin: float, max_corners: int) -> DirectionTable:
    key = (
        tuple(
            np.asarray(b.center, dtype=float).tobytes() + np.asarray(b.extent, dtype=float).tobytes()
            + np.asarray(b.rotation, dtype=float).tobytes()
            for b in boxes
        ),
        bool(backward), mode, float(margin), int(max_corners),
    )
    table = _TABLES.get(key)
    if table is None:
        table = direction_table(boxes, backward, mode, margin_deg=margin, max_corner_outliers=max_corners)
        _TABLES[key] = table
        while len(_TABLES) > _TABLES_KEPT:
            _TABLES.popitem(last=False)
    else:
        _TABLES.move_to_end(key)
    return table
