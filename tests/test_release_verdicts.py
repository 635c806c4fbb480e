"""Reviewer verdicts: read from any storage, every verdict accounted for in the report and the manifest."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline import schemas
from pipeline.errors import ConfigError
from pipeline.release.churn import churn, churn_totals, previous_release_qa
from pipeline.release.verdicts import (
    DROPPED_BY_CONTROL,
    NOT_GENERATED,
    SCAN_NOT_RELEASED,
    accepted_ids,
    read_verdicts,
    verdict_outcomes,
    verdicts_fingerprint,
)
from pipeline.storage import upath
from tests.test_quality_gate import _tables

HEADER = "qa_id,verdict,note,reviewer\n"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"id,verdict\nq1,reject\n", r"verdicts.csv:1: missing column qa_id \(found id, verdict\)"),
        (b"", r"verdicts.csv:1: missing columns qa_id, verdict \(found an empty file\)"),
        (b"qa_id,verdict\nq1,accept\nq2,maybe\n", r"verdicts.csv:3: verdict 'maybe' is not accept or reject"),
        (b"qa_id,verdict\n,reject\n", r"verdicts.csv:2: empty qa_id"),
        (b"qa_id,verdict\nq1,accept\nq2,reject,extra\n", r"verdicts.csv:3: 3 cells, the header names 2"),
        (b"qa_id,verdict,note\nq1,reject,caf\xe9\n", r"verdicts.csv:2: not UTF-8 text \(byte 0xe9\)"),
    ],
)
def test_bad_verdicts_are_one_line_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "verdicts.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as error:
        read_verdicts(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_an_unreadable_verdicts_file_names_it(tmp_path):
    folder = tmp_path / "verdicts.csv"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"verdicts.csv: cannot read the verdicts file"):
        read_verdicts(folder)


def test_spreadsheet_exports_read_as_written(tmp_path):
    """A byte-order mark, spaces around names and blank rows are what spreadsheets write; the last verdict wins."""
    path = tmp_path / "verdicts.csv"
    path.write_bytes("\ufeffqa_id , verdict,note,reviewer\nq2,Accept,,ann\n,,,\nq1,reject,wrong,bob\nq2,reject,second look,ann\n".encode())
    verdicts = read_verdicts(path)
    assert verdicts.rows() == [("q1", "reject", "wrong", "bob"), ("q2", "reject", "second look", "ann")]
    assert read_verdicts(tmp_path / "absent.csv").is_empty()
    assert verdicts_fingerprint(tmp_path / "absent.csv") == {"version": "absent", "exists": False, "rows": 0}
    assert accepted_ids(read_verdicts(path)) == set()


def test_a_verdict_in_the_bucket_rejects_a_question(tmp_path, s3_bucket):
    """The output root is ``s3://``: the verdicts file there is read like a local one (it used to read 0 rows)."""
    from pipeline.config import Config
    from pipeline.release.build import build_release
    from expectations.release_gate import release_gate

    out = s3_bucket.uri("out")
    upath(f"{out}/reviews/verdicts.csv", s3_bucket.options).write_text(
        HEADER + "q3,reject,two tables in view,ann\nq5,accept,,bob\n"
    )
    config = Config(output_root=out, storage_options=s3_bucket.options)
    seen = verdicts_fingerprint(config.verdicts_path, config.storage_options)  # what the observation records
    assert seen["exists"] and seen["rows"] == 2 and seen["version"] != "absent"
    outcome = build_release(config, tables=_tables(), gate=release_gate)
    assert outcome.rejected == ["q3"]
    released = upath(f"{outcome.release.path}/tables/qa.parquet", s3_bucket.options)
    assert "q3" not in pl.read_parquet(released.read_bytes())["id"].to_list()
    checks = json.loads(upath(f"{outcome.release.path}/manifest.json", s3_bucket.options).read_text())["checks"]
    assert [(v["qa_id"], v["verdict"], v["reviewer"]) for v in checks["verdicts_applied"]] == [
        ("q3", "reject", "ann"), ("q5", "accept", "bob"),
    ]
    assert checks["verdicts_not_applied"] == []
    report = upath(f"{outcome.release.path}/report/index.html", s3_bucket.options).read_text()
    assert "two tables in view" in report and "question 3" in report  # the rejected question's text


def _qa(ids_keys: list[tuple[str, str]]) -> pl.DataFrame:
    return schemas.from_rows(
        "qa",
        [{"id": i, "key": k, "profile": "revsi", "budget": "all", "question_type": "object_counting_single",
          "question": f"how many in {i}?", "video_kind": "real"} for i, k in ids_keys],
    )


def test_every_verdict_is_applied_or_says_why_not():
    qa = _qa([("kept", "a/1"), ("accepted", "a/1"), ("stale", "b/2")])  # b/2 failed this build: excluded
    drops = schemas.from_rows(
        "qa_distribution_drops",
        [{"id": "balanced", "key": "a/1", "profile": "revsi", "budget": "all", "question_type": "object_counting_single",
          "reason": "answer class over 40% of its type"}],
    )
    verdicts = pl.DataFrame(
        {"qa_id": ["kept", "accepted", "stale", "balanced", "gone_scan", "typo"],
         "verdict": ["reject", "accept", "reject", "accept", "reject", "reject"],
         "note": ["n1", "", "", "", "", ""], "reviewer": ["ann"] * 6}
    )
    outcomes = {o["qa_id"]: o for o in verdict_outcomes(qa, verdicts, drops, {"b/2"}, known_keys={"gone_scan": "c/3"})}
    assert outcomes["kept"] | {} == {
        "qa_id": "kept", "verdict": "reject", "reviewer": "ann", "note": "n1", "applied": True, "key": "a/1",
        "question_type": "object_counting_single", "question": "how many in kept?",
    }
    assert outcomes["accepted"]["applied"]
    assert outcomes["stale"]["reason"] == SCAN_NOT_RELEASED and outcomes["stale"]["key"] == "b/2"
    assert outcomes["balanced"]["reason"] == f"{DROPPED_BY_CONTROL} (answer class over 40% of its type)"
    assert outcomes["gone_scan"]["reason"] == SCAN_NOT_RELEASED and outcomes["gone_scan"]["key"] == "c/3"
    assert outcomes["typo"]["reason"] == NOT_GENERATED and "key" not in outcomes["typo"]
    assert [o["qa_id"] for o in verdict_outcomes(qa, verdicts, drops, {"b/2"})] == sorted(verdicts["qa_id"].to_list())


def test_churn_counts_kept_new_and_gone_per_type():
    previous = _qa([("q1", "a/1"), ("q2", "a/1"), ("q3", "b/2"), ("q4", "c/3")])
    current = _qa([("q1", "a/1"), ("q3", "b/2"), ("q5", "a/1"), ("q6", "d/4")])  # c/3 left, d/4 came
    (row,) = churn(previous, current)
    assert row == {
        "profile": "revsi", "question_type": "object_counting_single", "previous": 4, "current": 4, "kept": 2,
        "new": 2, "new_in_previous_scans": 1, "gone": 2, "gone_in_released_scans": 1,
        # q4's scan c/3 left; q2 of a/1 is no candidate now (nothing dropped it); q6's scan d/4 was added; q5 of
        # a/1 is a new candidate (the previous release's control had not dropped it)
        "gone_scan_removed": 1, "gone_scan_changed": 1, "gone_bound": 0, "gone_rejected": 0,
        "new_scan_added": 1, "new_candidate": 1, "new_back_in": 0,
    }
    assert churn_totals([row, row])["gone"] == 4
    drops, before = pl.DataFrame({"id": ["q2"]}), pl.DataFrame({"id": ["q5"]})
    (row,) = churn(previous, current, drops=drops, previous_drops=before)
    assert (row["gone_bound"], row["gone_scan_changed"], row["new_back_in"], row["new_candidate"]) == (1, 0, 1, 0)
    (row,) = churn(previous, current, drops=drops, rejected=["q2"])
    assert (row["gone_rejected"], row["gone_bound"]) == (1, 0)
    (row,) = churn(previous, current, changed_keys=["a/1"])  # a/1's checksum changed: its churn is the scan's
    assert (row["gone_scan_changed"], row["gone_bound"], row["new_candidate"], row["new_back_in"]) == (1, 0, 1, 0)
    (row,) = churn(previous, current, changed_keys=[])  # no scan changed: a bound took q2 and gave q5 a place
    assert (row["gone_scan_changed"], row["gone_bound"], row["new_candidate"], row["new_back_in"]) == (0, 1, 0, 1)


def test_the_report_and_manifest_list_every_verdict_and_the_churn(tmp_path):
    from pipeline.config import Config
    from pipeline.release.build import build_release
    from expectations.release_gate import release_gate

    config = Config(output_root=str(tmp_path / "out"))
    first = build_release(config, tables=_tables(6), gate=release_gate)
    assert previous_release_qa(config.releases_root)[0] == first.release.version
    reviews = tmp_path / "out" / "reviews"
    reviews.mkdir()
    (reviews / "verdicts.csv").write_text(
        HEADER + "q1,reject,<b>answer</b> is wrong,ann\nq2,accept,,bob\nnot-an-id,reject,,bob\n"
    )
    second = build_release(config, tables=_tables(8), gate=release_gate)
    manifest = json.loads((second.release.path / "manifest.json").read_text())
    assert [v["qa_id"] for v in manifest["checks"]["verdicts_applied"]] == ["q1", "q2"]
    assert manifest["checks"]["verdicts_not_applied"] == [
        {"qa_id": "not-an-id", "verdict": "reject", "reviewer": "bob", "note": "", "reason": NOT_GENERATED}
    ]
    html = second.report.read_text()
    assert "3 verdicts: 2 applied (1 rejected question left out of this release, 1 accepted question kept" in html
    assert "&lt;b&gt;answer&lt;/b&gt; is wrong" in html and "<b>answer</b>" not in html
    assert f"Compared with the previous release {first.release.version}" in html
    # q0..q5 before; now q0, q2..q7 (q1 rejected): 5 kept, 2 new, 1 gone from a scan still released.
    assert "of the previous 6 questions 5 kept and 1 gone (1 of them from scans this release still has); 2 new" in html
    assert "Gone by cause: rejected by a reviewer 1;" in html
    churned = manifest["checks"]["churn"]
    assert churned["previous_release"] == first.release.version
    assert churned["totals"]["gone_rejected"] == 1 and churned["totals"]["kept"] == 5
