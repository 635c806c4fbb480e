"""Each suite rule decided in polars over a whole view, with Great Expectations' semantics.

What counts as failing follows GX's pandas engine exactly: column rules skip
missing values (null, and NaN in float columns, which pandas calls missing);
a uniqueness rule fails every row of a duplicated group; a compound key
whose values are all missing is skipped; a column rule on a column the view
lacks fails with no rows named. The runner has GX validate every row too
(``runner.gx_batches``), and GX's verdicts must match these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import polars as pl

from expectations.suites import Rule

MAX_LISTED_ROWS = 20  # failing rows named per rule


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


def failing_ids(view: pl.DataFrame, id_column: str | None, positions: list[int]) -> list[str]:
    if not id_column or id_column not in view.columns:
        return [str(p) for p in positions]
    ids = view[id_column]
    return [str(ids[p]) for p in positions]


# --- views too large to hold: decided a slice at a time -------------------------------------------------------------


@dataclass(frozen=True)
class SlicedView:
    """A view too large to hold (the qa view at 10,000 scans): ``slices()`` gives it in row order, one slice's
    view at a time; ``columns(names)`` gives the whole table's columns ``names``, for the rules that compare
    all rows at once (uniqueness)."""

    slices: Callable[[], Iterator[pl.DataFrame]]
    columns: Callable[[list[str]], pl.DataFrame]


@dataclass
class Decided:
    """A suite's rules decided over a whole view: per-rule checks, the view's height and the id of every listed
    failing row."""

    checks: dict[str, RuleCheck]
    height: int
    ids: dict[int, str]

    def failing_ids(self, positions: list[int]) -> list[str]:
        return [self.ids[p] for p in positions]


def _ids_at(rows: pl.DataFrame, positions: list[int], id_column: str | None) -> dict[int, str]:
    return dict(zip(positions, failing_ids(rows, id_column, list(range(len(positions))))))


def decide(view: pl.DataFrame | SlicedView, rules: list[Rule], id_column: str | None) -> Decided:
    """Every rule of a suite over ``view``, whole or sliced; both give the same checks and ids."""
    if isinstance(view, SlicedView):
        return _decide_sliced(view, rules, id_column)
    checks = {rule.name: check_rule(rule, view) for rule in rules}
    listed = sorted({p for check in checks.values() for p in check.positions})
    return Decided(checks, view.height, _ids_at(view[listed], listed, id_column))


def _whole_table_rule(rule: Rule) -> bool:
    return "Unique" in rule.expectation


def _decide_sliced(view: SlicedView, rules: list[Rule], id_column: str | None) -> Decided:
    """``decide`` one slice at a time: row rules add up over slices (their first failing rows are the first of
    the first slices that fail, their ids read as the slice passes), uniqueness is decided over the whole table's
    key columns (and the id column, for the failing rows' ids)."""
    table_rules = [r for r in rules if r.expectation == "ExpectTableColumnsToMatchOrderedList"]
    row_rules = [r for r in rules if r not in table_rules and not _whole_table_rule(r)]
    counts = {r.name: 0 for r in row_rules}
    passed = {r.name: True for r in row_rules}
    listed: dict[str, list[int]] = {r.name: [] for r in row_rules}
    checks: dict[str, RuleCheck] = {}
    ids: dict[int, str] = {}
    names_seen: list[str] = []
    offset = 0
    for piece in view.slices():
        names_seen = names_seen or list(piece.columns)
        if not checks and table_rules:
            checks.update({r.name: check_rule(r, piece) for r in table_rules})
        for rule in row_rules:
            check = check_rule(rule, piece)
            counts[rule.name] += check.unexpected_count
            passed[rule.name] &= check.success
            new = check.positions[: MAX_LISTED_ROWS - len(listed[rule.name])]
            listed[rule.name] += [offset + p for p in new]
            if new:
                ids.update(_ids_at(piece[new], [offset + p for p in new], id_column))
        offset += piece.height
    for rule in table_rules:
        checks.setdefault(rule.name, RuleCheck(True, 0, []))  # no slice at all: an empty view passes (as GX says)
    checks.update({r.name: RuleCheck(passed[r.name], counts[r.name], listed[r.name]) for r in row_rules})
    for rule in (r for r in rules if _whole_table_rule(r)):
        names = list(rule.kwargs.get("column_list") or [rule.kwargs["column"]])
        with_id = id_column is not None and id_column in names_seen and id_column not in names
        columns = view.columns(names + ([id_column] if with_id else []))
        check = check_rule(rule, columns)
        checks[rule.name] = check
        if check.positions:
            ids.update(_ids_at(columns[check.positions], check.positions, id_column))
        del columns
    return Decided(checks, offset, ids)
