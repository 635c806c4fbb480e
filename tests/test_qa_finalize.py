"""The dataset-wide qa step: keep rules, caps, letter balancing, ids and determinism."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from pipeline.qa import finalize_qa, generate_candidates
from pipeline.qa.filters import keep_probability
from pipeline.qa.ids import question_id
from pipeline.qa.profiles import load_profile
from pipeline.storage import parquet_bytes
from tests.test_qa_generation import BUDGETS, build_scene


@pytest.fixture(scope="module")
def candidates():
    frames = []
    for scene_seed in range(10, 16):
        key, objects, rooms, vis, samples, dummy = build_scene(scene_seed)
        for b in BUDGETS:
            frames.append(generate_candidates(objects, rooms, vis, samples, dummy, key=key, budget=b, profile="revsi", config=0))
    return pl.concat(frames)


def _correct_text(row) -> str:
    if not row["options"]:
        return row["ground_truth"]
    return row["options"]["ABCDEF".index(row["ground_truth"])].split(". ", 1)[1]


def test_same_seed_gives_byte_identical_tables(candidates):
    a = finalize_qa(candidates, profile="revsi", seed=5)
    b = finalize_qa(candidates.reverse(), profile="revsi", seed=5)
    assert parquet_bytes("qa", a) == parquet_bytes("qa", b)


def test_other_seed_changes_subsets_never_answers(candidates):
    a = finalize_qa(candidates, profile="revsi", seed=1)
    b = finalize_qa(candidates, profile="revsi", seed=2)
    assert set(a["id"]) != set(b["id"])
    answers_a = {r["id"]: (_correct_text(r), r["answer_value"], r["question"]) for r in a.iter_rows(named=True)}
    common = 0
    for r in b.iter_rows(named=True):
        if r["id"] in answers_a:
            common += 1
            assert answers_a[r["id"]] == (_correct_text(r), r["answer_value"], r["question"])
    assert common > 0


def test_ids_are_stable_hashes_of_question_identity(candidates):
    row = candidates.row(0, named=True)
    again = question_id(row["key"], row["budget"], row["profile"], row["question_type"], row["video_kind"],
                        row["question"], reversed(row["used_obj_ids"]))
    assert again == row["id"]
    assert candidates["id"].n_unique() == candidates.height


def test_keep_rules_follow_the_profile():
    revsi = load_profile("revsi")
    single = revsi.task("object_counting_single")
    assert keep_probability(single, {"names": ["chair"]}, 1.0) == pytest.approx(0.4)
    assert keep_probability(single, {"names": ["chair"]}, 2.0) == pytest.approx(0.05)
    assert keep_probability(single, {"names": ["chair"]}, 3.0) == 1.0
    assert keep_probability(single, {"names": ["sofa"]}, 2.0) == 1.0
    assert keep_probability(single, {"names": ["Window"]}, 3.0) == 0.0
    multiple = revsi.task("object_counting_multiple")
    assert keep_probability(multiple, {"names": ["chair", "pillow"]}, 4.0) == pytest.approx(0.3)
    assert keep_probability(multiple, {"names": ["chair", "sofa"]}, 4.0) == 1.0
    size = revsi.task("object_size_estimation")
    assert keep_probability(size, {"names": ["chair"]}, 80.0) == pytest.approx(0.05)
    assert keep_probability(size, {"names": ["chair"]}, 120.0) == 1.0
    assert keep_probability(size, {"names": ["tv"]}, 120.0) == pytest.approx(0.2)
    assert keep_probability(size, {"names": ["toilet"]}, 70.0) == 0.0
    dist = revsi.task("object_abs_distance")
    assert keep_probability(dist, {"names": ["a", "b"], "distance_m": 0.99}, 1.0) == 0.0
    assert keep_probability(dist, {"names": ["a", "b"], "distance_m": 1.5}, 1.5) == pytest.approx(0.2)
    assert keep_probability(dist, {"names": ["a", "b"], "distance_m": 2.5}, 2.5) == pytest.approx(0.5)
    assert keep_probability(dist, {"names": ["a", "b"], "distance_m": 3.2}, 3.2) == 1.0
    assert keep_probability(dist, {"names": ["bed", "b"], "distance_m": 3.2}, 3.2) == 0.0


def test_subsampling_rates_are_met_on_average():
    """Keep draws are uniform in the question id: a 0.2 band keeps about a fifth."""
    from pipeline.qa.ids import unit_draw

    draws = [unit_draw(0, "keep", f"q{i}") for i in range(20000)]
    assert abs(sum(d < 0.2 for d in draws) / len(draws) - 0.2) < 0.01


def test_caps_and_dummy_questions_follow_real_ones(candidates):
    final = finalize_qa(candidates, profile="revsi", seed=0)
    per_scene = final.filter(pl.col("video_kind") == "real").group_by("key", "budget", "question_type").len()
    caps = {qt: rule.cap_per_scene for qt, rule in load_profile("revsi").tasks.items()}
    for row in per_scene.iter_rows(named=True):
        if caps[row["question_type"]] is not None:
            assert row["len"] <= caps[row["question_type"]]
    real_ids = set(final.filter(pl.col("video_kind") == "real")["id"])
    dummy = final.filter(pl.col("video_kind") != "real")
    assert dummy.height > 0
    assert all(json.loads(g)["real_id"] in real_ids for g in dummy["geometry"])


def test_correct_letters_are_balanced_per_type(candidates):
    final = finalize_qa(candidates, profile="revsi", seed=0)
    mcq = final.filter(pl.col("options").list.len() > 0)
    for (qt, budget, kind, n), group in mcq.group_by(
        "question_type", "budget", "video_kind", pl.col("options").list.len().alias("n")
    ):
        counts = Counter(group["ground_truth"])
        assert max(counts.values()) - min(counts.get(l, 0) for l in "ABCDEF"[:n]) <= 1, (qt, budget, counts)
        # options stay a permutation of the same texts with the right answer at the letter
        for row in group.iter_rows(named=True):
            assert _correct_text(row) == json.loads(row["geometry"])["correct"]


def test_vectorised_permutations_match_numpy_generators():
    import numpy as np

    from pipeline.qa.permutations import seeded_permutations
    from pipeline.seeding import stable_int

    seeds = [stable_int(0, "distractors", f"q{i}") for i in range(3000)] + [0, 1, 2**32 - 1, 2**32, 2**64 - 1, 12345]
    sizes = [i % 7 for i in range(len(seeds))]
    expected = [np.random.default_rng(s).permutation(n).tolist() for s, n in zip(seeds, sizes)]
    assert seeded_permutations(seeds, sizes) == expected


def _parts(tmp_path, candidates: pl.DataFrame):
    from pipeline.storage import upath, write_table
    from pipeline.table_scan import TableParts

    paths = []
    for (key,), group in sorted(candidates.group_by("key"), key=lambda kv: kv[0]):
        path = upath(tmp_path / "qa_candidates" / f"{key}.parquet")
        write_table(path, "qa_candidates", group)
        paths.append(path)
    return TableParts("qa_candidates", tuple(paths))


@pytest.mark.parametrize("files_per_batch", [1, 4])
def test_batches_of_scans_give_the_same_table_as_all_candidates_at_once(tmp_path, candidates, files_per_batch):
    from pipeline.qa.finalize import finalize_qa_parts

    parts = _parts(tmp_path, candidates)
    (batched,) = finalize_qa_parts(parts, profiles=["revsi"], seed=3, files_per_batch=files_per_batch)
    whole = finalize_qa(parts.read(), profile="revsi", seed=3)
    assert parquet_bytes("qa", batched) == parquet_bytes("qa", whole)


def test_an_id_in_two_scans_falls_back_to_the_whole_table(tmp_path, candidates):
    from pipeline.qa.finalize import finalize_qa_parts

    keys = sorted(set(candidates["key"]))
    stray = candidates.filter(pl.col("key") == keys[0]).head(5).with_columns(pl.lit(keys[1]).alias("key"))
    shared = pl.concat([candidates, stray])
    parts = _parts(tmp_path, shared)
    (batched,) = finalize_qa_parts(parts, profiles=["revsi"], seed=0, files_per_batch=1)
    assert parquet_bytes("qa", batched) == parquet_bytes("qa", finalize_qa(parts.read(), profile="revsi", seed=0))
