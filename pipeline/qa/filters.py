"""The dataset-wide keep decisions: exclusion lists, subsampling and per-scene caps.

Every probabilistic decision compares a draw fixed by (seed, question id) with
a keep probability computed from the question itself (type, named objects,
answer), so a question's fate never depends on which other questions exist or
on row order, a different seed changes which questions are kept but never an
answer, and the same seed reproduces the same table. Rules come from the
profile (``keep`` and ``exclude`` of each task):

* ``count_rates``: {count: p} for counting questions whose named categories
  are all in the task's ``cooccurring`` set (SPEC §4: counts 1 and 2 of
  co-occurring categories, totals of 4 of two co-occurring categories);
* ``size_rates``: [{name, min_cm, max_cm, rate}] dominant-size subsampling
  (ReVSI Table 11; null bounds mean every size);
* ``distance_rates``: [{min_m, max_m, rate}] on the exact distance, half-open
  [min, max) (SPEC §4: drop < 1 m, keep 1-2 m at 0.2 and 2-3 m at 0.5).
"""

from __future__ import annotations

import json
from collections.abc import Collection

import numpy as np
import polars as pl

from pipeline.qa.distribution import row_classes
from pipeline.qa.ids import id_among, unit_draws
from pipeline.qa.profiles import Profile, TaskRule


def keep_probability(rule: TaskRule, geometry: dict, answer_value: float | None) -> float:
    names = [str(n).lower() for n in geometry.get("names", [])]
    if any(rule.excludes(n) for n in names):
        return 0.0
    p = 1.0
    rates = rule.keep.get("count_rates")
    if rates and answer_value is not None:
        cooccurring = {c.lower() for c in rule.params.get("cooccurring", ())}
        if names and all(n in cooccurring for n in names):
            p *= float({int(k): v for k, v in rates.items()}.get(int(answer_value), 1.0))
    for band in rule.keep.get("size_rates") or ():
        if answer_value is None or not names or names[0] != str(band["name"]).lower():
            continue
        lo, hi = band.get("min_cm"), band.get("max_cm")
        if (lo is None or answer_value >= float(lo)) and (hi is None or answer_value <= float(hi)):
            p *= float(band["rate"])
    distance = geometry.get("distance_m")
    for band in rule.keep.get("distance_rates") or ():
        if distance is not None and float(band["min_m"]) <= distance < float(band["max_m"]):
            p *= float(band["rate"])
    return p


def _is_real() -> pl.Expr:
    return (pl.col("video_kind") == "real").fill_null(False)


def _without_rows(qa: pl.DataFrame, rows: list[int]) -> pl.DataFrame:
    if not rows:
        return qa
    keep = np.ones(qa.height, dtype=bool)
    keep[rows] = False
    return qa.filter(pl.Series(keep))


def apply_keep_rules(qa: pl.DataFrame, profile: Profile, seed: int, pinned: Collection[str] = frozenset()) -> pl.DataFrame:
    """Drop excluded questions and subsample real-video questions; dummy questions follow later.

    Only types whose rule excludes names or sets keep rates can lose a
    question, so only their geometry is parsed, and only a probability
    strictly between 0 and 1 needs a draw. A ``pinned`` question (accepted by
    a reviewer) is never lost to a draw; a rule that leaves no chance at all
    (an excluded name, a zero rate) still drops it: a pin holds a question
    against sampling, not against the profile.
    """
    real = qa.with_row_index("_row").filter(_is_real())
    rules = {t: profile.task(t) for t in real["question_type"].unique(maintain_order=True).to_list()}
    active = [t for t, rule in rules.items() if rule.exclude or rule.keep]
    real = real.filter(pl.col("question_type").is_in(active))
    dropped, uncertain = [], []
    for row, qid, question_type, geometry, answer in zip(
        *(real[c].to_list() for c in ("_row", "id", "question_type", "geometry", "answer_value"))
    ):
        p = keep_probability(rules[question_type], json.loads(geometry), answer)
        if p >= 1.0:
            continue
        if p > 0.0:
            uncertain.append((row, qid, p))
        else:
            dropped.append(row)  # a draw in [0, 1) is never below p <= 0
    draws = unit_draws(seed, "keep", [qid for _, qid, _ in uncertain])
    dropped += [row for (row, qid, p), draw in zip(uncertain, draws) if not draw < p and qid not in pinned]
    return _without_rows(qa, dropped)


def apply_caps(qa: pl.DataFrame, profile: Profile, seed: int, pinned: Collection[str] = frozenset()) -> pl.DataFrame:
    """At most ``cap_per_scene`` real questions per scan, budget and type: the lowest draws (then ids) win.

    For a type with an answer-distribution rule (``balance``) a scan's questions
    are taken one per answer class in turn (each class in draw order), so the
    scan's rarer answers survive the cap; other types are ranked by draw alone.
    ``pinned`` questions fill the cap before any other (and count as their
    class's first members in the turns that follow), and are kept even past it.
    """
    real = qa.filter(_is_real()).select("id", "key", "budget", "question_type", "options", "geometry", "answer_value")
    if real.is_empty():
        return qa
    caps = {t: profile.task(t).cap_per_scene for t in real["question_type"].unique(maintain_order=True).to_list()}
    group = ["key", "budget", "question_type"]
    # Only a group over its cap loses questions, so only its members need a draw.
    over = real.with_columns(pl.col("question_type").replace_strict(caps, return_dtype=pl.Int64).alias("_cap")).filter(
        pl.col("_cap").is_not_null() & (pl.len().over(group) > pl.col("_cap"))
    )
    first = ["_unpinned"] if pinned else []  # with no pins the ranking is exactly the unpinned one
    if pinned:
        over = over.with_columns((~id_among(pinned)).alias("_unpinned"))
    ranked = (
        over.with_columns(
            pl.Series("_draw", unit_draws(seed, "cap", over["id"].to_list()), dtype=pl.Float64),
            row_classes(over, profile),
        )
        .sort([*group, *first, "_draw", "id"], maintain_order=True)
        .with_columns(pl.int_range(pl.len()).over([*group, "_class"]).alias("_class_rank"))
        .sort([*group, *first, "_class_rank", "_draw", "id"], maintain_order=True)
        .with_columns(pl.int_range(pl.len()).over(group).alias("_rank"))
    )
    dropping = pl.col("_rank") >= pl.col("_cap")
    dropped = ranked.filter(dropping & pl.col("_unpinned") if pinned else dropping)["id"]
    return qa.filter(~pl.col("id").is_in(dropped.unique().sort().to_list())) if dropped.len() else qa


def follow_real_questions(qa: pl.DataFrame) -> pl.DataFrame:
    """Keep a dummy-video question exactly when its real counterpart is kept."""
    dummy = qa.with_row_index("_row").filter(~_is_real())
    if dummy.is_empty():
        return qa
    # Only the dummy rows go through Python; the real ids (millions at scale) are looked up by polars.
    real_ids = qa.filter(pl.col("video_kind") == "real")["id"]
    followed = [json.loads(geometry).get("real_id") for geometry in dummy["geometry"].to_list()]
    texts = pl.Series([r if isinstance(r, str) else None for r in followed], dtype=pl.String)
    found = texts.is_in(real_ids.implode(), nulls_equal=True).to_list()  # a null id among the real ones matches None, as a set would
    dropped = [
        row for row, real_id, hit in zip(dummy["_row"].to_list(), followed, found)
        if not (hit and (real_id is None or isinstance(real_id, str)))
    ]
    return _without_rows(qa, dropped)
