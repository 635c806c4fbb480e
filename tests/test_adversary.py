"""The learned blind adversary finds planted leaks, scores shuffled answers at chance, and is deterministic."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.scoring.adversary import AdversaryGroup, adversary_scores
from pipeline.scoring.adversary_features import SceneContext, question_categories, with_mentions

NAMES = ["sofa", "chair", "table", "lamp", "bed", "tv", "desk", "sink", "stove", "shelf", "toilet", "door"]
FARTHEST = "Measuring from the closest point of each object, which of these objects ({}) is the farthest from the {}?"


def _row(i, scene, qtype, question, options, truth):
    return {
        "id": f"q{i:05d}", "key": f"scannet/scene{scene:04d}", "profile": "revsi", "budget": "all",
        "video_kind": "real", "question_type": qtype, "question": question, "options": options, "ground_truth": truth,
    }


def _choices(leak: bool, scenes: int = 80, per_scene: int = 6, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for scene in range(scenes):
        for _ in range(per_scene):
            picked = list(rng.choice(NAMES, size=5, replace=False))
            anchor, texts = picked[0], picked[1:]
            correct = texts.index("sofa") if leak and "sofa" in texts else int(rng.integers(4))
            options = [f"{'ABCD'[k]}. {t}" for k, t in enumerate(texts)]
            rows.append(_row(len(rows), scene, "object_rel_distance_farthest", FARTHEST.format(", ".join(texts), anchor),
                             options, "ABCD"[correct]))
    return pl.DataFrame(rows)


def test_categories_are_the_words_outside_the_template():
    found = question_categories([FARTHEST.format("tv, sofa, trash can, lamp", "bed"), FARTHEST.format("a, b, c, d", "e")])
    assert found[0] == ["tv", "sofa", "trash can", "lamp", "bed"]


def test_a_category_that_is_always_the_answer_is_found():
    scores = adversary_scores(_choices(leak=True))
    found = scores[("revsi", "all", "real", "object_rel_distance_farthest")]
    # "sofa" is offered in a third of the questions and always right there: far above 25% chance
    assert found["category_prior"] > 0.45
    assert found["adversary"] > 0.45
    assert found["adversary_context"] > 0.45


def test_shuffled_answers_score_at_chance():
    found = adversary_scores(_choices(leak=False))[("revsi", "all", "real", "object_rel_distance_farthest")]
    for variant, score in found.items():
        assert abs(score - 0.25) < 0.07, (variant, score)


def _rooms(scenes: int = 120, seed: int = 2) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for scene in range(scenes):
        others = int(rng.integers(1, 9))
        for _ in range(others):
            name = str(rng.choice(NAMES))
            rows.append(_row(len(rows), scene, "object_counting_single", f"How many {name}(s) are in the scene?", [], "2"))
        rows.append(_row(len(rows), scene, "room_size_estimation_single", "What is the size of the main room (in square meters)?",
                         [], f"{10.0 * (others + 1):g}"))
    return pl.DataFrame(rows)


def test_a_number_given_by_the_scene_s_question_count_is_found_with_context_only():
    found = adversary_scores(_rooms())[("revsi", "all", "real", "room_size_estimation_single")]
    assert found["adversary_context"] > 0.8
    assert found["adversary"] < 0.5


def test_held_out_answers_are_identical_on_a_second_run():
    qa = with_mentions(_choices(leak=True))
    part = qa.filter(pl.col("question_type") == "object_rel_distance_farthest")
    first = AdversaryGroup(part, SceneContext(qa), seed=3).held_out()
    second = AdversaryGroup(part, SceneContext(qa), seed=3).held_out()
    for variant in first:
        for a, b in zip(first[variant], second[variant]):
            assert np.array_equal(a, b, equal_nan=True)


def test_no_scene_is_in_two_folds():
    qa = with_mentions(_choices(leak=False))
    group = AdversaryGroup(qa, SceneContext(qa))
    folds = pl.DataFrame({"key": qa["key"], "fold": group.fold}).group_by("key").agg(pl.col("fold").n_unique())
    assert folds["fold"].max() == 1


def test_stats_carry_the_three_held_out_scores():
    from pipeline.qa.stats import compute_stats, format_text

    stats = compute_stats(_choices(leak=True))
    entry = stats["types"][0]
    assert entry["category_prior"] > 0.45 and entry["adversary"] is not None and entry["adversary_context"] is not None
    assert stats["tasks"][0]["adversary_context"] == entry["adversary_context"]
    assert "advctx" in format_text(stats)
