"""Every answer, every type, every budget, on 20 synthetic scans: recomputed from the truth sidecar and visibility.

The pipeline runs as on a real scan (scene tables, nested budget samples, ray
cast visibility, the SPEC §3 rule); the independent checker of
``test_qa_generation`` then recomputes each answer from the generator's
ground-truth boxes and rooms and the per-budget ``object_visibility`` table.
"""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.config import Config
from pipeline.frames.budgets import sample_frames
from pipeline.qa import generate_candidates
from pipeline.frames.budgets import frame_budgets
from pipeline.scene.tables import scene_tables
from pipeline.synth.scannet_writer import truth_dict
from pipeline.synth.scene import generate_scene
from pipeline.visibility.cast import compute_visibility, object_visibility
from tests.test_qa_generation import Checker
from tests.test_qa_synth import tables_from_truth

SCANS = 20
BUDGETS = frame_budgets(Config())
FRAMES = 100  # 10 s at 10 fps: budgets 16/32/64 and an all-frame sequence of 100


@pytest.mark.slow
def test_every_answer_of_twenty_scans_agrees_with_truth_and_visibility():
    config = Config()
    checked: Counter = Counter()
    for index in range(SCANS):
        scene = generate_scene(config.seed, index, FRAMES)
        parsed = scene.to_parsed_scan()
        tables = scene_tables(parsed, config)
        samples = sample_frames(tables["frames"], config)
        visibility = compute_visibility(parsed.key, tables["frames"], parsed.mesh, config)
        decided = object_visibility(parsed.key, visibility, samples, tables["objects"], None, config)
        key, truth_objects, truth_rooms, _ = tables_from_truth(truth_dict(scene))
        assert key == parsed.key
        checker = Checker(truth_objects, truth_rooms, decided, key)
        checker.objects = {k: v for k, v in checker.objects.items() if not v["structural"]}
        for profile in ("revsi", "vsibench"):
            for budget in BUDGETS:
                candidates = generate_candidates(
                    tables["objects"], tables["rooms"], decided, samples, None,
                    key=key, budget=budget, profile=profile, config=config,
                )
                for row in candidates.iter_rows(named=True):
                    checker.check(row)
                    checked[(profile, budget, row["question_type"])] += 1
    # Every ReVSI type is checked at every budget it is asked at (no room size or route planning at 16).
    revsi_types = {t for p, _, t in checked if p == "revsi"}
    assert len(revsi_types) == 13, sorted(revsi_types)
    for budget in BUDGETS:
        asked = {t for p, b, t in checked if p == "revsi" and b == budget}
        expected = revsi_types - ({"room_size_estimation_single", "room_size_estimation_multiple", "route_planning"} if budget == "16" else set())
        assert asked == expected, (budget, sorted(expected - asked))
    print(f"checked {sum(checked.values())} answers over {SCANS} scans: {dict(sorted(checked.items()))}")
