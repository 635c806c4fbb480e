"""Placing the correct option so that every letter is equally often correct.

Within each group of multiple-choice questions (profile, type, budget, video
kind, number of options) questions are ranked by a draw fixed by (seed,
question id) and the k-th gets the correct answer at letter ``k mod n``, so
each letter is correct for the same share of the group up to one question,
across the whole benchmark. Distractors fill the other letters in an order
drawn from the same (seed, question id). Option texts never change, only
their letters, and the question id does not depend on option order.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import polars as pl

from pipeline.qa.ids import unit_draw
from pipeline.qa.templates import format_options, option_text
from pipeline.seeding import rng


def arrange_options(texts: Sequence[str], correct: str, target: int, seed: int, qid: str) -> list[str]:
    """Option texts with ``correct`` at index ``target`` and the distractors in a seeded order."""
    distractors = [t for t in texts if t != correct]
    order = rng(seed, "distractors", qid).permutation(len(distractors))
    arranged = [distractors[int(i)] for i in order]
    arranged.insert(int(target), correct)
    return arranged


def correct_text(row: dict) -> str:
    return json.loads(row["geometry"])["correct"]


def balance_letters(qa: pl.DataFrame, *, seed: int, letters: Sequence[str]) -> pl.DataFrame:
    """Reassign option letters of every MCQ row; numeric rows pass through unchanged."""
    if qa.is_empty():
        return qa
    rows = qa.to_dicts()
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row["options"]:
            group = (row["profile"], row["question_type"], row["budget"], row["video_kind"], len(row["options"]))
            groups[group].append(i)
    for (_, _, _, _, n), members in groups.items():
        members.sort(key=lambda i: (unit_draw(seed, "letter", rows[i]["id"]), rows[i]["id"]))
        for rank, i in enumerate(members):
            row = rows[i]
            texts = [option_text(o) for o in row["options"]]
            correct = correct_text(row)
            target = rank % n
            row["options"] = format_options(arrange_options(texts, correct, target, seed, row["id"]), letters)
            row["ground_truth"] = letters[target]
    return pl.DataFrame(rows, schema=qa.schema)
