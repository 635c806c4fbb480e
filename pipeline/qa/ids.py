"""Stable question ids, so reviewer verdicts and sampling survive rebuilds.

The id hashes what makes a question that question: scan, budget, profile,
type, video kind, exact question text and the objects it uses. Option order
(letter balancing) is deliberately not part of it. Profile and video kind are
included because both profiles share type names and templates (e.g.
``object_abs_distance``) and a dummy-video question repeats its real
counterpart's text.
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.seeding import stable_id, stable_int


def question_id(
    key: str, budget: str, profile: str, question_type: str, video_kind: str, question: str, used_obj_ids: Iterable[int]
) -> str:
    ids = ",".join(str(i) for i in sorted(int(i) for i in used_obj_ids))
    return stable_id("qa", key, budget, profile, question_type, video_kind, question, ids, length=20)


def unit_draw(seed: int, purpose: str, qid: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, purpose, question id): every sampling decision uses it."""
    return stable_int(seed, purpose, qid) / 2.0**64


def presentation_key(*parts: object) -> int:
    """Seed-independent order for presentation choices (which object is named first).

    Question text enters the id, so anything that shapes the text must not depend on the seed.
    """
    return stable_int("presentation", *parts)
