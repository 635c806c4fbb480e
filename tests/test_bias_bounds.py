"""Benchmark validity II: bounds that hold for every constant answer, a blind baseline, no near-duplicates.

Issue 25: the numeric ceiling was judged on the mode with ties broken toward
the smallest value, so shrinking answer classes lowered the reported baseline
while another tied answer scored above the limit.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import polars as pl

from pipeline import schemas
from scan2qa import main
from pipeline.qa.constant_bound import keep_under_ceiling, lp_upper_bound
from pipeline.qa.distribution import content_frequency, control_distribution, control_group
from pipeline.qa.duplicates import drop_near_duplicates
from pipeline.qa.profiles import load_profile
from pipeline.qa.stats import compute_stats, format_text
from pipeline.scoring.best_constant import best_constant
from pipeline.scoring.blind import blind_predictions, blind_scores
from pipeline.scoring.evaluate import evaluate
from pipeline.scoring.metrics import mean_relative_accuracy
from tests.test_scoring_support import qa_frame, revsi_rows


def _brute_best(values: list[float]) -> float:
    grid = np.concatenate([values, np.geomspace(min(values) * 0.4, max(values) * 2.1, 400)])
    return max(float(np.mean([mean_relative_accuracy(c, t) for t in values])) for c in grid)


def test_best_constant_is_the_maximum_over_every_answer():
    gen = np.random.default_rng(3)
    for _ in range(5):
        values = list(np.round(np.exp(gen.uniform(0, 3, size=int(gen.integers(2, 20)))), 1))
        score, answer = best_constant(values)
        assert score >= _brute_best(values) - 1e-12
        assert float(np.mean([mean_relative_accuracy(answer, t) for t in values])) >= score - 1.0 / len(values)
    # Two clusters: the best answer lies between them, where no answer occurs.
    assert best_constant([10.0, 16.0])[0] > max(np.mean([mean_relative_accuracy(c, t) for t in (10.0, 16.0)]) for c in (10.0, 16.0))


def _numeric_part(values: list[float]) -> pl.DataFrame:
    rows = [
        {"id": f"s{i:03d}", "options": [], "geometry": "{}", "answer_value": v, "ground_truth": f"{v:g}"}
        for i, v in enumerate(values)
    ]
    return pl.DataFrame(rows, schema={"id": pl.String, "options": pl.List(pl.String), "geometry": pl.String,
                                      "answer_value": pl.Float64, "ground_truth": pl.String})


def test_the_bound_holds_for_the_best_constant_when_tied_modes_straddle_the_limit():
    rule = load_profile("revsi").task("object_size_estimation")
    ceiling = 0.3
    rule = dataclasses.replace(rule, balance={**rule.balance, "max_frequency": ceiling})
    # Tied modes 10 and 100 (two each): ties go to 10, alone far below the rest, so the mode scores little;
    # 100 sits in a dense cluster, so answering it scores far above the limit.
    values = [10.0, 10.0, 100.0, 100.0] + [float(v) for v in np.linspace(80.5, 124.5, 30)]
    values += [float(v) for v in np.geomspace(300, 3000, 30).round(1)]
    answers = [f"{v:g}" for v in values]
    assert content_frequency(rule.question_type, answers, False) <= ceiling  # the tie-broken mode looks fine
    assert best_constant(values)[0] > ceiling  # answering 100 does not
    keep, reason = control_group(_numeric_part(values), rule, seed=0)
    kept = [v for v, k in zip(values, keep) if k]
    assert best_constant(kept)[0] <= ceiling + 1e-12
    assert content_frequency(rule.question_type, [f"{v:g}" for v in kept], False) <= ceiling
    assert "constant answer" in reason
    bound = lp_upper_bound(values, ceiling)
    assert len(kept) >= 0.9 * bound, (len(kept), bound)


def test_a_small_type_is_brought_under_its_ceiling_and_the_record_says_so():
    """The 24 counting-multiple candidates of 20 synthetic scans at 16 frames (issue 25 item 5): kept whole by
    the share cap their best constant scored 65% against 50%; no selection of more than 7 meets the ceiling
    (the relaxation's bound), so the control keeps a small one and says so; every answer alike keeps the type."""
    rule = load_profile("revsi").task("object_counting_multiple")
    values = [4.0] * 9 + [5.0] * 8 + [6.0] * 4 + [7.0, 8.0, 14.0]
    keep, reason = control_group(_numeric_part(values), rule, seed=0)
    kept = [v for v, k in zip(values, keep) if k]
    assert best_constant(kept)[0] <= 0.5 + 1e-12
    assert len(kept) >= lp_upper_bound(values, 0.5) - 1 and len(kept) < 20
    assert "constant answer scored above 50%" in reason and f"only {len(kept)} of 24 meet it" in reason
    alike = [4.0] * 24  # no selection scores under the ceiling: the share-capped set stays, stats shows it
    keep, _ = control_group(_numeric_part(alike), rule, seed=0)
    assert keep.any()


def _exact_max(values: list[float], ceiling: float) -> int:
    for size in range(len(values), 0, -1):
        for subset in itertools.combinations(values, size):
            if best_constant(list(subset))[0] <= ceiling + 1e-12:
                return size
    return 0


def test_selection_is_close_to_the_exact_and_lp_optimum_on_small_cases():
    """Measured: the exact optimum in 7 of 8 cases of 11 answers (4 of 6 in the other); 92-98% of the LP bound."""
    gen = np.random.default_rng(7)
    kept_total = exact_total = 0
    for _ in range(8):
        values = np.round(np.exp(gen.normal(4.0, 0.6, size=11)), 0)
        keep = keep_under_ceiling(values, gen.random(values.size), np.ones(values.size, dtype=bool), 0.35)
        found = best_constant(values[keep])
        assert found is None or found[0] <= 0.35 + 1e-12
        exact = _exact_max(list(values), 0.35)
        assert exact - 2 <= keep.sum() <= exact <= lp_upper_bound(values, 0.35) + 1e-9
        kept_total, exact_total = kept_total + int(keep.sum()), exact_total + exact
    assert kept_total >= 0.9 * exact_total
    for n in (60, 150):
        values = np.round(np.exp(gen.normal(4.0, 0.5, size=n)), 1)
        keep = keep_under_ceiling(values, gen.random(values.size), np.ones(values.size, dtype=bool), 0.3)
        assert best_constant(values[keep])[0] <= 0.3 + 1e-12
        assert keep.sum() >= 0.9 * lp_upper_bound(values, 0.3)


def _route_row(qid: str, path: tuple[int, ...], key="scannet/scene0000_00") -> dict:
    geometry = {"correct": "Turn Left, Turn Right", "start_id": path[0], "waypoint_ids": list(path[1:-1]), "goal_id": path[-1]}
    return {
        "id": qid, "key": key, "dataset": "scannet", "scene_id": key.split("/")[1], "profile": "revsi", "budget": "all",
        "question_type": "route_planning", "template": "t", "question": f"route {qid}", "ground_truth": "A",
        "options": ["A. Turn Left, Turn Right", "B. Turn Right, Turn Left"], "answer_value": None, "used_obj_ids": list(path),
        "video": "v.mp4", "video_kind": "real", "geometry": json.dumps(geometry),
    }


def test_a_route_and_its_reverse_and_repeated_texts_count_once():
    profile = load_profile("revsi")
    rows = [_route_row("r2", (1, 0, 2, 3)), _route_row("r1", (3, 2, 0, 1)), _route_row("r3", (1, 2, 0, 3)),
            _route_row("r4", (3, 2, 0, 1), key="scannet/scene0001_00")]
    counting = revsi_rows(14, 1, budget="all", scenes=1)
    counting = [r for r in counting if r["question_type"] == "object_counting_single"][:1]
    twin = dict(counting[0], id="zz" + counting[0]["id"])
    qa = schemas.from_rows("qa", rows + counting + [twin])
    kept = drop_near_duplicates(qa, profile)
    assert sorted(kept["id"].to_list()) == sorted(["r1", "r3", "r4", counting[0]["id"]])
    again = drop_near_duplicates(qa.reverse(), profile)
    assert sorted(again["id"].to_list()) == sorted(kept["id"].to_list())
    assert sorted(drop_near_duplicates(qa, profile, pinned={"r2"})["id"].to_list()) == sorted(["r2", "r3", "r4", counting[0]["id"]])
    vsibench = qa.with_columns(pl.lit("vsibench").alias("profile"))
    assert drop_near_duplicates(vsibench, load_profile("vsibench")).height == qa.height


def _closest_rows(n_scenes: int, per_scene: int, prior: bool) -> pl.DataFrame:
    """Closest-object questions; with ``prior`` the big object ("bed") is always the answer."""
    rows = []
    names = ["bed", "cup", "pen", "lamp"]
    for s in range(n_scenes):
        for q in range(per_scene):
            i = s * per_scene + q
            order = [names[(i + k) % 4] for k in range(4)]
            correct = "bed" if prior else order[int(np.random.default_rng(i).integers(4))]
            letter = "ABCD"[order.index(correct)]
            rows.append({
                "id": f"c{i:04d}", "key": f"scannet/scene{s:04d}_00", "dataset": "scannet", "scene_id": f"scene{s:04d}_00",
                "profile": "revsi", "budget": "all", "question_type": "object_rel_distance_closest", "template": "t",
                "question": f"which is closest to the chair {i}?", "options": [f"{l}. {t}" for l, t in zip("ABCD", order)],
                "ground_truth": letter, "answer_value": None, "used_obj_ids": [], "video": "v.mp4", "video_kind": "real",
                "geometry": json.dumps({"correct": correct}),
            })
    return schemas.from_rows("qa", rows)


def test_blind_baseline_reads_a_text_prior_and_is_fitted_on_other_scenes():
    with_prior = _closest_rows(10, 12, prior=True)
    assert blind_scores(with_prior)[("revsi", "all", "real", "object_rel_distance_closest")] == 1.0
    # A scene-specific answer cannot be learnt from the other scenes: the guesser falls back to chance.
    without = _closest_rows(10, 12, prior=False)
    score = blind_scores(without)[("revsi", "all", "real", "object_rel_distance_closest")]
    assert abs(score - 0.25) < 0.12
    predictions = blind_predictions(with_prior)
    assert set(predictions) == set(with_prior["id"].to_list()) and set(predictions.values()) <= set("ABCD")


def test_the_control_holds_the_blind_baseline_within_five_points_of_chance():
    profile = _blind_control_only(load_profile("revsi"))
    qa = pl.concat([_closest_rows(10, 12, prior=True).head(40), _closest_rows(10, 12, prior=False)])
    before = blind_scores(qa)[("revsi", "all", "real", "object_rel_distance_closest")]
    kept, drops = control_distribution(qa, profile, seed=0)
    after = blind_scores(kept)[("revsi", "all", "real", "object_rel_distance_closest")]
    assert before > 0.30 and abs(after - 0.25) <= 0.05 + 1e-9, (before, after)
    assert drops.height == qa.height - kept.height > 0
    assert set(drops["reason"]) == {"the blind (text-only) baseline scored outside its bound on these questions"}


def _blind_control_only(profile):
    """The profile without Iterative Bias Pruning (tested in test_bias_pruning), so the blind pass is seen alone."""
    from dataclasses import replace

    tasks = {qt: replace(rule, balance={k: v for k, v in rule.balance.items() if k != "adversary"}) for qt, rule in profile.tasks.items()}
    return replace(profile, tasks=tasks)


def _unlucky_closest_rows() -> pl.DataFrame:
    """160 closest-object questions over 20 scenes, no option text a prior, and a no-prior guess (a seeded letter)
    right on 27 of 160, so the blind baseline sits under chance by more than the margin. The most frequent
    correct text ("object00", 12 times in 70 offers: a rate under chance) is right only where the guess is, so
    every question the blind pass drops lifts that text's share."""
    names = [f"object{k:02d}" for k in range(1, 24)]
    gen = np.random.default_rng(7)
    rows = []
    for i in range(160):
        s = i // 8
        order = [names[int(k)] for k in gen.choice(len(names), size=4, replace=False)]
        if i < 70:
            order[int(gen.integers(4))] = "object00"
        rows.append({
            "id": f"u{i:04d}", "key": f"scannet/scene{s:04d}_00", "dataset": "scannet", "scene_id": f"scene{s:04d}_00",
            "profile": "revsi", "budget": "all", "question_type": "object_rel_distance_closest", "template": "t",
            "question": f"which is closest to the chair {i}?", "options": [f"{l}. {t}" for l, t in zip("ABCD", order)],
            "ground_truth": "A", "answer_value": None, "used_obj_ids": [], "video": "v.mp4", "video_kind": "real",
            "geometry": json.dumps({"correct": order[0]}),
        })
    guesses = blind_predictions(schemas.from_rows("qa", rows))  # rows' guesses hash their id and option texts
    top = [i for i, r in enumerate(rows) if r["options"]["ABCD".index(guesses[r["id"]])][3:] == "object00"][:12]
    out = []
    for i, row in enumerate(rows):
        texts = [o[3:] for o in row["options"]]
        guessed = "ABCD".index(guesses[row["id"]])
        right = i in top or (i % 12 == 0 and texts[guessed] != "object00")
        pick = guessed if right else next(k for k in range(4) if k != guessed and texts[k] != "object00")
        out.append(dict(row, ground_truth="ABCD"[pick], geometry=json.dumps({"correct": texts[pick]})))
    return schemas.from_rows("qa", out)


def test_the_blind_pass_may_lift_a_content_baseline_far_under_its_bound():
    """Dropping the few questions a no-prior guess gets wrong lifts the top correct text's share a little
    (a few percent, far under chance): that is no new prior, and it must not undo the pass (issue 25 item 5)."""
    qa = _unlucky_closest_rows()
    key = ("revsi", "all", "real", "object_rel_distance_closest")
    before = blind_scores(qa)[key]
    kept, drops = control_distribution(qa, _blind_control_only(load_profile("revsi")), seed=0)
    after = blind_scores(kept)[key]
    assert before < 0.20 and abs(after - 0.25) <= 0.05 + 1e-9, (before, after)
    assert 0 < drops.height <= 0.2 * qa.height
    assert content_frequency("object_rel_distance_closest", json_correct(kept), True) <= 0.25 + 0.05


def json_correct(qa: pl.DataFrame) -> list[str]:
    return [json.loads(g)["correct"] for g in qa["geometry"].to_list()]


def test_stats_show_best_constant_blind_candidates_and_interval(tmp_path, capsys):
    qa = qa_frame(revsi_rows(60, 2, budget="all"))
    stats = compute_stats(qa)
    size = next(e for e in stats["types"] if e["question_type"] == "object_size_estimation")
    assert size["best_constant_baseline"] >= size["frequency_baseline"] - 1e-12
    assert size["best_constant_answer"] is not None and size["blind_baseline"] is not None
    assert size["ci95_width"] > 0.20 and size["ci_wide"]
    text = format_text(stats)
    assert "too few questions to rank models" in text and "blind" in text
    missing = tmp_path / "nope.parquet"
    assert main(["stats", "--qa", str(missing)]) == 1
    err = capsys.readouterr().err
    assert str(missing) in err and "--qa" in err and "build it first" not in err


def test_a_dummy_group_with_a_lower_is_better_probe_has_no_overall():
    real = revsi_rows(30, 1)
    dummy = [
        dict(r, id="d" + r["id"], video_kind="black", video="videos/dummy/black/x.mp4",
             ground_truth="0" if r["question_type"].startswith("object_counting") else r["ground_truth"])
        for r in revsi_rows(14, 2)
        if r["question_type"].startswith("object_counting") or r["question_type"] == "object_size_estimation"
    ]
    qa = qa_frame(real + dummy)
    report = evaluate(qa, {}, "harness")
    black = next(g for g in report["groups"] if g["video_kind"] == "black")
    assert black["overall"] is None and black["lower_is_better"] == ["object_size_estimation_mra"]
    assert set(black["dummy_metrics"]) == {"object_counting_exact_match", "object_size_estimation_mra"}
    assert all(black["baselines"][name]["overall"] is None for name in ("random", "frequency"))
