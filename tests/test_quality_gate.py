"""Each expectation blocks the table it guards when that table is broken its way."""

from __future__ import annotations

import json

import polars as pl
import pytest

from expectations.runner import run_gate
from pipeline import schemas
from pipeline.config import Config
from pipeline.frames.budgets import frame_budgets

BUDGETS = frame_budgets(Config())  # the default run's budgets, passed as the release passes its own


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
    return run_gate(_tables(), budgets=BUDGETS)


def test_clean_tables_pass(clean_report):
    assert clean_report.success, clean_report.summary()


def _failed(tables, **kwargs):
    report = run_gate(tables, **kwargs, budgets=BUDGETS)
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


def test_vsibench_keeps_its_benchmark_prior_but_not_a_constant_answer():
    """vsibench reproduces VSI-Bench's biases on purpose: 75% (a synthetic scene set's counting prior) passes,
    one answer for a whole type still blocks; revsi, which controls its answers, blocks at the 70% ceiling."""

    def counting(profile: str, counts: list[int]) -> pl.DataFrame:
        return schemas.from_rows(
            "qa",
            [
                {"id": f"{profile}{i}", "key": "synthetic/synth0000_00", "dataset": "synthetic",
                 "scene_id": "synth0000_00", "profile": profile, "budget": "all",
                 "question_type": "object_counting" if profile == "vsibench" else "object_counting_single",
                 "template": "t", "question": f"how many {i}", "options": [], "ground_truth": str(c),
                 "answer_value": float(c), "used_obj_ids": [0], "video": "v.mp4", "video_kind": "real",
                 "geometry": "{}"}
                for i, c in enumerate(counts)
            ],
        )

    skewed = [2] * 45 + [3] * 10 + [5] * 5  # always "2" scores about 79%
    for profile, blocked in (("vsibench", False), ("revsi", True)):
        t = _tables()
        t["qa"] = pl.concat([t["qa"], counting(profile, skewed)])
        report = run_gate(t, min_questions_for_distribution=40, budgets=BUDGETS)
        failed = {r.name for r in report.results if not r.success}
        assert report.success is not blocked and ("qa_distribution.frequency_baseline_range" in failed) is blocked
        assert "qa_distribution.reproduced_frequency_baseline_range" not in failed, profile
    t = _tables()
    t["qa"] = pl.concat([t["qa"], counting("vsibench", [2] * 60)])
    assert "qa_distribution.reproduced_frequency_baseline_range" in _failed(t, min_questions_for_distribution=40)


def test_fraction_out_of_range_blocks():
    t = _tables()
    t["object_visibility"] = t["object_visibility"].with_columns(pl.lit(1.5).alias("max_fraction"))
    assert "object_visibility.max_fraction_range" in _failed(t)


def test_data_docs_written(tmp_path):
    report = run_gate(_tables(), docs_dir=str(tmp_path / "docs"), budgets=BUDGETS)
    assert (tmp_path / "docs" / "index.html").exists()
    assert report.data_docs.endswith("index.html")


def _set(table: str, column: str, value, where_id: str | None = None):
    def mutate(t):
        df = t[table]
        if where_id is None:
            t[table] = df.with_columns(pl.lit(value).alias(column))
        else:
            t[table] = df.with_columns(
                pl.when(pl.col("id") == where_id).then(pl.lit(value)).otherwise(pl.col(column)).alias(column)
            )
    return mutate


def _drop_scan(t):
    t["scans"] = t["scans"].clear()


def _extra_column(t):
    t["qa"] = t["qa"].with_columns(pl.lit(1).alias("unexpected"))


def _duplicate_option(t):
    t["qa"] = t["qa"].with_columns(
        pl.when(pl.col("id") == "q0").then(pl.lit(["A. chair", "B. chair", "C. sofa", "D. tv"])).otherwise(pl.col("options")).alias("options")
    )


def _counting_zero(t):
    t["qa"] = t["qa"].with_columns(
        pl.when(pl.col("id") == "q0").then(pl.lit("object_counting_single")).otherwise(pl.col("question_type")).alias("question_type"),
        pl.when(pl.col("id") == "q0").then(pl.lit([])).otherwise(pl.col("options")).alias("options"),
        pl.when(pl.col("id") == "q0").then(pl.lit("0")).otherwise(pl.col("ground_truth")).alias("ground_truth"),
        pl.when(pl.col("id") == "q0").then(pl.lit(0.0)).otherwise(pl.col("answer_value")).alias("answer_value"),
    )


def _negative_distance(t):
    t["qa"] = t["qa"].with_columns(
        pl.when(pl.col("id") == "q1").then(pl.lit("object_abs_distance")).otherwise(pl.col("question_type")).alias("question_type"),
        pl.when(pl.col("id") == "q1").then(pl.lit([])).otherwise(pl.col("options")).alias("options"),
        pl.when(pl.col("id") == "q1").then(pl.lit("-1.0")).otherwise(pl.col("ground_truth")).alias("ground_truth"),
        pl.when(pl.col("id") == "q1").then(pl.lit(-1.0)).otherwise(pl.col("answer_value")).alias("answer_value"),
    )


def _zero_extent(t):
    t["objects"] = t["objects"].with_columns(pl.lit([0.5, 0.0, 1.0]).alias("extent"))


def _unknown_budget(t):
    t["frame_samples"] = schemas.from_rows(
        "frame_samples", [{"key": "synthetic/synth0000_00", "budget": "8", "rank": 0, "frame_index": 0, "timestamp": 0.0}]
    )


def _bad_relation(t):
    t["pinpoint_neighbors"] = schemas.from_rows(
        "pinpoint_neighbors",
        [{"key": "synthetic/synth0000_00", "target_id": 0, "neighbor_id": 1, "neighbor_label": "table",
          "centroid_distance": 0.5, "shortest_distance": 0.1, "relation": "inside", "contact": False}],
    )


BREAKAGES = {
    "qa.scan_exists": _drop_scan,
    "qa.schema": _extra_column,
    "qa.options_distinct": _duplicate_option,
    "qa.count_in_range": _counting_zero,
    "qa.numeric_positive": _negative_distance,
    "qa.geometry_is_json": _set("qa", "geometry", "{not json", "q2"),
    "qa.video_kind_in_set": _set("qa", "video_kind", "webcam", "q3"),
    "qa.budget_in_set": _set("qa", "budget", "128", "q3"),
    "objects.extent_positive": _zero_extent,
    "frame_samples.budget_in_set": _unknown_budget,
    "pinpoint_neighbors.relation_in_set": _bad_relation,
}


@pytest.mark.parametrize("rule", sorted(BREAKAGES))
def test_each_breakage_blocks_the_release_naming_its_expectation(rule, tmp_path):
    from pipeline.config import Config
    from pipeline.release.build import ReleaseBlocked, build_release
    from expectations.release_gate import release_gate

    tables = _tables()
    BREAKAGES[rule](tables)
    with pytest.raises(ReleaseBlocked) as blocked:
        build_release(Config(output_root=str(tmp_path)), tables=tables, gate=release_gate)
    assert rule in str(blocked.value)
    assert not (tmp_path / "releases" / "LATEST").exists()


def test_missing_values_are_skipped_by_column_rules_as_great_expectations_does():
    t = _tables()
    t["object_visibility"] = t["object_visibility"].with_columns(
        pl.when(pl.col("object_id") == 2).then(float("nan")).otherwise(pl.col("max_fraction")).alias("max_fraction")
    )
    t["qa"] = t["qa"].with_columns(pl.when(pl.col("id") == "q1").then(None).otherwise(pl.col("geometry")).alias("geometry"))
    report = run_gate(t, budgets=BUDGETS)
    assert report.success, report.summary()
    t["qa"] = t["qa"].with_columns(pl.when(pl.col("id") == "q1").then(None).otherwise(pl.col("question")).alias("question"))
    failed = _failed(t)
    assert failed["qa.question_not_null"].failing_rows == ["q1"] and failed["qa.question_not_null"].unexpected_count == 1
