"""The gate's Data Docs: every validation listed, plain-language meanings, nothing fetched from anywhere."""

from __future__ import annotations

import re

import polars as pl
import pytest

from expectations.runner import run_gate
from expectations.suites import build_suites
from tests.test_quality_gate import BUDGETS, _tables


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs")
    broken = _tables()
    broken["qa"] = broken["qa"].with_columns(pl.when(pl.col("id") == "q1").then(pl.lit("Z")).otherwise("ground_truth").alias("ground_truth"))
    report = run_gate(broken, docs_dir=str(folder), budgets=BUDGETS)
    return folder, report


def test_index_lists_every_validation_with_its_status(site):
    folder, report = site
    index = (folder / "index.html").read_text()
    suites = {v.suite for v in report.validations}
    assert suites == {"scans", "objects", "object_visibility", "qa", "qa_distribution"}
    for suite in suites:
        assert f'href="validations/{suite}.html"' in index and (folder / "validations" / f"{suite}.html").is_file()
    assert 'aria-label="failed"' in index and 'aria-label="passed"' in index
    assert "qa.answer_in_options" in index and "q1" in index  # the failure names its rule and row


def test_pages_need_nothing_but_themselves(site):
    folder, _ = site
    for page in folder.rglob("*.html"):
        text = page.read_text()
        assert "<script" not in text and "http://" not in text and "https://" not in text, page
        assert "<style>" in text
        for target in re.findall(r'(?:href|src)="([^"#]+)"', text):
            assert (page.parent / target).resolve().is_file(), f"{page.name} links {target}"


def test_every_expectation_says_what_it_means(site):
    folder, report = site
    for v in report.validations:
        assert all(e.meaning for e in v.expectations), [e.rule for e in v.expectations if not e.meaning]
    qa = (folder / "validations" / "qa.html").read_text()
    assert "every question names only objects visible in its budget&#x27;s frames" in qa
    assert "helper column <code>answerable</code>" in qa
    rules = [r for s in build_suites(budgets=BUDGETS) for r in s.rules]
    assert all(r.meaning for r in rules), [r.name for r in rules if not r.meaning]


def test_pages_are_the_same_for_the_same_tables(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_gate(_tables(), docs_dir=str(a), budgets=BUDGETS)
    run_gate(_tables(), docs_dir=str(b), budgets=BUDGETS)
    pages = sorted(p.relative_to(a) for p in a.rglob("*.html"))
    assert pages and all((a / p).read_bytes() == (b / p).read_bytes() for p in pages)


def test_the_result_format_the_gate_asks_for_gives_the_pages_complete_gives(tmp_path, monkeypatch):
    """GX computes less with ``RESULT_FORMAT`` than with COMPLETE; every page must read the same (clean and broken)."""
    from expectations import runner

    broken = _tables()
    broken["qa"] = broken["qa"].with_columns(pl.when(pl.col("id") == "q1").then(None).otherwise(pl.col("question")).alias("question"))
    broken["objects"] = broken["objects"].drop("raw_label")  # a rule on a missing column: GX raises
    for name, tables in {"clean": _tables(), "broken": broken}.items():
        sites = {}
        for result_format in (runner.RESULT_FORMAT, "COMPLETE"):
            monkeypatch.setattr(runner, "RESULT_FORMAT", result_format)
            run_gate(tables, docs_dir=str(tmp_path / name / result_format), budgets=BUDGETS)
            sites[result_format] = {p.relative_to(tmp_path / name / result_format): p.read_bytes()
                                    for p in (tmp_path / name / result_format).rglob("*.html")}
        assert sites["COMPLETE"] and sites[runner.RESULT_FORMAT] == sites["COMPLETE"], name
