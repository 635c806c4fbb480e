"""Questions on dummy (evidence-absent) videos: counting answers 0, size on black probes hallucination.

The frames/visibility step writes the ``dummy_videos`` table: one 16-frame
video per kind and set of queried objects. A counting question is attached to
a ``query_drop``/``first_frame``/``black`` video whose objects are the
category's instances (all of them in the scene, or the visible ones), and an
object size question to a ``black`` video of its object; a black video listing
no objects fits every question of its scan. Each dummy question keeps its real
counterpart's id in ``geometry.real_id`` so the dataset-wide step keeps it
exactly when the real question survives.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question, count_answer


def _videos_by_kind(dummy_videos: pl.DataFrame, key: str) -> dict[str, list[tuple[frozenset[int], str, str]]]:
    out: dict[str, list[tuple[frozenset[int], str, str]]] = {}
    if dummy_videos is None or dummy_videos.is_empty():
        return out
    rows = dummy_videos.filter(pl.col("key") == key).sort("video_id")
    for row in rows.iter_rows(named=True):
        ids = frozenset(int(i) for i in (row["object_ids"] or []))
        out.setdefault(str(row["kind"]), []).append((ids, str(row["video_id"]), str(row["path"])))
    return out


def _match(videos: list[tuple[frozenset[int], str, str]], wanted: list[frozenset[int]], kind: str):
    for ids, video_id, path in videos:
        if ids in wanted:
            return video_id, path
    if kind == "black":
        for ids, video_id, path in videos:
            if not ids:
                return video_id, path
    return None


def dummy_questions(
    ctx: BudgetContext, real: list[tuple[str, Question]], dummy_videos: pl.DataFrame, settings: dict
) -> list[Question]:
    """Dummy-video variants of the real (id, question) pairs of the dummy budget."""
    if str(settings.get("budget", "16")) != ctx.budget:
        return []
    videos = _videos_by_kind(dummy_videos, ctx.key)
    if not videos:
        return []
    counting_type = settings.get("counting_type")
    size_type = settings.get("size_type")
    out = []
    for real_id, q in real:
        if q.question_type == counting_type:
            kinds = settings.get("counting_kinds", ())
            category = q.geometry["names"][0]
            wanted = [frozenset(ctx.all_of(category)), frozenset(q.used_obj_ids)]
            used = sorted(ctx.all_of(category))
            answer_text, answer_value = count_answer(0)
        elif q.question_type == size_type:
            kinds = settings.get("size_kinds", ())
            wanted = [frozenset(q.used_obj_ids)]
            used = list(q.used_obj_ids)
            answer_text, answer_value = q.answer_text, q.answer_value
        else:
            continue
        for kind in kinds:
            match = _match(videos.get(kind, []), wanted, kind)
            if match is None:
                continue
            video_id, path = match
            geometry = dict(q.geometry, real_id=real_id, real_answer=q.answer_text, dummy_video_id=video_id)
            out.append(
                dataclasses.replace(
                    q,
                    used_obj_ids=used,
                    geometry=geometry,
                    answer_text=answer_text,
                    answer_value=answer_value,
                    video_kind=kind,
                    video=path,
                )
            )
    return out


def dummy_object_sets(
    objects: pl.DataFrame, object_visibility: pl.DataFrame, key: str, budget: str = "16"
) -> list[list[int]]:
    """The queried-object sets the dummy videos must cover for this scan's dummy questions.

    Counting asks about a category: its set is every instance of the category in
    the scene (a query-dropped video must show none of them). Object size asks
    about a unique object: its set is that object. Only categories and objects
    visible under the dummy budget can be asked, so only those are listed.
    """
    scan = objects.filter((pl.col("key") == key) & ~pl.col("structural").fill_null(False))
    visible = set(
        object_visibility.filter(
            (pl.col("key") == key) & (pl.col("budget") == str(budget)) & pl.col("visible").fill_null(False)
        )["object_id"].to_list()
    )
    by_category: dict[str, list[int]] = {}
    for object_id, category in zip(scan["object_id"].to_list(), scan["category"].to_list()):
        by_category.setdefault(category, []).append(int(object_id))
    sets = set()
    for ids in by_category.values():
        if visible.intersection(ids):
            sets.add(tuple(sorted(ids)))
            if len(ids) == 1:
                sets.add((ids[0],))
    return [list(s) for s in sorted(sets)]
