"""The qa suite decided a row group at a time gives what it gives over the whole table in memory."""

from __future__ import annotations

import polars as pl
import pytest
from upath import UPath

from expectations import checks
from expectations.derived import build_views
from expectations.runner import decide_suites, run_gate
from expectations.suites import build_suites
from pipeline import storage
from pipeline.table_scan import TableParts
from tests.test_quality_gate import BREAKAGES, BUDGETS, _tables

QA_BREAKAGES = sorted(r for r in BREAKAGES if r.startswith("qa.") and r != "qa.schema")  # a stored table has its schema


def _duplicated(t):
    t["qa"] = pl.concat([t["qa"], t["qa"].slice(5, 1), t["qa"].slice(1, 1)])


def _sliced(tmp_path, tables: dict) -> dict:
    path = UPath(tmp_path / "qa.parquet")
    qa = tables["qa"]
    storage.write_frames(path, "qa", (qa.slice(i, 2) for i in range(0, qa.height, 2)))
    return tables | {"qa": TableParts("qa", (path,))}


@pytest.fixture(autouse=True)
def small_slices(monkeypatch):
    # Row groups of 3 rows and 2 listed failures stand for 1 Mi and 20.
    monkeypatch.setattr(storage, "ROW_GROUP_ROWS", 3)
    monkeypatch.setattr(checks, "MAX_LISTED_ROWS", 2)


@pytest.mark.parametrize("breakage", ["clean", "duplicated", *QA_BREAKAGES])
def test_sliced_and_whole_views_decide_alike(tmp_path, breakage):
    tables = _tables(12)
    if breakage == "duplicated":
        _duplicated(tables)
    elif breakage != "clean":
        BREAKAGES[breakage](tables)
    sliced = _sliced(tmp_path, tables)
    kwargs = {"frequency_ceiling": 1.0, "min_questions_for_distribution": 4}
    whole = decide_suites(tables, ["qa", "qa_distribution"], **kwargs, budgets=BUDGETS)
    by_slice = decide_suites(sliced, ["qa", "qa_distribution"], **kwargs, budgets=BUDGETS)
    assert by_slice.to_dict() == whole.to_dict()
    views, sliced_views = build_views(tables), build_views(sliced)
    (suite,) = [s for s in build_suites(1.0, 0.05, budgets=BUDGETS) if s.table == "qa"]
    a = checks.decide(views["qa"], suite.rules, suite.id_column)
    b = checks.decide(sliced_views["qa"], suite.rules, suite.id_column)
    assert isinstance(sliced_views["qa"], checks.SlicedView)
    assert (a.checks, a.height, a.ids) == (b.checks, b.height, b.ids)


def test_gate_on_a_sliced_qa_is_the_gate_on_the_whole(tmp_path):
    tables = _tables(12)
    BREAKAGES["qa.budget_in_set"](tables)
    whole, by_slice = run_gate(tables, budgets=BUDGETS), run_gate(_sliced(tmp_path, tables), budgets=BUDGETS)
    assert by_slice.to_dict() == whole.to_dict()
    assert [(v.suite, v.rows, v.sample_rows) for v in by_slice.validations] == [
        (v.suite, v.rows, v.sample_rows) for v in whole.validations
    ]
