"""The dataset-wide ``qa`` step: from all scans' candidates to the released question table.

Order matters and is fixed: near-duplicates out (``duplicates``, per scan),
exclusions and subsampling (``filters``), then
per-scene caps, then the answer-distribution control (``distribution``), then
dummy-video questions follow their real counterparts, then
letter balancing across the whole benchmark, then a stable sort. Everything is
a function of (seed, question id), so the same seed gives byte-identical
tables and a different seed changes only which questions are kept and the
letters of their options, never an answer.

The first steps (duplicate ids, keep rules, caps) only ever compare a
question with questions of its own scan, so ``finalize_qa_parts`` runs them
over batches of whole scan files and keeps only what survives: the candidates
of thousands of scans (millions of rows, most of them dropped) are never in
memory at once. It checks the premise as it goes (no scan key and no question
id in two batches) and otherwise falls back to ``finalize_qa`` over the whole
table, so both give the same table for the same candidates.

Questions a reviewer accepted are ``pinned``: every step that drops
questions by chance or budget (subsampling, caps, the distribution control)
keeps them and counts them first toward its budgets, so adding scans never
takes an accepted question out of the next release. Letter balancing drops
nothing (an accepted question's letters may move as its group grows; its
text and answer do not). With no pins every step is exactly the unpinned one.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

import polars as pl

from pipeline import schemas
from pipeline.qa.balance import balance_letters
from pipeline.qa.distribution import control_distribution
from pipeline.qa.duplicates import drop_near_duplicates
from pipeline.qa.filters import apply_caps, apply_keep_rules, follow_real_questions
from pipeline.qa.ids import id_among
from pipeline.qa.profiles import Profile, load_profile
from pipeline.table_scan import TableParts

SORT_COLUMNS = ["key", "budget", "question_type", "video_kind", "id"]
FILES_PER_BATCH = 100  # scans per batch of finalize_qa_parts: a few hundred thousand candidate rows


def _profile(profile: str | Profile) -> Profile:
    return profile if isinstance(profile, Profile) else load_profile(profile)


def with_real_counterparts(qa: pl.DataFrame, pinned: frozenset[str]) -> frozenset[str]:
    """``pinned`` and the real-video question each pinned dummy-video question follows.

    A dummy-video question is kept exactly when its real counterpart is (``follow_real_questions``),
    so pinning one means holding its counterpart through the keep rules, caps and control.
    """
    if not pinned:
        return pinned
    dummies = qa.filter((pl.col("video_kind").fill_null("real") != "real") & id_among(pinned))
    if dummies.is_empty():
        return pinned
    return pinned | ({json.loads(g).get("real_id") for g in dummies["geometry"].to_list()} - {None})


def _per_scan_steps(candidates: pl.DataFrame, prof: Profile, seed: int, pinned: frozenset[str] = frozenset()) -> pl.DataFrame:
    qa = schemas.conform("qa", candidates.filter(pl.col("profile") == prof.name))
    qa = qa.unique(subset="id", keep="first", maintain_order=True)
    pinned = with_real_counterparts(qa, pinned)
    qa = drop_near_duplicates(qa, prof, pinned)
    qa = apply_keep_rules(qa, prof, seed, pinned)
    return apply_caps(qa, prof, seed, pinned)


def _benchmark_steps(
    qa: pl.DataFrame,
    prof: Profile,
    seed: int,
    drops: list[pl.DataFrame] | None = None,
    pinned: frozenset[str] = frozenset(),
) -> pl.DataFrame:
    qa, dropped = control_distribution(qa, prof, seed, with_real_counterparts(qa, pinned))
    if drops is not None:
        drops.append(dropped)
    qa = follow_real_questions(qa)
    qa = balance_letters(qa, seed=seed, letters=prof.letters)
    return schemas.conform("qa", qa.sort(SORT_COLUMNS))


def finalize_qa(
    candidates: pl.DataFrame,
    *,
    profile: str | Profile,
    seed: int,
    drops: list[pl.DataFrame] | None = None,
    pinned: Collection[str] = frozenset(),
) -> pl.DataFrame:
    """The released ``qa`` rows of one profile; ``drops`` (a list) receives the distribution control's record.

    ``pinned`` question ids (reviewers accepted them) survive every step that drops questions by chance
    or by budget: subsampling, per-scene caps and the answer-distribution control.
    """
    prof = _profile(profile)
    pins = frozenset(pinned)
    return _benchmark_steps(_per_scan_steps(candidates, prof, seed, pins), prof, seed, drops, pins)


def finalize_qa_parts(
    parts: TableParts,
    *,
    profiles: Sequence[str | Profile],
    seed: int,
    files_per_batch: int = FILES_PER_BATCH,
    drops: list[pl.DataFrame] | None = None,
    pinned: Collection[str] = frozenset(),
) -> list[pl.DataFrame]:
    """``finalize_qa`` of each profile over a per-scan candidates table read in batches of whole files.

    ``drops``, when a list, receives one ``qa_distribution_drops`` frame per profile; ``pinned`` as in
    ``finalize_qa``.
    """
    pins = frozenset(pinned)
    profs = [_profile(p) for p in profiles]
    if not profs:
        return []
    survivors: dict[str, list[pl.DataFrame]] = {p.name: [] for p in profs}
    seen_keys: set[str | None] = set()
    id_hashes = []
    for index, batch in enumerate(parts.batches(files_per_batch)):
        keys = set(batch["key"].unique().to_list())
        if keys & seen_keys:  # a scan split across batches: its caps need all of it at once
            return _whole(parts, profs, seed, drops, pins)
        seen_keys |= keys
        id_hashes.append(batch.select(pl.struct("profile", "id").hash().unique().alias("h")))
        for prof in profs:
            # Conformed anew: a filtered frame's strings still point into the whole batch's buffers,
            # which would keep every candidate of every batch alive; the copy holds only the survivors.
            survivors[prof.name].append(schemas.conform("qa", _per_scan_steps(batch, prof, seed, pins)))
        del batch
    if id_hashes and pl.concat(id_hashes)["h"].is_duplicated().any():
        # An id in two batches (or a hash collision): the first occurrence must win across batches.
        return _whole(parts, profs, seed, drops, pins)
    return [
        _benchmark_steps(pl.concat(survivors[p.name]) if survivors[p.name] else schemas.empty("qa"), p, seed, drops, pins)
        for p in profs
    ]


def _whole(parts: TableParts, profs: list[Profile], seed: int, drops: list | None, pins: frozenset[str]) -> list[pl.DataFrame]:
    candidates = parts.read()
    return [finalize_qa(candidates, profile=p, seed=seed, drops=drops, pinned=pins) for p in profs]
