"""The ``dummy_videos`` and ``qa_distribution_drops`` suites (issue 28.3): both tables are released, so both have
an expectation suite, decided in polars by their asset checks and by Great Expectations in the release gate."""

from __future__ import annotations

import polars as pl
import pytest

from expectations.runner import decide_suites, run_gate
from pipeline import schemas
from tests.test_quality_gate import BUDGETS, _tables

KEY = "synthetic/synth0000_00"
BLACK = "videos/dummy/black/d-black.mp4"
DROPPED = "videos/dummy/query_drop/d-drop.mp4"


def _record_tables() -> dict[str, pl.DataFrame]:
    """The quality gate's clean tables with a black and a query-drop video and one question the control dropped."""
    tables = _tables()
    tables["dummy_videos"] = schemas.from_rows(
        "dummy_videos",
        [
            {"key": KEY, "video_id": "d-black", "kind": "black", "object_ids": [0], "frame_indices": [-1] * 16,
             "path": BLACK},
            {"key": KEY, "video_id": "d-black", "kind": "black", "object_ids": [1, 2], "frame_indices": [-1] * 16,
             "path": BLACK},  # one black video serves every object set
            {"key": KEY, "video_id": "d-drop", "kind": "query_drop", "object_ids": [2, 1],
             "frame_indices": list(range(16)), "path": DROPPED},
            {"key": KEY, "video_id": "d-first", "kind": "first_frame", "object_ids": [3], "frame_indices": [4] * 16,
             "path": "videos/dummy/first_frame/d-first.mp4"},
        ],
    )
    tables["qa_distribution_drops"] = schemas.from_rows(
        "qa_distribution_drops",
        [{"id": f"gone{i}", "key": KEY, "profile": "revsi", "budget": "all", "video_kind": "real",
          "question_type": "object_rel_distance_closest", "answer": "chair", "answer_class": "chair",
          "reason": "answer class over 40% of its type"} for i in range(2)],
    )
    return tables


def _where(table: str, column: str, value, row: int = 0):
    def mutate(t):
        df = t[table].with_row_index("_row")
        t[table] = df.with_columns(
            pl.when(pl.col("_row") == row).then(pl.lit(value, dtype=df.schema[column])).otherwise(pl.col(column))
            .alias(column)
        ).drop("_row")
    return mutate


def _append(table: str, rows: dict):
    def mutate(t):
        t[table] = pl.concat([t[table], schemas.from_rows(table, [t[table].row(0, named=True) | rows])])
    return mutate


BREAKAGES = {
    "dummy_videos.schema": lambda t: t.__setitem__(
        "dummy_videos", t["dummy_videos"].with_columns(pl.lit(1).alias("extra"))),
    "dummy_videos.kind_in_set": _where("dummy_videos", "kind", "grey", row=3),
    "dummy_videos.video_id_not_null": _where("dummy_videos", "video_id", None, row=3),
    # The same object set (in another order) given a second query-drop video.
    "dummy_videos.key_kind_object_set_unique": _append("dummy_videos", {"kind": "query_drop", "object_ids": [1, 2],
                                                                          "video_id": "d-other", "frame_indices": list(range(16)),
                                                                          "path": "videos/dummy/query_drop/d-other.mp4"}),
    "dummy_videos.scan_exists": _append("dummy_videos", {"key": "synthetic/elsewhere"}),
    "dummy_videos.objects_exist": _where("dummy_videos", "object_ids", [0, 99], row=0),
    "dummy_videos.frames_match_kind": _where("dummy_videos", "frame_indices", [-1] * 15 + [3], row=1),
    "dummy_videos.path_names_video": _where("dummy_videos", "path", "videos/dummy/black/other.mp4", row=0),
    "qa_distribution_drops.schema": lambda t: t.__setitem__(
        "qa_distribution_drops", t["qa_distribution_drops"].with_columns(pl.lit(1).alias("extra"))),
    "qa_distribution_drops.id_unique": _where("qa_distribution_drops", "id", "gone0", row=1),
    "qa_distribution_drops.reason_not_null": _where("qa_distribution_drops", "reason", None, row=1),
    "qa_distribution_drops.profile_in_set": _where("qa_distribution_drops", "profile", "mystery", row=0),
    "qa_distribution_drops.budget_in_set": _where("qa_distribution_drops", "budget", "8", row=0),
    "qa_distribution_drops.video_kind_in_set": _where("qa_distribution_drops", "video_kind", "webcam", row=0),
    "qa_distribution_drops.scan_exists": _where("qa_distribution_drops", "key", "synthetic/elsewhere", row=0),
    "qa_distribution_drops.not_released": _where("qa_distribution_drops", "id", "q3", row=0),
}


@pytest.fixture(scope="module")
def clean_gate():
    return run_gate(_record_tables(), budgets=BUDGETS)


def test_the_gate_validates_both_tables_and_they_pass_clean(clean_gate):
    assert clean_gate.success, clean_gate.summary()
    validated = {v.suite for v in clean_gate.validations}
    assert {"dummy_videos", "qa_distribution_drops"} <= validated
    names = {r.name for r in clean_gate.results}
    assert set(BREAKAGES) <= names


def test_a_black_video_must_be_black_and_a_first_frame_video_one_frame():
    tables = _record_tables()
    _where("dummy_videos", "frame_indices", [4] * 15 + [5], row=3)(tables)  # first_frame showing two frames
    _where("dummy_videos", "frame_indices", [0] * 16, row=0)(tables)  # black showing a source frame
    _where("dummy_videos", "frame_indices", [-1, *range(15)], row=2)(tables)  # query_drop with a black frame
    report = decide_suites(tables, ["dummy_videos"], budgets=BUDGETS)
    [failed] = report.failures
    assert failed.name == "dummy_videos.frames_match_kind" and failed.unexpected_count == 3


@pytest.mark.parametrize("rule", sorted(BREAKAGES))
def test_each_breakage_fails_its_rule_in_the_gate_and_in_the_asset_check(rule):
    tables = _record_tables()
    BREAKAGES[rule](tables)
    table = rule.split(".", 1)[0]
    checked = decide_suites(tables, [table], budgets=BUDGETS)  # the asset check's path: polars only
    assert rule in {r.name for r in checked.failures}, checked.summary()
    gate = run_gate(tables, budgets=BUDGETS)  # the release's path: Great Expectations agrees rule by rule, or raises
    assert rule in {r.name for r in gate.failures}, gate.summary()
    assert {r.name for r in gate.failures if r.table == table} == {r.name for r in checked.failures}


@pytest.mark.parametrize("rule", ["dummy_videos.frames_match_kind", "qa_distribution_drops.not_released"])
def test_a_broken_record_blocks_the_release(rule, tmp_path):
    from pipeline.config import Config
    from pipeline.release.build import ReleaseBlocked, build_release
    from expectations.release_gate import release_gate

    out = tmp_path / "out"
    tables = _record_tables()
    tables["qa"] = pl.concat([tables["qa"], tables["qa"].head(1).with_columns(
        pl.lit("q-black").alias("id"), pl.lit("black").alias("video_kind"), pl.lit(BLACK).alias("video"))])
    BREAKAGES[rule](tables)
    for rel in ("v.mp4", BLACK):  # the release ships only dummy rows whose video a question plays
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"stand-in video")
    with pytest.raises(ReleaseBlocked) as blocked:
        build_release(Config(output_root=str(out)), tables=tables, gate=release_gate)
    assert rule in str(blocked.value)
    assert not (out / "releases" / "LATEST").exists()


def test_every_released_table_has_a_suite():
    """README: every released table has an expectation suite (DESIGN: ``RELEASED_TABLES``)."""
    from expectations.suites import build_suites
    from pipeline.release.atomic import RELEASED_TABLES

    assert set(RELEASED_TABLES) <= {suite.table for suite in build_suites(budgets=BUDGETS)}
