"""Object counting: how many visible instances of one category (or two categories together).

Counts are over the budget's visible instances (SPEC §3), so the same scan can
give different answers at 16 and at all frames; a category with no visible
instance is never asked. The probabilistic keeps of SPEC §4 (co-occurring
counts of 1 and 2, multi-category totals of 4) are dataset-wide decisions made
in ``pipeline.qa.filters``; here every eligible question is produced.
"""

from __future__ import annotations

import itertools

from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question, count_answer
from pipeline.qa.ids import presentation_key
from pipeline.qa.rules import TaskRule
from pipeline.qa.templates import render


def _eligible(ctx: BudgetContext, rule: TaskRule) -> dict[str, int]:
    cooccurring = {c.lower() for c in rule.params.get("cooccurring", ())}
    min_count = int(rule.params.get("min_count", 2))
    out = {}
    for category in ctx.categories:
        if rule.excludes(category):
            continue
        n = len(ctx.by_category[category])
        if n >= min_count or (category.lower() in cooccurring and n >= 1):
            out[category] = n
    return out


def counting_single(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    questions = []
    for category, n in _eligible(ctx, rule).items():
        text, value = count_answer(n)
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, obj=category),
                used_obj_ids=[i.object_id for i in ctx.by_category[category]],
                geometry={"names": [category], "count": n, "scene_count": ctx.scene_counts[category]},
                answer_text=text,
                answer_value=value,
            )
        )
    return questions


def counting_multiple(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    min_count = int(rule.params.get("min_count", 2))
    counts = {c: len(ctx.by_category[c]) for c in ctx.categories if not rule.excludes(c)}
    eligible = sorted(c for c, n in counts.items() if n >= min_count)
    questions = []
    for a, b in itertools.combinations(eligible, 2):
        # Which category is named first is a fixed presentation choice, not a seeded one.
        first, second = (a, b) if presentation_key(ctx.key, a, b) % 2 == 0 else (b, a)
        total = counts[a] + counts[b]
        text, value = count_answer(total)
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, obj1=first, obj2=second),
                used_obj_ids=[i.object_id for c in (first, second) for i in ctx.by_category[c]],
                geometry={"names": [first, second], "counts": [counts[first], counts[second]], "count": total},
                answer_text=text,
                answer_value=value,
            )
        )
    return questions
