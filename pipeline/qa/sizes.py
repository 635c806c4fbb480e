"""Object size (longest box side) and room size (polygon area) questions.

An object size question names a category with exactly one instance in the
scene, and that instance must be visible under the budget. The longest side
is taken over all three extents, whichever rotation column is vertical.
Room size needs no visibility: it is asked only at budgets whose videos show
the whole walk-through (the profile skips 16 frames).
"""

from __future__ import annotations

from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question, centimetre_answer, one_decimal_answer
from pipeline.qa.rules import TaskRule
from pipeline.qa.templates import render


def _r(x: float) -> float:
    return round(float(x), 4)


def object_size(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    questions = []
    for inst in ctx.unique_visible():
        if rule.excludes(inst.category):
            continue
        longest = float(max(inst.box.extent))
        text, value = centimetre_answer(longest)
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, obj=inst.category),
                used_obj_ids=[inst.object_id],
                geometry={
                    "names": [inst.category],
                    "extent_m": [_r(e) for e in inst.box.extent],
                    "longest_m": _r(longest),
                },
                answer_text=text,
                answer_value=value,
            )
        )
    return questions


def room_size(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    room = ctx.rooms.get(str(rule.params.get("room_kind", "scene")))
    if room is None or room.area_m2 <= 0:
        return []
    text, value = one_decimal_answer(room.area_m2)
    return [
        Question(
            question_type=rule.question_type,
            template_id=rule.template_id,
            question=render(rule.template),
            used_obj_ids=[],
            geometry={
                "names": [],
                "room_kind": room.kind,
                "area_m2": _r(room.area_m2),
                "room_source": room.source,
                "has_polygon": room.polygon is not None,
            },
            answer_text=text,
            answer_value=value,
        )
    ]
