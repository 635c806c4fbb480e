"""Iterative Bias Pruning holds the learned adversary to its bound, never past the floor, never a pinned question."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.qa.bias_pruning import floor_size, prune_group
from pipeline.scoring.adversary import AdversaryGroup, group_score
from pipeline.scoring.adversary_features import SceneContext, with_mentions
from tests.test_adversary import _choices


def _group(leak=True, scenes=80):
    qa = with_mentions(_choices(leak=leak, scenes=scenes))
    return qa, SceneContext(qa)


def test_pruning_brings_every_variant_within_chance_plus_five_points():
    qa, context = _group()
    keep, reasons, summary = prune_group(qa, context, {}, seed=0)
    assert summary["before"]["category_prior"] > 0.40
    assert summary["met"] and summary["rounds"] >= 1
    after = group_score(AdversaryGroup(qa, context, 0).held_out(keep))
    assert all(score <= 0.30 + 1e-12 for score in after.values()), after
    assert set(reasons[~keep]) <= {f"the learned blind adversary answered it (round {r})" for r in range(1, summary["rounds"] + 1)}
    assert keep.sum() >= floor_size("mcq", 0.25)
    # answers never change: pruning only removes rows
    assert qa.filter(pl.Series(keep))["ground_truth"].to_list() == [g for g, k in zip(qa["ground_truth"].to_list(), keep) if k]


def test_pruning_is_deterministic_and_keeps_pinned_questions():
    qa, context = _group()
    pinned = np.zeros(qa.height, dtype=bool)
    sofa_right = [("sofa" in [o[3:] for o in opts]) for opts in qa["options"].to_list()]
    pinned[np.flatnonzero(sofa_right)[:10]] = True
    first = prune_group(qa, context, {}, seed=0, pinned=pinned)
    second = prune_group(qa, context, {}, seed=0, pinned=pinned)
    assert np.array_equal(first[0], second[0]) and list(first[1]) == list(second[1])
    assert first[0][pinned].all()


def test_a_small_type_is_never_cut_below_its_floor():
    qa, context = _group(scenes=15)  # 90 questions, floor 73 at chance 25%
    keep, reasons, summary = prune_group(qa, context, {}, seed=0)
    assert keep.sum() >= floor_size("mcq", 0.25)
    assert not summary["met"]
    assert any("was not met" in r for r in reasons[~keep])


def test_an_unleaky_type_loses_nothing():
    qa, context = _group(leak=False)
    keep, _, summary = prune_group(qa, context, {}, seed=0)
    assert keep.all() and summary["rounds"] == 0


def test_a_presence_table_is_pruned_to_55_percent_with_its_drops_recorded():
    from pipeline.qa.bias_pruning import prune_table

    qa = _leaky_presence(seed=4)
    kept, drops = prune_table(qa, seed=0)
    assert 0 < drops.height < qa.height and set(drops["id"]) == set(qa["id"]) - set(kept["id"])
    assert drops["reason"].str.starts_with("the learned blind adversary answered it").all()
    scores = group_score(AdversaryGroup(with_mentions(kept), SceneContext(with_mentions(kept)), 0).held_out())
    assert max(scores.values()) <= 0.55 + 0.03  # refitted on the kept table: its own folds, near the bound


def test_a_pinpoint_table_pruned_twice_drops_the_same_rows_and_never_a_pinned_one():
    from pipeline.qa.bias_pruning import prune_table

    qa = _leaky_presence(seed=5)
    sofas = frozenset(qa.filter(pl.col("question").str.contains("sofa") & (pl.col("ground_truth") == "Yes"))["id"])
    kept, drops = prune_table(qa, seed=0, pinned=sofas)
    again, drops_again = prune_table(qa, seed=0, pinned=sofas)
    assert drops.height > 0 and kept.equals(again) and drops.equals(drops_again)
    assert sofas <= set(kept["id"])


def _leaky_presence(seed: int) -> pl.DataFrame:
    """60 scenes of 5 presence questions; sofa, chair and table are always "Yes" (a prior a blind model learns)."""
    from tests.test_adversary import NAMES, _row

    rng = np.random.default_rng(seed)
    rows = []
    for scene in range(60):
        for name in rng.choice(NAMES, size=5, replace=False):
            truth = "Yes" if name in ("sofa", "chair", "table") else str(rng.choice(["Yes", "No"]))
            rows.append({**_row(len(rows), scene, "presence", f"Is there a {name} in the scene?", [], truth),
                         "profile": "pinpointqa"})
    return pl.DataFrame(rows)
