"""The release warns when a pruned type's learned blind adversary is still over its bound, and only then.

Pruning stops at a type's floor (the size whose 95% interval is 20 points wide) and cannot touch a type smaller
than that, so a release can hold a type a text-only model passes; the manifest has the figures, and the release's
``blind_adversary_within_bounds`` check names each such type instead of a green asset.
"""

from __future__ import annotations

from assets.release import ADVERSARY_CHECK, _pruned_settings, adversary_within_bounds
from pipeline.qa.bias_pruning import adversary_overruns


def _row(profile, question_type, *, questions=100, random=None, best_constant=None, **scores):
    row = {"profile": profile, "budget": "all", "video_kind": "real", "question_type": question_type,
           "questions": questions, "random": random, "best_constant": best_constant}
    return row | {"adversary": 0.0, "adversary_context": 0.0, "category_prior": 0.0} | scores


def test_types_over_their_bound_are_named_and_the_rest_pass():
    baselines = [
        _row("revsi", "object_rel_distance_farthest", random=0.25, adversary_context=0.31),   # bound 30
        _row("revsi", "object_rel_distance_closest", random=0.25, adversary=0.29),            # within
        _row("revsi", "room_size_estimation_multiple", best_constant=0.2, category_prior=0.25),  # bound 20.9
        _row("pinpointqa", "presence", random=0.5, adversary=0.56),                            # bound 55
        _row("vsibench", "object_rel_distance", random=0.25, adversary=0.5),                   # not pruned
    ]
    lines = adversary_overruns(baselines, _pruned_settings)
    assert [line.split(" (")[0] for line in lines] == [
        "revsi all object_rel_distance_farthest", "revsi all room_size_estimation_multiple", "pinpointqa all presence",
    ]
    assert "adversary_context 31.0 over 30.0" in lines[0] and "category_prior 25.0 over 20.9" in lines[1]
    check = adversary_within_bounds(baselines)
    assert check.check_name == ADVERSARY_CHECK and not check.passed


def test_a_release_within_every_bound_passes():
    baselines = [_row("revsi", "object_rel_distance_farthest", random=0.25, adversary=0.2),
                 _row("revsi", "object_abs_distance", best_constant=0.3, adversary=0.4)]
    assert adversary_overruns(baselines, _pruned_settings) == []
    assert adversary_within_bounds(baselines).passed


def test_the_manifest_baselines_carry_chance_so_a_choice_bound_is_chance_plus_five_points():
    """``baseline_rows`` (what the manifest's ``checks.baselines`` holds) gave no ``random``: every choice type was
    held to 5% and named over its bound."""
    from pipeline.qa.stats import baseline_rows
    from tests.test_adversary import _choices

    rows = baseline_rows(_choices(leak=False, scenes=12))
    assert rows and all(abs(row["random"] - 0.25) < 1e-9 for row in rows)
