"""Synthetic truth: supports and shortest distances against the generator's exact values over 20 scans.

The generator (``pipeline.synth``) places small objects on known supports (a
phone on a desk, a remote on a sofa, a mug on a shelf, a charger on the floor
under a table) and computes analytic box distances to every neighbour within
1 m; its meshes are gridded finely enough that vertex distances converge to
those values.
"""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.config import Config
from pipeline.pinpoint.questions import generate_questions
from pipeline.pinpoint.representation import build_representation
from pipeline.scene.tables import scene_tables
from pipeline.synth.scannet_writer import truth_dict
from pipeline.synth.scene import generate_scene

SCANS = 20


def _scan(index: int):
    scene = generate_scene(0, index, frames=2)  # geometry only: frames are not needed
    parsed = scene.to_parsed_scan()
    objects = scene_tables(parsed, Config())["objects"]
    truth = {o["id"]: o for o in truth_dict(scene)["objects"]}
    return parsed, objects, truth


@pytest.fixture(scope="module")
def synthetic_results():
    results = []
    for index in range(SCANS):
        parsed, objects, truth = _scan(index)
        targets, neighbors = build_representation(parsed.key, objects, parsed)
        results.append((parsed, objects, truth, targets, neighbors))
    return results


@pytest.mark.slow
def test_support_accuracy_and_exact_distances(synthetic_results):
    total = correct = pairs = 0
    worst = 0.0
    for parsed, _, truth, targets, neighbors in synthetic_results:
        for t in targets.iter_rows(named=True):
            expected = truth[t["object_id"]]
            total += 1
            correct += int(expected["support_id"] == t["support_object_id"])
            exact = {d["id"]: d["distance"] for d in expected["neighbour_distances"]}
            rows = neighbors.filter(pl.col("target_id") == t["object_id"])
            for n in rows.iter_rows(named=True):
                if n["neighbor_id"] in exact:
                    pairs += 1
                    err = abs(n["shortest_distance"] - exact[n["neighbor_id"]])
                    worst = max(worst, err)
                    assert err <= 0.01, (parsed.key, t["label"], n["neighbor_label"], err)
    assert total >= 100 and pairs >= 300
    assert correct / total >= 0.98, (correct, total)


@pytest.mark.slow
def test_relations_of_known_placements(synthetic_results):
    """Objects the generator put on a support are "on" it; a charger under a table is "under" the table."""
    for _, _, truth, targets, neighbors in synthetic_results:
        for t in targets.iter_rows(named=True):
            expected = truth[t["object_id"]]
            rows = neighbors.filter(pl.col("target_id") == t["object_id"])
            relation = dict(zip(rows["neighbor_id"], rows["relation"]))
            if expected["support_relation"] == "under" and expected["under_id"] in relation:
                assert relation[expected["under_id"]] == "under", (t["label"], expected)
            elif expected["support_relation"] == "on" and expected["support_id"] in relation:
                assert relation[expected["support_id"]] == "on"


def _qa_checks():
    """check_qa and _visibility of test_pinpoint_questions (tests are not a package here)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("pinpoint_qa_checks", Path(__file__).with_name("test_pinpoint_questions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_qa, module._visibility


@pytest.mark.slow
def test_questions_on_synthetic_scans(synthetic_results):
    check_qa, visibility = _qa_checks()
    frames = []
    for parsed, objects, _, targets, neighbors in synthetic_results:
        vis = visibility(parsed.key, objects["object_id"].to_list(), budgets=("64",))
        frames.append(generate_questions(parsed.key, targets, neighbors, objects, vis, budgets=("64",)))
    from pipeline.pinpoint.presence import draw_presence_per_split
    from pipeline.pinpoint.presence_blind import blind_figures

    labels = {parsed.key: objects["raw_label"].to_list() for parsed, objects, *_ in synthetic_results}
    qa, _ = draw_presence_per_split(pl.concat(frames), labels, seed=0)
    check_qa(qa)
    counts = dict(qa["question_type"].value_counts().iter_rows())
    assert set(counts) == {"presence", "reference_mcq", "free_form_localization", "structured_localization"}
    tpv = qa.filter(pl.col("question_type") == "presence")
    assert (tpv["ground_truth"] == "Yes").mean() == 0.5
    # Blind within PinpointQA: label prior (cross-validated by scene), mention by a sibling, both, frequency.
    figures = blind_figures(qa)
    for name in ("category_prior", "mentioned", "both", "frequency"):
        assert figures[name] <= 55.0, (name, figures)


def test_one_synthetic_scan_quick():
    """Default-run guard of the slow 20-scan check: one scan, same assertions."""
    parsed, objects, truth = _scan(3)
    targets, neighbors = build_representation(parsed.key, objects, parsed)
    assert targets.height > 0
    for t in targets.iter_rows(named=True):
        assert truth[t["object_id"]]["support_id"] == t["support_object_id"], t
        exact = {d["id"]: d["distance"] for d in truth[t["object_id"]]["neighbour_distances"]}
        for n in neighbors.filter(pl.col("target_id") == t["object_id"]).iter_rows(named=True):
            if n["neighbor_id"] in exact:
                assert abs(n["shortest_distance"] - exact[n["neighbor_id"]]) <= 0.01
