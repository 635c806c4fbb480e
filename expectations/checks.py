"""Each suite rule decided in polars over a whole view, with Great Expectations' semantics.

What counts as failing follows GX's pandas engine exactly: column rules skip
missing values (null, and NaN in float columns, which pandas calls missing);
a uniqueness rule fails every row of a duplicated group; a compound key
whose values are all missing is skipped; a column rule on a column the view
lacks fails with no rows named. The runner still hands GX a bounded sample
(``bounded_rows``) that contains failing rows of every failed rule, so GX's
verdicts on it must match these.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from expectations.suites import Rule

MAX_LISTED_ROWS = 20  # failing rows named per rule
SAMPLE_ROWS = 1000  # leading rows of a view that GX validates besides the failing ones


@dataclass(frozen=True)
class RuleCheck:
    success: bool
    unexpected_count: int
    positions: list[int]  # the first failing row positions, in row order


def _present(view: pl.DataFrame, column: str) -> pl.Expr:
    present = pl.col(column).is_not_null()
    if view.schema[column].is_float():
        present = present & ~pl.col(column).is_nan()
    return present


def _failing(rule: Rule, view: pl.DataFrame) -> pl.Expr | None:
    kind, kwargs = rule.expectation, rule.kwargs
    if kind == "ExpectCompoundColumnsToBeUnique":
        columns = kwargs["column_list"]
        missing = pl.all_horizontal(~_present(view, c) for c in columns)
        return ~missing & pl.struct(columns).is_duplicated()
    column = kwargs["column"]
    col, present = pl.col(column), _present(view, column)
    if kind == "ExpectColumnValuesToNotBeNull":
        return ~present
    if kind == "ExpectColumnValuesToBeInSet":
        return present & ~col.is_in(pl.Series(kwargs["value_set"], dtype=view.schema[column]).implode())
    if kind == "ExpectColumnValuesToBeUnique":
        return present & col.is_duplicated()
    if kind == "ExpectColumnValuesToBeBetween":
        lo, hi = kwargs.get("min_value"), kwargs.get("max_value")
        out = pl.lit(False)
        if lo is not None:
            out = out | ((col <= lo) if kwargs.get("strict_min") else (col < lo))
        if hi is not None:
            out = out | ((col >= hi) if kwargs.get("strict_max") else (col > hi))
        return present & out
    raise ValueError(f"{rule.name}: no polars check for {kind}")


def check_rule(rule: Rule, view: pl.DataFrame) -> RuleCheck:
    if rule.expectation == "ExpectTableColumnsToMatchOrderedList":
        ok = list(view.columns) == list(rule.kwargs["column_list"])
        return RuleCheck(ok, 0 if ok else 1, [])  # a table-level failure counts as one, naming no row
    needed = rule.kwargs.get("column_list") or [rule.kwargs["column"]]
    if any(c not in view.columns for c in needed):
        return RuleCheck(False, 0, [])
    failing = view.select(_failing(rule, view).fill_null(False).alias("f"))["f"]
    count = int(failing.sum())
    return RuleCheck(count == 0, count, failing.arg_true().head(MAX_LISTED_ROWS).to_list() if count else [])


def bounded_rows(view: pl.DataFrame, rules: list[Rule], checks: dict[str, RuleCheck]) -> pl.DataFrame:
    """The first rows plus the listed failing rows of every rule (with a duplicate of the first for uniqueness)."""
    positions = set(range(min(SAMPLE_ROWS, view.height)))
    for rule in rules:
        check = checks[rule.name]
        positions.update(check.positions)
        if check.positions and "Unique" in rule.expectation:
            columns = rule.kwargs.get("column_list") or [rule.kwargs["column"]]
            first = view.slice(check.positions[0], 1).select(columns).row(0)
            partner = (
                view.with_row_index("_row")
                .filter(pl.all_horizontal(pl.col(c).eq_missing(v) for c, v in zip(columns, first)))
                .filter(pl.col("_row") != check.positions[0])["_row"]
            )
            positions.update(partner.head(1).to_list())
    return view[sorted(positions)] if positions else view.clear()


def failing_ids(view: pl.DataFrame, id_column: str | None, positions: list[int]) -> list[str]:
    if not id_column or id_column not in view.columns:
        return [str(p) for p in positions]
    ids = view[id_column]
    return [str(ids[p]) for p in positions]
