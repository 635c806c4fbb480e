"""Keep the blind baseline at chance: drop what a text-only prior answers for free.

The answer-distribution control bounds every *constant* answer; a guesser that
reads the question and its options (``pipeline.scoring.blind``) is not
constant: it knows that a bed is about 2 m long, that the largest object
listed tends to be the closest, how many chairs a room holds. On VSI-Bench's
288 scenes it scored 38-39% on relative distance (chance 25%) and 57% on
counting. With ``balance.blind`` a type is held to ``blind_margin`` (0.05)
of chance for choices and to ``max_frequency`` for numbers: the blind guess
is made (cross-validated by scene, as ``scan2qa stats`` and
``scan2qa baseline --kind blind`` make it), and the questions it scores
highest on go first (highest seeded draw among equals), a few at a time,
re-fitting the prior after each pass. Where that would take more than half of
the type (``MIN_KEPT_SHARE``) the type is left as it was and its blind score
shows in ``scan2qa stats``. A type whose guesser falls below chance
by more than the margin loses questions it gets wrong instead. Pinned
questions never go.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from pipeline.scoring import metrics
from pipeline.scoring.blind import BlindGroup

BLIND_MARGIN = 0.05
MAX_PASSES = 40
MIN_KEPT_SHARE = 0.5  # the blind control never takes more than half of what the other rules kept


def blind_target(option_counts: np.ndarray, rule, mcq: bool, rows: np.ndarray | None = None) -> tuple[float, float] | None:
    """(low, high) the blind score of the questions ``rows`` (all: None) must stay within, or None when the rule
    sets no blind bound; ``option_counts`` is each question's number of options."""
    settings = rule.balance or {}
    if not settings.get("blind"):
        return None
    margin = float(settings.get("blind_margin", BLIND_MARGIN))
    if mcq:
        chance = metrics.chance_of_choices(option_counts, rows)
        return chance - margin, chance + margin
    ceiling = settings.get("max_frequency")
    return (-math.inf, float(ceiling)) if ceiling is not None else None


def control_blind(
    part: pl.DataFrame, rule, keep: np.ndarray, draws: np.ndarray, pinned: np.ndarray | None, mcq: bool,
    blind: BlindGroup | None = None,
) -> np.ndarray:
    """``keep`` minus the questions that must go for the blind baseline to stay within its bound.

    ``blind`` is ``part`` read for the blind guesser (``BlindGroup(part)``): a caller that runs the control
    several times on one part reads it once.
    """
    blind = BlindGroup(part) if blind is None else blind
    option_counts = part["options"].list.len().fill_null(0).to_numpy()
    start = keep
    keep = keep.copy()
    movable = np.ones(keep.size, dtype=bool) if pinned is None else ~pinned
    for _ in range(MAX_PASSES):
        rows = np.flatnonzero(keep)
        if rows.size == 0:
            return start
        target = blind_target(option_counts, rule, mcq, rows)
        if target is None:
            return keep
        low, high = target
        scores = blind.harness_scores(keep)
        mean = float(scores.mean())
        if low - 1e-12 <= mean <= high + 1e-12:
            # Out of reach when it costs most of the type (the prior is in every question, e.g. one answer text
            # always right): gutting it would remove the questions, not the prior; stats shows the blind score.
            return keep if keep.sum() >= MIN_KEPT_SHARE * start.sum() else start
        above = mean > high
        # Dropping a question scored s moves the mean by (mean - s) / (n - 1): ask for half of the gap.
        gap = (mean - high) if above else (low - mean)
        count = max(1, int(math.floor(gap * rows.size / 2.0)))
        order = np.lexsort((-draws[rows], -scores if above else scores))
        eligible = [i for i in order if movable[rows[i]] and (scores[i] > 0 if above else scores[i] < 1)]
        if not eligible:
            return start
        keep[rows[eligible[:count]]] = False
    return start
