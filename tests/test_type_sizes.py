"""Question types stay large enough to rank models (issue 37 item 4).

On VSI-Bench's 288 scenes the revsi profile must give at least 100 questions of absolute distance, both
counting types and closest distance, each within its bias bound. Object size cannot: its candidates'
answers crowd around 1 m and the linear-programming relaxation (an upper bound for any subset) allows
fewer than 100 under the 17.4% ceiling however the candidates are chosen, so the test pins that
limit instead, and that the selection meets the ceiling.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.qa import generate_from_annotations
from pipeline.qa.constant_bound import lp_upper_bound
from pipeline.qa.distribution import control_group, row_classes
from pipeline.qa.profiles import load_profile
from pipeline.scoring.best_constant import best_constant_score

LARGE_TYPES = ("object_abs_distance", "object_counting_single", "object_counting_multiple", "object_rel_distance_closest")


def _abs_distance_group(values: list[float]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "id": [f"q{i:04d}" for i in range(len(values))],
            "key": [f"scannet/scene{i % 40:04d}_00" for i in range(len(values))],
            "profile": "revsi",
            "budget": "all",
            "video_kind": "real",
            "question_type": "object_abs_distance",
            "question": [f"distance {i}" for i in range(len(values))],
            "answer_value": values,
            "options": [[] for _ in values],
            "geometry": ["{}" for _ in values],
            "used_obj_ids": [[2 * i, 2 * i + 1] for i in range(len(values))],
            "ground_truth": [str(v) for v in values],
            "template": "t",
            "dataset": "scannet",
            "video": "v.mp4",
        }
    )
    return schemas.from_rows("qa", frame.with_columns(pl.col("key").str.split("/").list.get(1).alias("scene_id")).to_dicts())


def test_abs_distance_keeps_a_spread_set_whole_when_one_bin_holds_a_sixth():
    """The ceiling, not the share cap, decides: a set under 40.1% whose densest 25% bin holds 17-20% stays whole.

    The older 15% share cap cut such sets (on the 288 VSI-Bench scenes: 389 of 491 kept where the ceiling
    allows 436)."""
    gen = np.random.default_rng(3)
    spread = np.round(np.exp(gen.uniform(np.log(1.0), np.log(12.0), size=200)), 1)
    bunched = np.round(gen.uniform(2.0, 2.4, size=22), 1)
    values = np.concatenate([spread, bunched]).tolist()
    part = _abs_distance_group(values)
    prof = load_profile("revsi")
    densest = part.with_columns(row_classes(part, prof))["_class"].value_counts()["count"].max() / part.height
    assert 0.17 < densest <= 0.2 and best_constant_score(values) <= 0.401
    keep, _ = control_group(part, prof.task("object_abs_distance"), seed=0)
    assert keep.all()


@pytest.mark.slow  # 288 scenes through the whole generator: about a minute on 2 shared cores
def test_revsi_types_are_large_on_the_288_vsibench_scenes(fixtures_dir):
    prof = load_profile("revsi")
    qa = generate_from_annotations(fixtures_dir / "vsibench", prof, seed=0).filter(pl.col("video_kind") == "real")
    counts = dict(qa.group_by("question_type").len().iter_rows())
    for question_type in LARGE_TYPES:
        assert counts[question_type] >= 100, (question_type, counts[question_type])
    sizes = qa.filter(pl.col("question_type") == "object_size_estimation")["answer_value"].to_list()
    assert best_constant_score(sizes) <= 0.174 + 1e-12
    assert best_constant_score(qa.filter(pl.col("question_type") == "object_abs_distance")["answer_value"].to_list()) <= 0.401 + 1e-12


@pytest.mark.slow
def test_no_size_selection_of_the_288_scenes_reaches_100_under_the_ceiling(fixtures_dir):
    """Every unique, not excluded object of the 288 scenes, before Table 11's subsampling: the bound is about 61."""
    from pipeline.qa.from_annotations import candidates_from_annotations

    prof = load_profile("revsi")
    candidates = candidates_from_annotations(fixtures_dir / "vsibench", prof, seed=0)
    sizes = candidates.filter((pl.col("question_type") == "object_size_estimation") & (pl.col("video_kind") == "real"))
    assert sizes.height > 500
    assert lp_upper_bound(sizes["answer_value"].to_list(), 0.174) < 100
