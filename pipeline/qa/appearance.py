"""Appearance order (VSI-Bench only): in which order do four categories first appear in the video?

A category's first appearance is the earliest ``first_timestamp`` of its
visible instances under the budget (the first sampled frame meeting the
visibility rule). Categories whose first appearances are closer than the
profile's gap are never asked together. Options are the true order plus
distinct permutations drawn with a generator seeded by the question.
"""

from __future__ import annotations

import itertools

from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question
from pipeline.qa.ids import presentation_key
from pipeline.qa.rules import TaskRule
from pipeline.qa.subsets import spaced_subsets
from pipeline.qa.templates import render
from pipeline.seeding import rng


def appearance_order(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    k = int(rule.params.get("category_count", 4))
    n_options = int(rule.params.get("option_count", 4))
    min_gap = float(rule.params.get("min_gap_s", 1.0))
    wanted = int(rule.params.get("sets_per_scene", 6))
    firsts = []
    for category in ctx.categories:
        if rule.excludes(category):
            continue
        times = [i.first_timestamp for i in ctx.by_category[category] if i.first_timestamp is not None]
        if times:
            firsts.append((category, min(times)))
    gen = rng(ctx.seed, "appearance_order", ctx.key, ctx.budget, rule.question_type)
    questions = []
    for subset in spaced_subsets([t for _, t in firsts], k, min_gap, gen, wanted=wanted):
        chosen = [firsts[i] for i in subset]
        order = [c for c, _ in sorted(chosen, key=lambda ct: ct[1])]
        listed = sorted(order, key=lambda c: presentation_key(ctx.key, "appearance", c))
        # Distractors: other orders of the same categories, drawn with a generator fixed by the question.
        perm_rng = rng(ctx.seed, "appearance_options", ctx.key, ctx.budget, *listed)
        others = [p for p in itertools.permutations(order) if list(p) != order]
        picks = perm_rng.choice(len(others), size=min(n_options - 1, len(others)), replace=False)
        option_texts = [", ".join(order)] + [", ".join(others[int(i)]) for i in sorted(picks)]
        ids = [i.object_id for c in order for i in ctx.by_category[c]]
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(rule.template, **dict(zip("abcdef", listed))),
                used_obj_ids=ids,
                geometry={"names": listed, "first_seen_s": {c: round(float(t), 3) for c, t in chosen}, "order": order},
                answer_text=option_texts[0],
                options=option_texts,
            )
        )
    return questions
