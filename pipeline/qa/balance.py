"""Placing the correct option so that every letter is equally often correct.

Within each group of multiple-choice questions (profile, type, budget, video
kind, number of options) questions are ranked by a draw fixed by (letter key,
seed, question id) and the k-th gets the correct answer at letter ``k mod n``,
so each letter is correct for the same share of the group up to one question,
across the whole benchmark. Distractors fill the other letters in an order
drawn from the same (letter key, seed, question id). The key is secret
(``pipeline.qa.letter_key``): ids and seed ship with every release, and a draw
from them alone let anyone compute every letter. Option texts never change,
only their letters, and the question id does not depend on option order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.qa.letter_key import LetterKey, required
from pipeline.qa.permutations import seeded_permutations
from pipeline.qa.templates import format_options, option_text


def arrange_options(texts: Sequence[str], correct: str, target: int, order: Sequence[int]) -> list[str]:
    """Option texts with ``correct`` at index ``target`` and the distractors in ``order`` (``distractor_orders``)."""
    distractors = [t for t in texts if t != correct]
    arranged = [distractors[int(i)] for i in order]
    arranged.insert(int(target), correct)
    return arranged


def distractor_orders(key: LetterKey, seed: int, qids: Sequence[str], counts: Sequence[int]) -> list[list[int]]:
    """Per question, ``default_rng(<keyed draw>).permutation(count)``: the key hides the order as it hides the letter.

    Without it, trying each option as the correct one and checking which leaves the others in the order a
    (seed, id) draw gives found the correct option whatever its letter.
    """
    return seeded_permutations(key.ints(seed, "distractors", qids), counts)


def correct_text(row: dict) -> str:
    return json.loads(row["geometry"])["correct"]


CHUNK_ROWS = 200_000  # MCQ rows turned into Python objects at a time


def _arranged(chunk: pl.DataFrame, key: LetterKey, seed: int, letters: Sequence[str]) -> pa.Array:
    ids, targets = chunk["id"].to_list(), chunk["_target"].to_list()
    texts = [[option_text(o) for o in opts] for opts in chunk["options"].to_list()]
    corrects = [correct_text({"geometry": g}) for g in chunk["geometry"].to_list()]
    counts = [sum(t != c for t in ts) for ts, c in zip(texts, corrects)]
    orders = distractor_orders(key, seed, ids, counts)
    options = [
        format_options(arrange_options(ts, c, target, order), letters)
        for ts, c, target, order in zip(texts, corrects, targets, orders)
    ]
    # Through Arrow: polars builds a list column from Python lists one Series per row.
    return pa.array(options, pa.list_(pa.string()))


def balance_letters(
    qa: pl.DataFrame, *, seed: int, letters: Sequence[str], letter_key: LetterKey | None = None
) -> pl.DataFrame:
    """Reassign option letters of every MCQ row; numeric rows pass through unchanged.

    ``letter_key`` None: ``SCAN2QA_LETTER_KEY`` (one clear error when unset).

    Ranking within groups is one sort; only the MCQ rows' options and ground
    truth are rebuilt (in Python, a chunk at a time, with the distractor orders
    drawn for the whole chunk at once), and every other column is left as it
    is, so a benchmark of millions of rows never becomes Python objects.
    """
    if qa.is_empty():
        return qa
    group = ["profile", "question_type", "budget", "video_kind", "_n"]
    mcq = (
        qa.with_row_index("_row")
        .with_columns(pl.col("options").list.len().fill_null(0).alias("_n"))
        .filter(pl.col("_n") > 0)
        .select("_row", "id", "options", "geometry", *group)
    )
    if mcq.is_empty():
        return qa
    key = required(letter_key)
    ranked = (
        mcq.with_columns(pl.Series("_draw", key.unit_draws(seed, "letter", mcq["id"].to_list()), dtype=pl.Float64))
        .sort([*group, "_draw", "id"], maintain_order=True)
        .with_columns((pl.int_range(pl.len()).over(group) % pl.col("_n")).alias("_target"))
        .select("_row", "id", "options", "geometry", "_target")
        .sort("_row")
    )
    del mcq
    arranged = pa.chunked_array(
        [_arranged(ranked.slice(start, CHUNK_ROWS), key, seed, letters) for start in range(0, ranked.height, CHUNK_ROWS)],
        pa.list_(pa.string()),
    )
    truths = pl.Series([letters[t] for t in ranked["_target"].to_list()], dtype=pl.String)
    # Row i takes its own value, or (an MCQ row) the k-th rebuilt one, appended after the originals.
    take = np.arange(qa.height, dtype=np.int64)
    take[ranked["_row"].to_numpy()] = qa.height + np.arange(ranked.height)
    take = pl.Series(take)
    options = pl.concat([qa["options"], pl.Series(arranged).cast(qa.schema["options"])]).gather(take)
    ground_truth = pl.concat([qa["ground_truth"], truths.cast(qa.schema["ground_truth"])]).gather(take)
    return qa.with_columns(options.alias("options"), ground_truth.alias("ground_truth"))
