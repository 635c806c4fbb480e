"""Keep as many numeric questions as possible while no constant answer scores above a ceiling.

The constraint is linear in the kept set: for every constant c,
sum over kept questions of (MRA(c, t_i) - ceiling) <= 0. Lowering one cap per
answer class (the older control) cuts every class alike, far from the peak
too, and on object sizes never reached 17.4% at all (10% bins of 19..542 cm,
one question each, still let a guess near 1 m score 18%). Here the densest
point is peeled instead: at the best constant answer, the kept questions it
scores highest on (the ones closest to it) go first, highest seeded draw
first, until the best constant is under the ceiling.

Peeling alone can collapse (on the 288 VSI-Bench scenes' object sizes it
peels to nothing, while the linear-programming relaxation allows 48 of 364),
so ``keep_under_ceiling`` also solves that relaxation (one variable per
distinct answer, one row per candidate constant), rounds it in value order (tightening it a little when the rounding lands
above the ceiling), adds back what still fits (lowest draw first) and keeps the larger
of the selections, or, where both fall short, the flattest log-spaced
subset of the largest size that fits. ``lp_upper_bound`` is the relaxation's optimum: no
subset meeting the ceiling is larger, which is how tests show the selection
is close to the best.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from pipeline.scoring.best_constant import TOLERANCES, best_constant


def scores_at(answer: float, targets: np.ndarray) -> np.ndarray:
    """MRA of the constant ``answer`` on each target (the harnesses' comparison)."""
    safe = np.where(targets > 0, targets, np.nan)
    error = np.abs(answer - safe) / safe
    return (error[:, None] <= TOLERANCES[None, :]).mean(axis=1)


def peel_to_ceiling(
    values: np.ndarray,
    draws: np.ndarray,
    keep: np.ndarray,
    ceiling: float,
    pinned: np.ndarray | None = None,
) -> np.ndarray:
    """``keep`` minus the questions that must go for the best constant answer to score at most ``ceiling``.

    ``values``: each row's numeric answer; ``draws``: seeded unit draws (ties go to the higher draw, then
    the later row); ``pinned`` rows never go. When only pinned questions are left near the peak the
    result may stay above the ceiling; the caller reads ``best_constant`` of it.
    """
    keep = keep.copy()
    values = np.asarray(values, dtype=float)
    order_tie = np.lexsort((np.arange(values.size), np.asarray(draws, dtype=float)))
    rank = np.empty(values.size, dtype=float)
    rank[order_tie] = np.arange(values.size)  # higher rank: dropped first among equals
    movable = ~pinned if pinned is not None else np.ones(values.size, dtype=bool)
    while True:
        found = best_constant(values[keep])
        if found is None or found[0] <= ceiling + 1e-12:
            return keep
        score, answer = found
        candidates = np.flatnonzero(keep & movable)
        if candidates.size == 0:
            return keep
        near = scores_at(answer, values[candidates])
        if not (near > 0).any():
            return keep
        # Dropping a question the peak scores s on lowers the peak by about (s - score) / n; remove at most
        # half of what the excess calls for in one pass, so a pass never overshoots by much.
        excess = (score - ceiling) * int(keep.sum())
        count = max(1, int(math.floor(excess / 2.0)))
        order = np.lexsort((-rank[candidates], -near))
        chosen = candidates[order[:count]]
        chosen = chosen[near[order[:count]] > 0]
        keep[chosen] = False


RELAXATION_MARGINS = (0.0, 0.02, 0.04, 0.07, 0.1, 0.15)  # tighter ceilings tried when a rounding lands above
ADD_BACK_ATTEMPTS = 400  # rows tried one by one after the rounded relaxation (each try is one sweep)


def _relaxation(targets: np.ndarray, low: np.ndarray, high: np.ndarray, ceiling: float):
    """The LP over distinct answers: max sum x_v, low <= x <= high, sum_v x_v (MRA(c, t_v) - ceiling) <= 0 for all c."""
    candidates = np.unique(np.concatenate([(targets[:, None] * (1.0 - TOLERANCES[None, :])).ravel(), targets]))
    rows, cols, data = [], [], []
    for r, c in enumerate(candidates):
        s = scores_at(c, targets)
        nz = np.flatnonzero(s > 0)
        rows += [r] * nz.size
        cols += nz.tolist()
        data += s[nz].tolist()
    k = targets.size
    # x_v for each answer, then N = sum x_v: every row reads sum s x - ceiling N <= 0 and stays sparse.
    a_scores = sparse.coo_matrix((data, (rows, cols)), shape=(candidates.size, k + 1)).tocsr()
    a_n = sparse.coo_matrix((np.full(candidates.size, -ceiling), (np.arange(candidates.size), np.full(candidates.size, k))), shape=(candidates.size, k + 1))
    a_eq = sparse.csr_matrix(np.concatenate([np.ones(k), [-1.0]])[None, :])
    objective = np.concatenate([-np.ones(k), [0.0]])
    bounds = [(float(lo), float(hi)) for lo, hi in zip(low, high)] + [(0.0, None)]
    result = linprog(objective, A_ub=(a_scores + a_n).tocsr(), b_ub=np.zeros(candidates.size), A_eq=a_eq, b_eq=[0.0], bounds=bounds, method="highs")
    return result.x[:k] if result.status == 0 else None


def lp_upper_bound(values, ceiling: float) -> float | None:
    """The largest (fractional) number of questions of ``values`` whose best constant answer scores <= ``ceiling``."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x) and x > 0], dtype=float)
    if v.size == 0:
        return 0.0
    targets, counts = np.unique(v, return_counts=True)
    x = _relaxation(targets, np.zeros(targets.size), counts.astype(float), ceiling)
    return None if x is None else float(x.sum())


def _meets(values: np.ndarray, keep: np.ndarray, ceiling: float) -> bool:
    found = best_constant(values[keep])
    return found is None or found[0] <= ceiling + 1e-12


def keep_under_ceiling(
    values: np.ndarray,
    draws: np.ndarray,
    keep: np.ndarray,
    ceiling: float,
    pinned: np.ndarray | None = None,
) -> np.ndarray:
    """The larger of the peeled selection and the rounded, repaired relaxation (a subset of ``keep``).

    ``pinned`` rows stay. Pins the selection made without them keeps anyway change nothing (a reviewer who
    accepts every released question gets the same release): that selection is taken. Otherwise the selection
    built around the pins, when it meets the ceiling; when it cannot (a pin whose answer no spread of the
    others bounds, as in a small type), the selection without them plus the pins, so a pin costs its type at
    most its own place and never reopens the type whole. No selection at all (empty) stays out of reach.
    """
    free = _select_under_ceiling(values, draws, keep, ceiling)
    if pinned is None or not (pinned & keep & ~free).any():
        return free
    held = _select_under_ceiling(values, draws, keep, ceiling, pinned)
    if _meets(np.asarray(values, dtype=float), held, ceiling):
        return held
    return free | (pinned & keep) if free.any() else free  # none at all: out of reach, pins or not


def _select_under_ceiling(
    values: np.ndarray,
    draws: np.ndarray,
    keep: np.ndarray,
    ceiling: float,
    pinned: np.ndarray | None = None,
) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    draws = np.asarray(draws, dtype=float)
    peeled = peel_to_ceiling(values, draws, keep, ceiling, pinned)
    if _meets(values, keep, ceiling):
        return peeled
    pinned = np.zeros(values.size, dtype=bool) if pinned is None else pinned
    positive = keep & np.isfinite(values) & (values > 0)
    targets, inverse = np.unique(values[positive], return_inverse=True)
    rows = np.flatnonzero(positive)
    counts = np.bincount(inverse, minlength=targets.size).astype(float)
    pins = np.bincount(inverse, weights=pinned[rows].astype(float), minlength=targets.size)
    order = np.lexsort((rows, draws[rows], ~pinned[rows]))  # pinned first, then lowest draw
    best = peeled
    for margin in RELAXATION_MARGINS:
        x = _relaxation(targets, pins, counts, ceiling * (1.0 - margin))
        if x is None:
            break
        rounded = keep & ~positive  # rows without a positive answer are not the bound's business
        # Systematic rounding in value order: any range of answers keeps the relaxation's count there within
        # one question, so every constraint (a mean of ten ranges) moves by at most one question's score;
        # a tighter relaxation (``margin``) absorbs that when the first rounding lands above the ceiling.
        cumulative = np.cumsum(np.clip(x, pins, counts))
        quota = np.diff(np.floor(np.concatenate([[0.0], cumulative]) + 0.5 + 1e-9)).astype(int)
        taken = np.zeros(targets.size, dtype=int)
        for i in order:
            v = inverse[i]
            if taken[v] < quota[v] or pinned[rows[i]]:
                rounded[rows[i]] = True
                taken[v] += 1
        if not _meets(values, rounded, ceiling):
            continue
        rounded = _add_back(values, draws, rounded, keep & ~pinned | rounded, ceiling)
        if rounded.sum() > best.sum():
            best = rounded
        break
    bound = lp_upper_bound(values[keep], ceiling)
    if bound is not None and pinned.sum() == 0:
        for k in range(int(math.floor(bound + 1e-9)), int(best.sum()), -1):
            spread = _log_spread(values, draws, positive, k) | (keep & ~positive)
            if _meets(values, spread, ceiling):
                best = _add_back(values, draws, spread, keep, ceiling)
                break
    return best


def _add_back(values: np.ndarray, draws: np.ndarray, chosen: np.ndarray, keep: np.ndarray, ceiling: float) -> np.ndarray:
    """``chosen`` plus every other row of ``keep`` (lowest draw first) that still leaves the ceiling met."""
    chosen = chosen.copy()
    left = np.flatnonzero(keep & ~chosen)
    for i in left[np.lexsort((left, draws[left]))][:ADD_BACK_ATTEMPTS]:
        chosen[i] = True
        if not _meets(values, chosen, ceiling):
            chosen[i] = False
    return chosen


def _log_spread(values: np.ndarray, draws: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """``k`` of the ``candidates`` rows whose answers are as evenly spaced in log space as the answers allow.

    The flattest spread has the lowest best constant for its size, so on a type whose feasible subsets are
    small (object sizes: the relaxation allows 48 of 364) it finds one where peeling and rounding do not.
    """
    rows = np.flatnonzero(candidates)
    rows = rows[np.lexsort((rows, draws[rows], values[rows]))]
    logs = np.log(values[rows])
    used = np.zeros(rows.size, dtype=bool)
    for point in np.linspace(logs[0], logs[-1], k):
        j = int(np.searchsorted(logs, point))
        window = np.arange(max(0, j - k - 1), min(rows.size, j + k + 1))
        window = window[~used[window]]
        if window.size:
            used[window[np.argmin(np.abs(logs[window] - point))]] = True
    keep = np.zeros(values.size, dtype=bool)
    keep[rows[used]] = True
    return keep
