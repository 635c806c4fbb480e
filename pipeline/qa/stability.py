"""Soft pins: the previous release's questions are kept ahead of the others, so releases stay stable.

The answer-distribution control and Iterative Bias Pruning are dataset-wide: one more scan changes the group
sizes, the class caps and the adversary's folds, and with seeded draws alone the other scans' questions flip
in and out (41 of 5,280 gone and 96 new after adding one scan to 8, issue 38 item 8), taking a reviewer's
unaccepted work with them. A reviewer's accepted questions are hard pins (never dropped); every question the
previous release shipped is a *soft pin*: each choice of the control takes it before any other question, but a
bound (a class share, the constant ceiling, the blind bound, the adversary) may still force it out.

Each controlled row gets a preference: ``-1`` released before, ``0`` a new candidate (a scan added or changed),
``+1`` a candidate the previous release's control dropped (its scan unchanged: it stays behind the new ones, or
a grown cap would fill with the old scans' leftovers instead of the new scan's questions). Every seeded order of
the control adds it to the draw in [0, 1), so the tiers never mix and within a tier the order is the seeded
one; pruning drops by tier first. Where the share, ceiling and blind rules of a group would still drop a soft
pin (the blind and ceiling steps choose by score, the draw only breaks ties), the group is decided again with
every soft pin held like an accepted one, and that choice is taken unless it misses a bound the first one
meets. With no previous release nothing changes, byte for byte.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.qa.ids import id_among

PREFERENCE = "_preference"


@dataclass(frozen=True)
class PreviousRelease:
    """The question ids of the release a build follows: shipped (soft pins) and dropped by its control."""

    released: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.released or self.dropped)


def of(released: Collection[str] = (), dropped: Collection[str] = ()) -> PreviousRelease:
    return PreviousRelease(frozenset(released), frozenset(dropped) - frozenset(released))


def with_preference(rows: pl.DataFrame, previous: PreviousRelease | None) -> pl.DataFrame:
    """``rows`` with their ``PREFERENCE`` column; unchanged without a previous release."""
    if not previous:
        return rows
    tier = (
        pl.when(id_among(previous.released)).then(-1)
        .when(id_among(previous.dropped)).then(1)
        .otherwise(0)
        .cast(pl.Int8)
    )
    return rows.with_columns(tier.alias(PREFERENCE))


def preference(part: pl.DataFrame) -> np.ndarray | None:
    """Each row's tier (-1 kept first ... +1 last), or None where no previous release counts."""
    if PREFERENCE not in part.columns:
        return None
    tiers = part[PREFERENCE].to_numpy().astype(float)
    return tiers if tiers.any() else None


def soft_pins(part: pl.DataFrame) -> np.ndarray | None:
    """Mask of the rows the previous release shipped, or None when there are none."""
    if PREFERENCE not in part.columns:
        return None
    mask = (part[PREFERENCE] == -1).to_numpy()
    return mask if mask.any() else None


def preferred_draws(part: pl.DataFrame, draws: Sequence[float]):
    """``draws`` (unit draws of ``part``'s rows) with each row's tier added: soft pins sort first, same type out."""
    tiers = preference(part)
    if tiers is None:
        return draws
    shifted = np.asarray(draws, dtype=float) + tiers
    return shifted.tolist() if isinstance(draws, list) else shifted
