"""Relative direction: standing by A, facing B (or facing away from B), where is C?

A, B and C are categories with one instance each in the scene, all visible.
The angle and its bin come from ``pipeline.geometry.direction``; this module
only chooses the triples (footprint and separation thresholds of the profile)
and words the question. Large scans have ~n³ triples, so they are visited in
an order seeded by (seed, scan, budget, type) and the search stops after the
profile's ``candidates_per_scene`` valid questions. Options are the bin
labels of the question's mode.
"""

from __future__ import annotations

import itertools

from pipeline.geometry.direction import MODES, direction_answer
from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question
from pipeline.qa.profiles import TaskRule
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

    objects = [
        inst
        for inst in ctx.unique_visible()
        if not rule.excludes(inst.category) and (max_xy is None or float(max(inst.box.xy_extent)) <= float(max_xy))
    ]
    # Triples are visited in a seeded order and the search stops after `candidates_per_scene` valid questions:
    # a large scan has ~n³ triples and the dataset-wide step keeps only a few per scene anyway.
    limit = int(p.get("candidates_per_scene", 60))
    triples = list(itertools.permutations(objects, 3))
    order = rng(ctx.seed, "rel_direction", ctx.key, ctx.budget, rule.question_type).permutation(len(triples))
    questions = []
    for index in order:
        if len(questions) >= limit:
            break
        a, b, c = triples[int(index)]
        pairs = [ctx.distance(a, b), ctx.distance(a, c), ctx.distance(b, c)]
        if min(pairs) < min_pair or (max_pair is not None and max(pairs) > float(max_pair)):
            continue
        result = direction_answer(
            a.box, b.box, c.box, backward, mode, margin_deg=margin, max_corner_outliers=max_corners
        )
        if result is None:
            continue
        label, info = result
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
                },
                answer_text=label,
                options=labels,
            )
        )
    return questions
