"""``qa_candidates``: every eligible question of one scan and budget under one profile.

Generators are picked by the family named in the profile, so a profile adds or
retunes question types in YAML. Candidates are complete ``qa`` rows (ids,
answers, provisional option letters, audit geometry); the dataset-wide step
(``pipeline.qa.finalize``) later subsamples, caps and balances them.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.qa.context import BudgetContext
from pipeline.qa.dummy import dummy_questions
from pipeline.qa.families import FAMILIES
from pipeline.qa.ground_truth import Question
from pipeline.qa.ids import question_id, unit_draw
from pipeline.qa.profiles import Profile, load_profile
from pipeline.qa.templates import format_options
from pipeline.seeding import stable_int

def seed_of(config: Any) -> int:
    """The run seed from a ``Config``, a mapping with ``seed``, an int, or 0."""
    if config is None:
        return 0
    if isinstance(config, int):
        return config
    if isinstance(config, dict):
        return int(config.get("seed", 0))
    return int(getattr(config, "seed", 0))


def _row(ctx: BudgetContext, profile: Profile, q: Question, seed: int) -> dict:
    qid = question_id(ctx.key, ctx.budget, profile.name, q.question_type, q.video_kind, q.question, q.used_obj_ids)
    geometry = dict(q.geometry)
    if q.options is not None:
        geometry["correct"] = q.answer_text
        # Provisional letter, seeded by the id, distractors in generator order. Not the secret letter key: the
        # candidates are never released, every released letter is drawn anew under the key (``balance``), and
        # which questions are kept must not depend on the key.
        target = stable_int(seed, "letter", qid) % len(q.options)
        texts = [t for t in q.options if t != q.answer_text]
        texts.insert(target, q.answer_text)
        options = format_options(texts, profile.letters)
        ground_truth = profile.letters[target]
    else:
        options, ground_truth = [], q.answer_text
    return {
        "id": qid,
        "key": ctx.key,
        "dataset": ctx.dataset,
        "scene_id": ctx.scene_id,
        "profile": profile.name,
        "budget": ctx.budget,
        "question_type": q.question_type,
        "template": q.template_id,
        "question": q.question,
        "options": options,
        "ground_truth": ground_truth,
        "answer_value": q.answer_value,
        "used_obj_ids": [int(i) for i in q.used_obj_ids],
        "video": q.video or ctx.video_path(),
        "video_kind": q.video_kind,
        "distance_source": q.distance_source,
        "geometry": json.dumps(geometry, sort_keys=True, separators=(",", ":")),
        "instruction": None,
        "split": None,
    }


def _budget_available(
    frame_samples: pl.DataFrame | None, object_visibility: pl.DataFrame, key: str, budget: str
) -> bool:
    """Whether the scan has a video at this budget: sampled frames, or (annotation-only) a visibility decision."""
    if frame_samples is not None and not frame_samples.filter(pl.col("key") == key).is_empty():
        return not frame_samples.filter((pl.col("key") == key) & (pl.col("budget") == budget)).is_empty()
    return not object_visibility.filter((pl.col("key") == key) & (pl.col("budget") == budget)).is_empty()


def generate_candidates(
    objects: pl.DataFrame,
    rooms: pl.DataFrame,
    object_visibility: pl.DataFrame,
    frame_samples: pl.DataFrame | None,
    dummy_videos: pl.DataFrame | None,
    *,
    key: str,
    budget: str,
    profile: str | Profile,
    config: Any = None,
) -> pl.DataFrame:
    """All candidate questions of scan ``key`` at ``budget`` under ``profile`` (``qa_candidates`` schema)."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    budget = str(budget)
    seed = seed_of(config)
    if not _budget_available(frame_samples, object_visibility, key, budget):
        return schemas.empty("qa_candidates")
    ctx = BudgetContext(key, budget, objects, rooms, object_visibility, seed=seed)
    rows: list[dict] = []
    real: list[tuple[str, Question]] = []
    for rule in prof.tasks.values():
        if budget in rule.skip_budgets:
            continue
        type_rows = []
        for q in FAMILIES[rule.family](ctx, rule):
            row = _row(ctx, prof, q, seed)
            type_rows.append(row)
            real.append((row["id"], q))
        if rule.max_candidates is not None and len(type_rows) > rule.max_candidates:
            type_rows.sort(key=lambda r: (unit_draw(seed, "candidates", r["id"]), r["id"]))
            type_rows = type_rows[: rule.max_candidates]
        rows.extend(type_rows)
    kept_ids = {r["id"] for r in rows}
    real = [(qid, q) for qid, q in real if qid in kept_ids]
    for q in dummy_questions(ctx, real, dummy_videos, prof.dummy):
        rows.append(_row(ctx, prof, q, seed))
    unique = {}
    for row in rows:
        unique.setdefault(row["id"], row)
    ordered = sorted(unique.values(), key=lambda r: (r["question_type"], r["video_kind"], r["id"]))
    return schemas.from_rows("qa_candidates", ordered)
