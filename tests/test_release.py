"""Releases appear whole or not at all; ``latest`` moves last; verdicts exclude rejected questions."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline import schemas
from pipeline.errors import ConfigError
from pipeline.release.atomic import latest_release, write_release
from pipeline.release.verdicts import apply_verdicts, read_verdicts


def _qa(n: int) -> pl.DataFrame:
    return schemas.from_rows(
        "qa",
        [{"id": f"q{i}", "key": "synthetic/s", "question_type": "object_counting_single", "question": "?",
          "ground_truth": str(i + 1), "budget": "all", "profile": "revsi", "video_kind": "real"} for i in range(n)],
    )


def test_release_is_atomic_and_latest_moves_last(tmp_path):
    first = write_release(tmp_path, {"qa": _qa(3)}, config={"seed": 0}, checks={"success": True})
    assert latest_release(tmp_path) == first.version
    assert (tmp_path / "latest").resolve() == first.path.resolve()
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["row_counts"] == {"qa": 3}
    assert "tables/qa.parquet" in manifest["files"]

    def explode(staging, version):
        (staging / "partial.txt").write_text("half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_release(tmp_path, {"qa": _qa(5)}, config={}, checks={}, extra_files=explode)
    assert latest_release(tmp_path) == first.version
    assert (tmp_path / "latest").resolve() == first.path.resolve()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["LATEST", "latest", first.version]), names


def test_same_content_same_version(tmp_path):
    a = write_release(tmp_path, {"qa": _qa(2)}, config={}, checks={})
    b = write_release(tmp_path, {"qa": _qa(2)}, config={}, checks={})
    assert a.version == b.version


def test_verdicts_reject_and_report_orphans(tmp_path):
    path = tmp_path / "verdicts.csv"
    path.write_text("qa_id,verdict,note,reviewer\nq1,reject,wrong count,ann\nq2,accept,,ann\ngone,reject,,bob\n")
    kept, rejected, orphans = apply_verdicts(_qa(3), read_verdicts(path))
    assert kept["id"].to_list() == ["q0", "q2"]
    assert rejected == ["q1"]
    assert orphans == ["gone"]


def test_bad_verdict_names_file_and_line(tmp_path):
    path = tmp_path / "verdicts.csv"
    path.write_text("qa_id,verdict\nq1,maybe\n")
    with pytest.raises(ConfigError, match=r"verdicts.csv:2: verdict 'maybe'"):
        read_verdicts(path)


def test_gated_release_writes_report_docs_manifest_and_blocks_on_failure(tmp_path):
    from pipeline.config import Config
    from pipeline.release.build import ReleaseBlocked, build_release
    from expectations.release_gate import release_gate
    from tests.test_quality_gate import _tables

    config = Config(output_root=str(tmp_path / "out"))
    outcome = build_release(config, tables=_tables(), gate=release_gate)
    assert outcome.report.exists() and outcome.data_docs.exists()
    html = outcome.report.read_text()
    assert "object_rel_distance_closest" in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    manifest = json.loads((outcome.release.path / "manifest.json").read_text())
    assert manifest["checks"]["success"] is True and "report/index.html" in manifest["files"]

    broken = _tables()
    broken["qa"] = broken["qa"].with_columns(pl.lit("Z").alias("ground_truth"))
    with pytest.raises(ReleaseBlocked, match="qa.answer_in_options"):
        build_release(config, tables=broken, gate=release_gate)
    assert latest_release(tmp_path / "out" / "releases") == outcome.release.version


def test_release_reads_only_the_scans_membership_says_were_built(tmp_path):
    """A failed scan's partition may keep files from an earlier build: the release never reads them."""
    import polars as pl

    from pipeline.config import Config
    from pipeline.release.build import collect_tables
    from pipeline.release.membership import ScanState, excluded_scans, membership_table
    from pipeline.storage import upath, write_table
    from tests.test_quality_gate import _tables

    config = Config(output_root=str(tmp_path))
    for key in ("a/1", "b/2"):
        write_table(upath(f"{config.tables_root}/objects/{key}.parquet"), "objects",
                    schemas.conform("objects", _tables()["objects"].with_columns(pl.lit(key).alias("key"))))
    membership = membership_table([ScanState("b/2", "built"), ScanState("a/1", "failed", "a/1: mesh.ply: truncated")])
    tables = collect_tables(config, names=("objects",), keys=["b/2"])
    assert set(tables["objects"]["key"]) == {"b/2"}
    assert excluded_scans(membership, ["x: not a scan"]) == {
        "failed_scans": [{"key": "a/1", "state": "failed", "error": "a/1: mesh.ply: truncated"}],
        "skipped_folders": ["x: not a scan"],
    }


def test_no_built_scan_publishes_nothing(tmp_path):
    """Every registered scan failed or is stale: the release step stops, naming the states, and the previous
    release stays latest (a release of no scan would replace a good one with nothing)."""
    from pipeline.config import Config
    from pipeline.release.build import ReleaseBlocked, build_release
    from expectations.release_gate import release_gate
    from pipeline.release.membership import ScanState, membership_table
    from tests.test_quality_gate import _tables

    config = Config(output_root=str(tmp_path / "out"))
    good = build_release(config, tables=_tables(), gate=release_gate)
    membership = membership_table([ScanState("a/1", "stale", "visibility was built again"),
                                   ScanState("b/2", "failed", "b/2: mesh.ply: truncated")])
    with pytest.raises(ReleaseBlocked, match=r"no scan may be released \(1 failed, 1 stale\): nothing published"):
        build_release(config, membership=membership, gate=release_gate)
    assert latest_release(tmp_path / "out" / "releases") == good.release.version
