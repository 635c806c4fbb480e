"""Choosing k items whose values are pairwise at least a gap apart (options of MCQs).

Relative-distance options must differ by at least 0.3 m and appearance-order
categories by at least 1 s. Enumerating every k-subset explodes on large
scenes, so subsets are drawn: shuffle with a seeded generator, take items
greedily while they keep the gap, repeat. Distinct subsets come back sorted,
and the generator is derived from (seed, scan, budget, purpose), so the same
seed always yields the same subsets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def spaced_subsets(
    values: Sequence[float], k: int, min_gap: float, rng: np.random.Generator, *, wanted: int, attempts: int = 20
) -> list[tuple[int, ...]]:
    """Up to ``wanted`` distinct index tuples (sorted) of size ``k`` with pairwise |v_i - v_j| >= min_gap."""
    n = len(values)
    if n < k or wanted <= 0:
        return []
    vals = np.asarray(values, dtype=float)
    found: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    for _ in range(max(attempts, wanted)):
        chosen: list[int] = []
        for idx in rng.permutation(n):
            if all(abs(vals[idx] - vals[j]) >= min_gap for j in chosen):
                chosen.append(int(idx))
                if len(chosen) == k:
                    break
        if len(chosen) == k:
            subset = tuple(sorted(chosen))
            if subset not in seen:
                seen.add(subset)
                found.append(subset)
                if len(found) >= wanted:
                    break
    return found
