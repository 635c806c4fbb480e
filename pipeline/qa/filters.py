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
from collections import defaultdict

import polars as pl

from pipeline.qa.ids import unit_draw
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


def apply_keep_rules(qa: pl.DataFrame, profile: Profile, seed: int) -> pl.DataFrame:
    """Drop excluded questions and subsample real-video questions; dummy questions follow later."""
    keep = []
    for row in qa.select("id", "question_type", "video_kind", "geometry", "answer_value").iter_rows(named=True):
        if row["video_kind"] != "real":
            keep.append(True)
            continue
        p = keep_probability(profile.task(row["question_type"]), json.loads(row["geometry"]), row["answer_value"])
        keep.append(p >= 1.0 or unit_draw(seed, "keep", row["id"]) < p)
    return qa.filter(pl.Series(keep, dtype=pl.Boolean))


def apply_caps(qa: pl.DataFrame, profile: Profile, seed: int) -> pl.DataFrame:
    """At most ``cap_per_scene`` real questions per scan, budget and type: the lowest draws win."""
    groups: dict[tuple, list[tuple[float, str]]] = defaultdict(list)
    for row in qa.select("id", "key", "budget", "question_type", "video_kind").iter_rows(named=True):
        if row["video_kind"] == "real":
            draw = unit_draw(seed, "cap", row["id"])
            groups[(row["key"], row["budget"], row["question_type"])].append((draw, row["id"]))
    dropped: set[str] = set()
    for (_, _, question_type), members in groups.items():
        cap = profile.task(question_type).cap_per_scene
        if cap is not None and len(members) > cap:
            dropped.update(qid for _, qid in sorted(members)[cap:])
    return qa.filter(~pl.col("id").is_in(sorted(dropped))) if dropped else qa


def follow_real_questions(qa: pl.DataFrame) -> pl.DataFrame:
    """Keep a dummy-video question exactly when its real counterpart is kept."""
    real_ids = set(qa.filter(pl.col("video_kind") == "real")["id"].to_list())
    keep = [
        kind == "real" or json.loads(geometry).get("real_id") in real_ids
        for kind, geometry in zip(qa["video_kind"].to_list(), qa["geometry"].to_list())
    ]
    return qa.filter(pl.Series(keep, dtype=pl.Boolean))
