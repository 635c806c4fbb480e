"""Questions a reviewer accepted are pinned: no dataset-wide step drops them while their scan is built.

The answer-distribution control is dataset-wide, so adding a scan changes which questions of the other
scans fill each answer class; without pins an accepted question can vanish from the next release. These
use the same synthetic scenes as test_qa_finalize.py.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from pipeline.qa import finalize_qa, generate_candidates
from pipeline.qa.distribution import _classes, _water_fill, control_group
from pipeline.qa.filters import apply_caps, apply_keep_rules
from pipeline.qa.finalize import finalize_qa_parts
from pipeline.qa.profiles import load_profile
from pipeline.release.churn import churn, churn_totals
from pipeline.storage import parquet_bytes
from tests.test_qa_finalize import _parts
from tests.test_qa_generation import BUDGETS, build_scene

SEED = 5


@pytest.fixture(scope="module")
def candidates():
    frames = []
    for scene_seed in range(10, 16):
        key, objects, rooms, vis, samples, dummy = build_scene(scene_seed)
        for b in BUDGETS:
            frames.append(generate_candidates(objects, rooms, vis, samples, dummy, key=key, budget=b, profile="revsi", config=0))
    return pl.concat(frames)


@pytest.fixture(scope="module")
def unpinned(candidates):
    drops: list[pl.DataFrame] = []
    qa = finalize_qa(candidates, profile="revsi", seed=SEED, drops=drops)
    return qa, pl.concat(drops)


def test_an_accepted_question_the_control_would_drop_is_kept(candidates, unpinned):
    qa, dropped = unpinned
    # One dropped question of every controlled type: the control would leave each of them out.
    accepted = set(dropped.sort("id").unique(subset="question_type", keep="first", maintain_order=True)["id"].to_list())
    assert len(accepted) >= 5
    drops: list[pl.DataFrame] = []
    pinned = finalize_qa(candidates, profile="revsi", seed=SEED, drops=drops, pinned=accepted)
    assert accepted <= set(pinned["id"].to_list())
    assert not accepted & set(pl.concat(drops)["id"].to_list())  # the record lists only what was dropped
    # Deterministic: the same candidates in another order and the same pins give the same bytes.
    again = finalize_qa(candidates.reverse(), profile="revsi", seed=SEED, pinned=sorted(accepted))
    assert parquet_bytes("qa", again) == parquet_bytes("qa", pinned)
    # Pins take their class's places first: each pinned type keeps as many questions as it did, or one more
    # only where its class had no place to give (the pins never push a type far past the control's bounds).
    before = qa.filter(pl.col("video_kind") == "real").group_by("budget", "question_type").len()
    after = pinned.filter(pl.col("video_kind") == "real").group_by("budget", "question_type").len()
    grown = before.join(after, on=["budget", "question_type"], suffix="_pinned")
    # (signed: a pin the blind guesser answers can cost its type one other question; u32 would wrap)
    assert (grown["len_pinned"].cast(pl.Int64) - grown["len"].cast(pl.Int64)).max() <= 1


def test_with_no_pins_or_pins_on_the_survivors_the_table_is_unchanged(candidates, unpinned):
    qa, dropped = unpinned
    expected = parquet_bytes("qa", qa)
    assert parquet_bytes("qa", finalize_qa(candidates, profile="revsi", seed=SEED, pinned=set())) == expected
    drops: list[pl.DataFrame] = []
    survivors = finalize_qa(candidates, profile="revsi", seed=SEED, drops=drops, pinned=set(qa["id"].to_list()))
    assert parquet_bytes("qa", survivors) == expected
    assert parquet_bytes("qa_distribution_drops", pl.concat(drops)) == parquet_bytes("qa_distribution_drops", dropped)


def test_adding_a_scan_never_drops_an_accepted_question(candidates):
    """The churn the issue measured: one more scan swaps questions of the others, unless they are accepted."""
    keys = sorted(set(candidates["key"].to_list()))
    first = finalize_qa(candidates.filter(pl.col("key") != keys[-1]), profile="revsi", seed=SEED)
    unpinned = finalize_qa(candidates, profile="revsi", seed=SEED)
    assert churn_totals(churn(first, unpinned))["gone_in_released_scans"] > 0  # the premise: the control swaps
    pinned = finalize_qa(candidates, profile="revsi", seed=SEED, pinned=set(first["id"].to_list()))
    totals = churn_totals(churn(first, pinned))
    assert totals["gone"] == 0 and totals["kept"] == first.height
    assert totals["new"] == pinned.height - first.height


def test_batches_of_scans_honour_pins_like_the_whole_table(tmp_path, candidates, unpinned):
    accepted = set(unpinned[1]["id"].head(40).to_list())
    parts = _parts(tmp_path, candidates)
    (batched,) = finalize_qa_parts(parts, profiles=["revsi"], seed=SEED, files_per_batch=2, pinned=accepted)
    whole = finalize_qa(parts.read(), profile="revsi", seed=SEED, pinned=accepted)
    assert parquet_bytes("qa", batched) == parquet_bytes("qa", whole)
    assert accepted <= set(batched["id"].to_list())


def test_a_pinned_dummy_question_holds_its_real_counterpart(candidates, unpinned):
    qa, _ = unpinned
    kept = set(qa["id"].to_list())
    dummies = candidates.filter((pl.col("video_kind") != "real") & ~pl.col("id").is_in(sorted(kept)))
    lost = [
        (row["id"], json.loads(row["geometry"])["real_id"]) for row in dummies.iter_rows(named=True)
        if json.loads(row["geometry"])["real_id"] not in kept
    ]
    assert lost
    dummy_id, real_id = sorted(lost)[0]
    pinned = set(finalize_qa(candidates, profile="revsi", seed=SEED, pinned={dummy_id})["id"].to_list())
    assert {dummy_id, real_id} <= pinned


def _group(counts: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"id": f"c{i:02d}", "options": [], "geometry": "{}", "answer_value": float(c), "ground_truth": str(c)}
         for i, c in enumerate(counts)],
        schema={"id": pl.String, "options": pl.List(pl.String), "geometry": pl.String, "answer_value": pl.Float64,
                "ground_truth": pl.String},
    )


def test_pins_fill_their_class_budget_first():
    rule = load_profile("revsi").task("object_counting_single")
    part = _group([2] * 30 + [1] * 5 + [3] * 5 + [4] * 5 + [5] * 5 + [7] * 5)
    classes = _classes(part, float(rule.balance.get("bin_width", 0.1)))
    keep, _ = control_group(part, rule, seed=0)
    twos = np.array([c == classes[0] for c in classes])
    dropped_twos = np.flatnonzero(twos & ~keep)
    assert dropped_twos.size >= 3
    pins = np.zeros(part.height, dtype=bool)
    pins[dropped_twos[:3]] = True
    pinned_keep, _ = control_group(part, rule, seed=0, pinned=pins)
    assert pinned_keep[pins].all()
    # The class keeps as many as before: the pins took the places of three unpinned members.
    assert (pinned_keep & twos).sum() == (keep & twos).sum()
    assert (pinned_keep & ~twos).sum() == (keep & ~twos).sum()
    assert list(control_group(part, rule, seed=0, pinned=pins)[0]) == list(pinned_keep)


def test_a_class_pinned_past_the_cap_lets_the_others_keep_more():
    sizes = [20, 20, 2, 2, 2]
    assert _water_fill(sizes, 0.4) == 12  # 12 <= 0.4 * (12 + 12 + 6)
    # 16 pinned in the first class: the second may keep 14 (14 <= 0.4 * (16 + 14 + 6)), so the first holds
    # 16 / 36 = 44% of the type, not the 16 / 34 = 47% the unpinned cap would leave.
    assert _water_fill(sizes, 0.4, [16, 0, 0, 0, 0]) == 14
    assert _water_fill(sizes, 0.4, [5, 3, 1, 0, 0]) == 12  # pins under the cap change nothing


def test_caps_and_subsampling_keep_pinned_questions(candidates):
    revsi = load_profile("revsi")
    qa = candidates.filter(pl.col("profile") == "revsi")
    sampled = apply_keep_rules(qa, revsi, SEED)
    lost_to_draws = sorted(set(qa["id"].to_list()) - set(sampled["id"].to_list()))
    by_draw = [
        qid for qid, row in zip(qa["id"].to_list(), qa.iter_rows(named=True))
        if qid in set(lost_to_draws)
        and 0.0 < _probability(revsi, row) < 1.0
    ]
    excluded = [qid for qid in lost_to_draws if qid not in set(by_draw)]
    assert by_draw and excluded
    kept = set(apply_keep_rules(qa, revsi, SEED, pinned={by_draw[0], excluded[0]})["id"].to_list())
    assert by_draw[0] in kept  # a pin holds against chance
    assert excluded[0] not in kept  # not against the profile (an excluded name, a zero rate)

    capped = apply_caps(sampled, revsi, SEED)
    over_cap = sorted(set(sampled["id"].to_list()) - set(capped["id"].to_list()))
    assert over_cap
    pinned = apply_caps(sampled, revsi, SEED, pinned={over_cap[0]})
    assert over_cap[0] in set(pinned["id"].to_list())
    assert pinned.height == capped.height  # it took another question's place under the cap


def _probability(profile, row) -> float:
    from pipeline.qa.filters import keep_probability

    if row["video_kind"] != "real":
        return 1.0
    return keep_probability(profile.task(row["question_type"]), json.loads(row["geometry"]), row["answer_value"])
