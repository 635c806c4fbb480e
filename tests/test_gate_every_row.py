"""Great Expectations validates every row of every released view, batch by batch, and agrees with polars.

A gate that hands GX a sample says "rows GX validated 1,000" of 5,280: the Data Docs then vouch for rows GX never
saw. Here batches stand for GX_BATCH_ROWS = 200,000 with 5 rows, so every view spans several batches: GX's row
count must equal the view's, its unexpected counts must add up to the polars count, and a duplicate id whose two
rows fall in different slices must still be one batch's failure (the key columns are hash-partitioned).
"""

from __future__ import annotations

import polars as pl
import pytest

from expectations import runner
from expectations.runner import run_gate
from tests.test_quality_gate import BREAKAGES, BUDGETS, _tables


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(runner, "GX_BATCH_ROWS", 5)


def _by_suite(report) -> dict:
    return {v.suite: v for v in report.validations}


def test_every_row_of_every_view_is_validated_by_gx():
    report = run_gate(_tables(12), budgets=BUDGETS)
    assert report.success, report.summary()
    for validation in report.validations:
        assert validation.sample_rows == validation.rows, validation.suite
        assert all(e.gx_success for e in validation.expectations), validation.suite


def test_gx_counts_add_up_over_batches_and_match_polars():
    tables = _tables(12)
    BREAKAGES["qa.budget_in_set"](tables)
    report = run_gate(tables, budgets=BUDGETS)
    qa = _by_suite(report)["qa"]
    assert qa.sample_rows == qa.rows == tables["qa"].height
    failed = [e for e in qa.expectations if not e.success]
    assert failed and all(e.gx_success is False for e in failed)
    assert all(e.gx_unexpected_count == e.unexpected_count for e in failed)


def test_a_duplicate_split_across_slices_is_found_by_gx():
    tables = _tables(12)
    qa = tables["qa"]
    tables["qa"] = pl.concat([qa, qa.slice(0, 1)])  # row 0 again, in the last slice
    report = run_gate(tables, budgets=BUDGETS)
    unique = [e for e in _by_suite(report)["qa"].expectations if "unique" in e.expectation_type]
    assert unique and any(not e.success for e in unique)
    assert all(e.gx_success == e.success for e in unique)
    assert all(e.gx_unexpected_count == e.unexpected_count for e in unique if not e.success)
