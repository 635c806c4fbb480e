"""The best constant answer of a numeric type: the highest mean MRA any one number scores on all its questions.

The frequency baseline answers the mode, and which of several tied modes it
answers is a tie-break (the smallest): shrinking answer classes creates ties,
so the mode's score can fall while a model that learned the prior still
answers the densest value. Bounding the best constant bounds every constant
answer, the mode under any tie-break included.

A guess c scores threshold theta on target t when |c - t| / t <= 1 - theta
(the harnesses' comparison, ``metrics.MRA_THRESHOLDS``): a closed interval of
c per (t, theta). The total score is a step function of c whose maximum is
reached at the left end of some interval, so a sweep over the interval ends
finds it exactly over *all* real answers, not only the answers that occur
(which the earlier search tried, and which can miss a point between two
clusters). Exact up to rounding where two interval ends coincide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pipeline.scoring.metrics import MRA_THRESHOLDS

TOLERANCES = 1.0 - MRA_THRESHOLDS


def _positive(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([x for x in values if x is not None and math.isfinite(x) and x > 0], dtype=float)


def best_constant(values: Sequence[float | None]) -> tuple[float, float] | None:
    """(score, answer): the highest mean MRA of one constant answer over ``values``, and an answer reaching it.

    Non-positive or missing values are left out (a zero target needs an exact 0, which no positive guess
    scores); None when nothing is left.
    """
    v = _positive(values)
    if v.size == 0:
        return None
    targets, weights = np.unique(v, return_counts=True)
    low = (targets[:, None] * (1.0 - TOLERANCES[None, :])).ravel()
    high = (targets[:, None] * (1.0 + TOLERANCES[None, :])).ravel()
    w = np.repeat(weights, TOLERANCES.size).astype(float)
    points = np.concatenate([low, high])
    deltas = np.concatenate([w, -w])
    # At equal coordinates starts come before ends: the intervals are closed.
    order = np.lexsort((np.concatenate([np.zeros(low.size), np.ones(high.size)]), points))
    running = np.cumsum(deltas[order])
    best = int(np.argmax(running))
    score = float(running[best]) / (TOLERANCES.size * float(weights.sum()))
    return min(score, 1.0), float(points[order][best])


def best_constant_score(values: Sequence[float | None]) -> float | None:
    """The score of ``best_constant`` alone."""
    found = best_constant(values)
    return None if found is None else found[0]
