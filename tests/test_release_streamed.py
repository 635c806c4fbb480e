"""A release read from the output root streams its qa table and writes what the in-memory release writes."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline import storage
from pipeline.config import Config
from pipeline.release.build import build_release, collect_tables
from expectations.release_gate import release_gate
from pipeline.release.report import without_stamp
from tests.test_quality_gate import _tables


def _root(tmp_path, name: str, verdicts: str | None) -> Config:
    root = tmp_path / name
    tables = _tables(12)
    for table, df in tables.items():
        storage.write_table(storage.upath(root / "tables" / f"{table}.parquet"), table, df)
    verdicts_path = None
    if verdicts is not None:
        verdicts_path = root / "verdicts.csv"
        verdicts_path.write_text("qa_id,verdict,note,reviewer\n" + verdicts)
    return Config(output_root=str(root), reviews_path=str(verdicts_path) if verdicts_path else None)


@pytest.mark.parametrize("verdicts", [None, "q3,reject,wrong,ann\nq4,accept,,bob\nq99,reject,,ann\n"])
def test_streamed_release_is_the_in_memory_release(tmp_path, monkeypatch, verdicts):
    # Row groups of 5 questions stand for 1 Mi: the qa file has several, and a rejected question shifts them.
    monkeypatch.setattr(storage, "ROW_GROUP_ROWS", 5)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    streamed_config = _root(tmp_path, "streamed", verdicts)
    whole_config = _root(tmp_path, "whole", verdicts)
    streamed = build_release(streamed_config, gate=release_gate)
    whole = build_release(whole_config, tables=collect_tables(whole_config), gate=release_gate)
    assert streamed.release.version == whole.release.version
    for table in sorted((whole.release.path / "tables").iterdir()):
        assert (streamed.release.path / "tables" / table.name).read_bytes() == table.read_bytes(), table.name
    assert streamed.rejected == whole.rejected and streamed.orphan_verdicts == whole.orphan_verdicts
    report = lambda outcome: without_stamp(outcome.report.read_text())  # noqa: E731
    assert report(streamed) == report(whole)
    qa = pl.read_parquet(streamed.release.path / "tables" / "qa.parquet")
    assert qa.height == 12 - (verdicts is not None)
