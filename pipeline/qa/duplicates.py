"""Near-duplicate questions count once: a route and its reverse, or one question text asked twice with one answer.

Two such questions test the same thing on the same video, so keeping both
weighs one fact twice and narrows a type's apparent confidence interval
without adding evidence (on VSI-Bench's 288 scenes 24 of 61 routes were the
reverse of another kept route). Turned on per task by ``balance.dedupe`` in
the profile (revsi; ``vsibench`` reproduces VSI-Bench as it is). The step
sees one scan at a time, before the keep rules and caps, so the caps fill with
distinct questions. Of a duplicate set the pinned question is kept, else the
smallest id: deterministic whatever the row order.
"""

from __future__ import annotations

import json
from collections.abc import Collection

import polars as pl

from pipeline.qa.profiles import Profile

SCOPE = ("key", "budget", "video_kind", "question_type")


def _identity(question_type: str, question: str, geometry: str, ground_truth: str, options) -> tuple:
    g = json.loads(geometry) if geometry else {}
    if question_type == "route_planning" and "start_id" in g:
        path = (g["start_id"], *g.get("waypoint_ids", []), g["goal_id"])
        return ("route", min(path, path[::-1]))
    answer = g.get("correct", ground_truth) if options else ground_truth
    return ("text", question, answer)


def drop_near_duplicates(qa: pl.DataFrame, profile: Profile, pinned: Collection[str] = frozenset()) -> pl.DataFrame:
    """``qa`` without the near-duplicates of types whose rule says ``dedupe``; row order kept."""
    types = [qt for qt, rule in profile.tasks.items() if rule.balance.get("dedupe")]
    if not types or qa.is_empty():
        return qa
    rows = qa.with_row_index("_row").filter(
        pl.col("question_type").is_in(types) & (pl.col("video_kind").fill_null("real") == "real")
    )
    if rows.is_empty():
        return qa
    winner: dict[tuple, tuple] = {}
    for r in rows.select("_row", "id", *SCOPE, "question", "geometry", "ground_truth", "options").iter_rows(named=True):
        ident = (*(r[c] for c in SCOPE), _identity(r["question_type"], r["question"], r["geometry"], r["ground_truth"], r["options"]))
        rank = (r["id"] not in pinned, r["id"], r["_row"])
        if ident not in winner or rank < winner[ident]:
            winner[ident] = rank
    keep_rows = {rank[2] for rank in winner.values()}
    drop = [row for row in rows["_row"].to_list() if row not in keep_rows]
    if not drop:
        return qa
    mask = pl.Series([True] * qa.height)
    mask = mask.scatter(drop, False)
    return qa.filter(mask)
