"""The groups of a large table, one at a time.

``df.sort(keys + order).group_by(keys, maintain_order=True)`` sorts a copy of
the whole table and then splits it into a copy per group, all at once: three
times the table in memory for the release's baselines over millions of
questions. Here the rows are grouped by hashing only the grouping columns
(a row number list per group; polars keeps rows in their order within a
group), the groups are sorted by key, and each group's rows are gathered and
sorted by ``order`` when it is reached: one group is held beside the table,
and the whole table's rows are never sorted. Groups and rows come in the same
order as the sort would give them (``order`` names a unique column, ``id``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import polars as pl

ROW = "__row"


def sorted_groups(
    df: pl.DataFrame, keys: Sequence[str], order: Sequence[str] = ("id",), where: pl.Expr | None = None
) -> Iterator[tuple[tuple, pl.DataFrame]]:
    """(key values, rows) per group of ``keys`` in sorted key order, each group's rows sorted by ``order``;
    with ``where`` only the rows it selects (the groups of ``df.filter(where)``, with no filtered copy made)."""
    if df.height == 0:
        return
    keys, order = list(keys), [c for c in order if c not in keys]
    index = df.select(*keys).with_row_index(ROW)
    if where is not None:
        index = index.filter(df.select(where).to_series())
    index = index.group_by(keys).agg(pl.col(ROW)).sort(keys)
    for *key, rows in index.iter_rows():
        group = df.select(pl.all().gather(pl.Series(rows, dtype=pl.UInt32)))
        yield tuple(key), group.sort(order) if order else group
