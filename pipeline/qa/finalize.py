"""The dataset-wide ``qa`` step: from all scans' candidates to the released question table.

Order matters and is fixed: exclusions and subsampling (``filters``), then
per-scene caps, then dummy-video questions follow their real counterparts, then
letter balancing across the whole benchmark, then a stable sort. Everything is
a function of (seed, question id), so the same seed gives byte-identical
tables and a different seed changes only which questions are kept and the
letters of their options, never an answer.
"""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.qa.balance import balance_letters
from pipeline.qa.filters import apply_caps, apply_keep_rules, follow_real_questions
from pipeline.qa.profiles import Profile, load_profile

SORT_COLUMNS = ["key", "budget", "question_type", "video_kind", "id"]


def finalize_qa(candidates: pl.DataFrame, *, profile: str | Profile, seed: int) -> pl.DataFrame:
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    qa = schemas.conform("qa", candidates).filter(pl.col("profile") == prof.name)
    qa = qa.unique(subset="id", keep="first", maintain_order=True)
    qa = apply_keep_rules(qa, prof, seed)
    qa = apply_caps(qa, prof, seed)
    qa = follow_real_questions(qa)
    qa = balance_letters(qa, seed=seed, letters=prof.letters)
    return schemas.conform("qa", qa.sort(SORT_COLUMNS))
