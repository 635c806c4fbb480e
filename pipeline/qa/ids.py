"""Stable question ids, so reviewer verdicts and sampling survive rebuilds.

The id hashes what makes a question that question: scan, budget, profile,
type, video kind, exact question text and the objects it uses. Option order
(letter balancing) is deliberately not part of it. Profile and video kind are
included because both profiles share type names and templates (e.g.
``object_abs_distance``) and a dummy-video question repeats its real
counterpart's text.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

import polars as pl

from pipeline.seeding import stable_id, stable_int

_TWO_64 = 2.0**64


def question_id(
    key: str, budget: str, profile: str, question_type: str, video_kind: str, question: str, used_obj_ids: Iterable[int]
) -> str:
    ids = ",".join(str(i) for i in sorted(int(i) for i in used_obj_ids))
    return stable_id("qa", key, budget, profile, question_type, video_kind, question, ids, length=20)


def unit_draw(seed: int, purpose: str, qid: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, purpose, question id): every sampling decision uses it."""
    return stable_int(seed, purpose, qid) / 2.0**64


def stable_ints(seed: int, purpose: str, qids: Iterable[object]) -> list[int]:
    """``stable_int(seed, purpose, qid)`` of many ids, with the shared prefix formatted once."""
    prefix = f"{seed}\x1f{purpose}\x1f"
    sha256, from_bytes = hashlib.sha256, int.from_bytes
    return [from_bytes(sha256(f"{prefix}{q}".encode()).digest()[:8], "little") for q in qids]


def unit_draws(seed: int, purpose: str, qids: Iterable[object]) -> list[float]:
    """``unit_draw`` of many ids at once: the same numbers (the dataset-wide step draws for millions)."""
    return [value / _TWO_64 for value in stable_ints(seed, purpose, qids)]


@functools.lru_cache(maxsize=1 << 16, typed=True)
def presentation_key(*parts: object) -> int:
    """Seed-independent order for presentation choices (which object is named first).

    Question text enters the id, so anything that shapes the text must not depend on the seed. Kept per
    parts: every budget and option set of a scan asks for the same (scan, anchor, category) keys again
    (``typed``, so ``1`` and ``True``, which print differently, are told apart).
    """
    return stable_int("presentation", *parts)


def id_among(ids: Iterable[str]) -> pl.Expr:
    """Whether a row's ``id`` is one of ``ids`` (a set of pinned questions, say), as one polars expression."""
    return pl.col("id").is_in(pl.Series(list(ids), dtype=pl.String).implode())
