"""The dataset-wide ``qa`` step: from all scans' candidates to the released question table.

Order matters and is fixed: near-duplicates out (``duplicates``, per scan),
exclusions and subsampling (``filters``), then
per-scene caps, then the answer-distribution control (``distribution``), then
dummy-video questions follow their real counterparts, then
letter balancing across the whole benchmark, then a stable sort. Everything is
a function of (seed, question id), and the letters also of the secret letter
key (``letter_key``: ``pipeline.qa.letter_key``), so the same seed and key give
byte-identical tables, a different key changes only letters, and a different
seed changes only which questions are kept and their letters, never an answer.

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

The ``previous`` release's questions are soft pins (``stability``): the dataset-wide control takes them
before any other question, but its bounds may still drop them, so adding a scan leaves the other scans'
questions where they were.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.qa.balance import balance_letters
from pipeline.qa.distribution import control_distribution
from pipeline.qa.duplicates import drop_near_duplicates
from pipeline.qa.filters import apply_caps, apply_keep_rules, follow_real_questions
from pipeline.qa.ids import id_among
from pipeline.qa.letter_key import LetterKey
from pipeline.qa.profiles import Profile, load_profile
from pipeline.qa.stability import PreviousRelease
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


def _benchmark_decisions(
    qa: pl.DataFrame,
    prof: Profile,
    seed: int,
    drops: list[pl.DataFrame] | None = None,
    pinned: frozenset[str] = frozenset(),
    letter_key: LetterKey | None = None,
    previous: PreviousRelease | None = None,
) -> pl.DataFrame:
    """The rows the benchmark-wide steps keep, with their letters placed; reads only ``DECISION_COLUMNS``."""
    qa, dropped = control_distribution(qa, prof, seed, with_real_counterparts(qa, pinned), previous)
    if drops is not None:
        drops.append(dropped)
    qa = follow_real_questions(qa)
    return balance_letters(qa, seed=seed, letters=prof.letters, letter_key=letter_key)


def _benchmark_steps(
    qa: pl.DataFrame,
    prof: Profile,
    seed: int,
    drops: list[pl.DataFrame] | None = None,
    pinned: frozenset[str] = frozenset(),
    letter_key: LetterKey | None = None,
    previous: PreviousRelease | None = None,
) -> pl.DataFrame:
    qa = _benchmark_decisions(qa, prof, seed, drops, pinned, letter_key, previous)
    return schemas.conform("qa", qa.sort(SORT_COLUMNS))


def finalize_qa(
    candidates: pl.DataFrame,
    *,
    profile: str | Profile,
    seed: int,
    drops: list[pl.DataFrame] | None = None,
    pinned: Collection[str] = frozenset(),
    letter_key: LetterKey | None = None,
    previous: PreviousRelease | None = None,
) -> pl.DataFrame:
    """The released ``qa`` rows of one profile; ``drops`` (a list) receives the distribution control's record.

    ``pinned`` question ids (reviewers accepted them) survive every step that drops questions by chance
    or by budget: subsampling, per-scene caps and the answer-distribution control. ``letter_key`` None:
    ``SCAN2QA_LETTER_KEY``. ``previous`` (the release this one follows) gives the soft pins.
    """
    prof = _profile(profile)
    pins = frozenset(pinned)
    return _benchmark_steps(
        _per_scan_steps(candidates, prof, seed, pins), prof, seed, drops, pins, letter_key, previous
    )


def finalize_qa_parts(
    parts: TableParts,
    *,
    profiles: Sequence[str | Profile],
    seed: int,
    files_per_batch: int = FILES_PER_BATCH,
    drops: list[pl.DataFrame] | None = None,
    pinned: Collection[str] = frozenset(),
    letter_key: LetterKey | None = None,
    previous: PreviousRelease | None = None,
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
            return _whole(parts, profs, seed, drops, pins, letter_key, previous)
        seen_keys |= keys
        id_hashes.append(batch.select(pl.struct("profile", "id").hash().unique().alias("h")))
        for prof in profs:
            # Conformed anew: a filtered frame's strings still point into the whole batch's buffers,
            # which would keep every candidate of every batch alive; the copy holds only the survivors.
            survivors[prof.name].append(schemas.conform("qa", _per_scan_steps(batch, prof, seed, pins)))
        del batch
    if id_hashes and pl.concat(id_hashes)["h"].is_duplicated().any():
        # An id in two batches (or a hash collision): the first occurrence must win across batches.
        return _whole(parts, profs, seed, drops, pins, letter_key, previous)
    return [
        _benchmark_steps(
            pl.concat(survivors[p.name]) if survivors[p.name] else schemas.empty("qa"), p, seed, drops, pins, letter_key,
            previous,
        )
        for p in profs
    ]


def _whole(
    parts: TableParts, profs: list[Profile], seed: int, drops: list | None, pins: frozenset[str], letter_key=None,
    previous: PreviousRelease | None = None,
) -> list[pl.DataFrame]:
    candidates = parts.read()
    return [
        finalize_qa(candidates, profile=p, seed=seed, drops=drops, pinned=pins, letter_key=letter_key, previous=previous)
        for p in profs
    ]


# --- the streamed form: decisions on a few columns, full rows written a batch at a time ------------------------------

# What the benchmark-wide steps (distribution and blind controls, dummy questions following, letter balancing)
# read of a question. The wide columns (template, instruction, video, most of the audit geometry) never take part
# in a decision, and at 10,000 scans the full survivors are gigabytes, so they wait on disk while these decide.
DECISION_COLUMNS = (
    "id", "key", "scene_id", "profile", "budget", "question_type", "video_kind",
    "options", "ground_truth", "answer_value", "question", "geometry",
)
GEOMETRY_KEYS = ("correct", "real_id")  # the only audit fields a benchmark-wide step reads (json.loads(...)[key])
SPILL_OPTIONS = {"compression": "lz4", "statistics": False}


def decision_view(survivors: pl.DataFrame, batch: int) -> pl.DataFrame:
    """``DECISION_COLUMNS`` of one batch's survivors, plus where each row is (``_batch``, ``_pos``).

    ``geometry`` keeps only ``GEOMETRY_KEYS``, and only on the rows whose geometry a step reads (multiple
    choice: the correct text; dummy video: the real counterpart); the other rows get ``{}``. ``question`` is
    categorical: the blind baseline only compares question texts, and a few thousand texts repeat over millions
    of rows.
    """
    view = survivors.select(DECISION_COLUMNS)
    needs = (view["options"].list.len().fill_null(0) > 0) | (view["video_kind"].fill_null("real") != "real")
    rows = needs.arg_true()
    texts = view["geometry"].gather(rows).to_list()
    slim = [None if t is None else json.dumps({k: v for k, v in json.loads(t).items() if k in GEOMETRY_KEYS}) for t in texts]
    geometry = pl.Series("geometry", ["{}"] * view.height, dtype=pl.String)
    if len(slim):
        geometry = geometry.scatter(rows, pl.Series(slim, dtype=pl.String))
    return view.with_columns(
        geometry,
        pl.col("question").cast(pl.Categorical),
        pl.lit(batch, dtype=pl.UInt32).alias("_batch"),
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_pos"),
    )


@dataclass
class QaStream:
    """The released ``qa`` rows of every profile, decided; ``frames()`` gives them in table order, a batch at a time.

    ``counts`` is questions per (profile, question type). Only the decision columns of the kept rows are held;
    the full rows are read back from the spill folder one batch at a time (or, after a fallback to the
    in-memory path, are the whole tables).
    """

    counts: pl.DataFrame
    _kept: dict[str, pl.DataFrame] = field(default_factory=dict)
    _profiles: list[str] = field(default_factory=list)
    _batches: int = 0
    _spill: Path | None = None
    _whole: list[pl.DataFrame] | None = None

    def frames(self) -> Iterator[pl.DataFrame]:
        if self._whole is not None:
            yield from self._whole
            return
        for name in self._profiles:
            kept = self._kept[name].select("_batch", "_pos", "options", "ground_truth")
            by_batch = kept.partition_by("_batch", as_dict=True, include_key=False)
            for index in range(self._batches):
                chosen = by_batch.pop((index,), None)
                if chosen is None or chosen.is_empty():
                    continue
                full = pl.read_parquet(_spill_path(self._spill, name, index))
                rows = full.select(pl.all().gather(chosen["_pos"])).with_columns(
                    chosen["options"].alias("options"), chosen["ground_truth"].alias("ground_truth")
                )
                del full
                yield schemas.conform("qa", rows.sort(SORT_COLUMNS))


def _spill_path(folder: Path, profile: str, batch: int) -> Path:
    return folder / f"{profile}-{batch:06d}.parquet"


def _view_path(folder: Path, profile: str, batch: int) -> Path:
    return folder / f"{profile}-view-{batch:06d}.parquet"


def _counts(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    parts = [f.group_by("profile", "question_type").len() for f in frames]
    if not parts:
        return pl.DataFrame(schema={"profile": pl.String, "question_type": pl.String, "len": pl.UInt32})
    return pl.concat(parts).group_by("profile", "question_type").agg(pl.col("len").sum()).sort("profile", "question_type")


@contextmanager
def streamed_qa_parts(
    parts: TableParts,
    *,
    profiles: Sequence[str | Profile],
    seed: int,
    files_per_batch: int = FILES_PER_BATCH,
    drops: list[pl.DataFrame] | None = None,
    pinned: Collection[str] = frozenset(),
    letter_key: LetterKey | None = None,
    previous: PreviousRelease | None = None,
) -> Iterator[QaStream]:
    """``finalize_qa_parts`` without holding the benchmark: the same rows, in the same order, a batch at a time.

    The per-scan steps run per batch as in ``finalize_qa_parts``; each batch's survivors go to a spill file
    (a temporary folder, removed on the way out) and only their ``decision_view`` stays. The benchmark-wide
    steps decide on those views; then each batch's kept rows are read back, given their letters and sorted.
    Sorting per batch is the whole table's sort because ``SORT_COLUMNS`` starts with the scan key and the
    batches hold disjoint, increasing key ranges (checked: otherwise, as when a scan or an id spans two
    batches, the in-memory ``finalize_qa`` decides, as ``finalize_qa_parts`` does).
    """
    pins = frozenset(pinned)
    profs = [_profile(p) for p in profiles]
    with tempfile.TemporaryDirectory(prefix="scan2qa-qa-") as folder:
        spill = Path(folder)
        views: dict[str, list[Path]] = {p.name: [] for p in profs}
        ranges: list[tuple] = []
        id_hashes = []
        ordered = True
        batches = 0
        for index, batch in enumerate(parts.batches(files_per_batch) if profs else ()):
            keys = batch["key"].unique().to_list()
            if None in keys:
                ordered = False
            elif keys:
                ranges.append((min(keys), max(keys)))
            id_hashes.append(batch.select(pl.struct("profile", "id").hash().unique().alias("h")))
            for prof in profs:
                survivors = schemas.conform("qa", _per_scan_steps(batch, prof, seed, pins))
                survivors.write_parquet(_spill_path(spill, prof.name, index), **SPILL_OPTIONS)
                # The view waits on disk too: small frames kept between batches of large transient ones pin the
                # allocator's pages (2,000 scans' views held three times their size); read back at once below.
                view_file = _view_path(spill, prof.name, index)
                decision_view(survivors, index).write_parquet(view_file, **SPILL_OPTIONS)
                views[prof.name].append(view_file)
                del survivors
            del batch
            batches = index + 1
        ordered = ordered and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
        if not ordered or (id_hashes and pl.concat(id_hashes)["h"].is_duplicated().any()):
            # A scan in two batches, an id in two batches (or a hash collision), keys out of order: decide on
            # the whole table, as finalize_qa_parts does.
            views.clear()
            whole = _whole(parts, profs, seed, drops, pins, letter_key, previous)
            yield QaStream(counts=_counts(whole), _whole=whole)
            return
        kept = {}
        for prof in profs:
            files = views.pop(prof.name)
            view = pl.concat([pl.read_parquet(f) for f in files]) if batches else decision_view(schemas.empty("qa"), 0)
            kept[prof.name] = _benchmark_decisions(view, prof, seed, drops, pins, letter_key, previous)
            del view
        yield QaStream(
            counts=_counts(list(kept.values())), _kept=kept, _profiles=[p.name for p in profs], _batches=batches,
            _spill=spill,
        )
