"""Each expectation blocks the table it guards when that table is broken its way."""

from __future__ import annotations

import json

import polars as pl
import pytest

from expectations.runner import run_gate
from pipeline import schemas


def _tables(n_questions: int = 8) -> dict[str, pl.DataFrame]:
    key = "synthetic/synth0000_00"
    scans = schemas.from_rows(
        "scans",
        [{"key": key, "dataset": "synthetic", "scene_id": "synth0000_00", "source_uri": "x", "checksum": "c",
          "frame_count": 10, "warnings": []}],
    )
    objects = schemas.from_rows(
        "objects",
        [
            {"key": key, "object_id": i, "raw_label": lab, "category": lab, "center": [i, 0.0, 0.5],
             "extent": [0.5, 0.5, 1.0], "rotation": [1, 0, 0, 0, 1, 0, 0, 0, 1], "vertical_axis": 2,
             "structural": False, "small_object": False, "box_source": "mesh"}
            for i, lab in enumerate(["chair", "table", "sofa", "tv", "bed"])
        ],
    )
    vis = schemas.from_rows(
        "object_visibility",
        [{"key": key, "budget": b, "object_id": i, "max_fraction": 0.2, "max_pixels": 1000, "frames_visible": 3,
          "visible": i != 4, "rule": "fraction", "best_frame": 1}
         for b in ("16", "all") for i in range(5)],
    )
    letters = "ABCD"
    qa = schemas.from_rows(
        "qa",
        [
            {"id": f"q{i}", "key": key, "dataset": "synthetic", "scene_id": "synth0000_00", "profile": "revsi",
             "budget": "all", "question_type": "object_rel_distance_closest", "template": "t",
             "question": f"question {i}", "options": ["A. chair", "B. table", "C. sofa", "D. tv"],
             "ground_truth": letters[i % 4], "used_obj_ids": [0, 1, 2, 3], "video": "v.mp4", "video_kind": "real",
             "geometry": json.dumps({"d": 1.0})}
            for i in range(n_questions)
        ],
    )
    return {"scans": scans, "objects": objects, "object_visibility": vis, "qa": qa}


@pytest.fixture(scope="module")
def clean_report():
    return run_gate(_tables())


def test_clean_tables_pass(clean_report):
    assert clean_report.success, clean_report.summary()


def _failed(tables, **kwargs):
    report = run_gate(tables, **kwargs)
    assert not report.success
    return {r.name: r for r in report.failures}


def test_duplicated_id_blocks():
    t = _tables()
    t["qa"] = pl.concat([t["qa"], t["qa"].head(1)])
    failed = _failed(t)
    assert "qa.id_unique" in failed
    assert failed["qa.id_unique"].failing_rows[:1] == ["q0"]


def test_answer_letter_not_among_options_blocks():
    t = _tables()
    t["qa"] = t["qa"].with_columns(pl.when(pl.col("id") == "q2").then(pl.lit("E")).otherwise(pl.col("ground_truth")).alias("ground_truth"))
    failed = _failed(t)
    assert failed["qa.answer_in_options"].failing_rows == ["q2"]


def test_invisible_used_object_blocks():
    t = _tables()
    t["qa"] = t["qa"].with_columns(
        pl.when(pl.col("id") == "q1").then(pl.lit([0, 4])).otherwise(pl.col("used_obj_ids")).alias("used_obj_ids")
    )
    failed = _failed(t)
    assert failed["qa.answerable"].failing_rows == ["q1"]


def test_unknown_object_blocks():
    t = _tables()
    t["qa"] = t["qa"].with_columns(
        pl.when(pl.col("id") == "q3").then(pl.lit([99])).otherwise(pl.col("used_obj_ids")).alias("used_obj_ids")
    )
    assert "qa.used_objects_exist" in _failed(t)


def test_skewed_answer_distribution_blocks():
    t = _tables(n_questions=60)
    t["qa"] = t["qa"].with_columns(pl.lit("A").alias("ground_truth"))
    failed = _failed(t, min_questions_for_distribution=40)
    assert "qa_distribution.letter_deviation_range" in failed
    assert "qa_distribution.frequency_baseline_range" in failed


def test_fraction_out_of_range_blocks():
    t = _tables()
    t["object_visibility"] = t["object_visibility"].with_columns(pl.lit(1.5).alias("max_fraction"))
    assert "object_visibility.max_fraction_range" in _failed(t)


def test_data_docs_written(tmp_path):
    report = run_gate(_tables(), docs_dir=str(tmp_path / "docs"))
    assert (tmp_path / "docs" / "index.html").exists()
    assert report.data_docs.endswith("index.html")
