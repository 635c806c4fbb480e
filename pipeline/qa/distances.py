"""Absolute and relative distance questions from exact closest-point distances.

Distances are measured "from the closest point of each object": the exact
distance between the two oriented boxes (``pipeline.geometry.distance``), not
between centres. A relative-distance option that has several instances is
measured to its nearest *visible* instance (SPEC §3), and the question records
that instance in ``used_obj_ids`` together with the anchor.
"""

from __future__ import annotations

import itertools

from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question, one_decimal_answer
from pipeline.qa.ids import presentation_key
from pipeline.qa.rules import TaskRule
from pipeline.qa.subsets import spaced_subsets
from pipeline.qa.templates import render
from pipeline.seeding import rng

DISTANCE_SOURCE = "obb"


def _r(x: float) -> float:
    return round(float(x), 4)


def abs_distance(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    min_distance = float(rule.params.get("min_distance_m", 0.0))
    unique = [inst for inst in ctx.unique_visible() if not rule.excludes(inst.category)]
    questions = []
    for a, b in itertools.combinations(unique, 2):
        d = ctx.distance(a, b)
        if d < min_distance:
            continue
        first, second = (a, b) if presentation_key(ctx.key, a.category, b.category) % 2 == 0 else (b, a)
        text, value = one_decimal_answer(d)
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, obj1=first.category, obj2=second.category),
                used_obj_ids=[first.object_id, second.object_id],
                geometry={"names": [first.category, second.category], "distance_m": _r(d), "source": DISTANCE_SOURCE},
                answer_text=text,
                answer_value=value,
                distance_source=DISTANCE_SOURCE,
            )
        )
    return questions


def rel_distance(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    mode = rule.params.get("mode", "closest")
    k = int(rule.params.get("option_count", 4))
    min_option = float(rule.params.get("min_option_distance_m", 0.0))
    min_gap = float(rule.params.get("min_gap_m", 0.0))
    per_anchor = int(rule.params.get("sets_per_anchor", 3))
    questions = []
    for anchor in ctx.unique_visible():
        if rule.excludes(anchor.category):
            continue
        pool = []
        for category in ctx.categories:
            if category == anchor.category or rule.excludes(category):
                continue
            d, nearest = ctx.nearest_of(anchor, category)
            if d >= min_option:
                pool.append((category, d, nearest))
        gen = rng(ctx.seed, "rel_distance", ctx.key, ctx.budget, rule.question_type, anchor.object_id)
        for subset in spaced_subsets([p[1] for p in pool], k, min_gap, gen, wanted=per_anchor):
            chosen = [pool[i] for i in subset]
            # Order of the names in the question text: fixed per set, independent of the seed.
            chosen.sort(key=lambda p: presentation_key(ctx.key, anchor.category, p[0]))
            correct = (min if mode == "closest" else max)(chosen, key=lambda p: p[1])
            names = [p[0] for p in chosen]
            questions.append(
                Question(
                    question_type=rule.question_type,
                    template_id=rule.template_id,
                    question=render(rule.template, obj=anchor.category, **dict(zip("abcdef", names))),
                    used_obj_ids=[anchor.object_id] + [p[2].object_id for p in chosen],
                    geometry={
                        "names": [anchor.category] + names,
                        "anchor": anchor.category,
                        "option_distances_m": {p[0]: _r(p[1]) for p in chosen},
                        "measured_to": {p[0]: p[2].object_id for p in chosen},
                        "mode": mode,
                        "source": DISTANCE_SOURCE,
                    },
                    answer_text=correct[0],
                    options=names,
                    distance_source=DISTANCE_SOURCE,
                )
            )
    return questions
