"""PinpointQA question generation: answer formats, NRI validity, TPV balance, determinism."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.frames.budgets import frame_budgets
from pipeline.pinpoint.questions import generate_questions
from pipeline.pinpoint.relations import RELATIONS
from pipeline.pinpoint.representation import build_representation
from pipeline.pinpoint.templates import QUESTION_TYPES
from pipeline.scoring.ssp import ssp_score

BUDGETS = frame_budgets(Config())


def _hand_scene_module():
    """The hand-built scene of test_pinpoint_representation (tests are not a package here)."""
    path = Path(__file__).with_name("test_pinpoint_representation.py")
    spec = importlib.util.spec_from_file_location("pinpoint_hand_scene", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_hand = _hand_scene_module()
KEY, SCENE, _objects_frame = _hand.KEY, _hand.SCENE, _hand._objects_frame


def _visibility(key, object_ids, budgets=("16", "32", "64", "all"), hidden=()):
    rows = [
        {"key": key, "budget": b, "object_id": int(i), "visible": int(i) not in hidden, "rule": "pixel_floor"}
        for b in budgets
        for i in object_ids
    ]
    return schemas.from_rows("object_visibility", rows)


@pytest.fixture(scope="module")
def hand_qa():
    objects, scan = _objects_frame(SCENE, with_mesh=True)
    targets, neighbors = build_representation(KEY, objects, scan)
    vis = _visibility(KEY, objects["object_id"].to_list())
    qa = generate_questions(KEY, targets, neighbors, objects, vis, seed=7, budgets=BUDGETS)
    return objects, targets, neighbors, vis, qa


def check_qa(qa: pl.DataFrame) -> None:
    """Every format rule the paper's quality control enforces."""
    assert set(qa["question_type"]) <= set(QUESTION_TYPES)
    assert qa["id"].n_unique() == qa.height
    assert set(qa["profile"]) == {"pinpointqa"}
    assert qa["instruction"].null_count() == 0
    for r in qa.iter_rows(named=True):
        if r["question_type"] == "presence":
            assert r["ground_truth"] in ("Yes", "No")
        elif r["question_type"] == "reference_mcq":
            assert len(r["options"]) == 4
            texts = [o.split(". ", 1)[1] for o in r["options"]]
            assert len(set(texts)) == 4
            assert [o[:3] for o in r["options"]] == ["A. ", "B. ", "C. ", "D. "]
            assert r["ground_truth"] in "ABCD" and len(r["ground_truth"]) == 1
            geo = json.loads(r["geometry"])
            assert texts["ABCD".index(r["ground_truth"])] == geo["answer"]["label"]
        elif r["question_type"] == "structured_localization":
            assert ssp_score(r["ground_truth"], r["ground_truth"]) == 1.0  # the project's scorer reads it
            ans = json.loads(r["ground_truth"])
            assert set(ans) == {"target", "support_surface", "references"}
            assert isinstance(ans["target"], str) and ans["target"]
            assert ans["support_surface"] is None or isinstance(ans["support_surface"], str)
            assert len(ans["references"]) <= 2
            assert ans["support_surface"] is not None or ans["references"]
            for ref in ans["references"]:
                assert set(ref) == {"object", "relation", "distance_cm"}
                assert ref["relation"] in RELATIONS
                assert isinstance(ref["distance_cm"], (int, float)) and ref["distance_cm"] >= 0
                assert round(ref["distance_cm"], 1) == ref["distance_cm"]
        elif r["question_type"] == "free_form_localization":
            assert r["ground_truth"].startswith(("The ", "You can find"))
            assert all(int(d) >= 0 for d in re.findall(r"(\d+) cm", r["ground_truth"]))


def test_formats_on_hand_scene(hand_qa):
    _, targets, _, _, qa = hand_qa
    check_qa(qa)
    assert set(qa["budget"]) == {"16", "32", "64", "all"}
    per_budget = qa.filter(pl.col("budget") == "16")
    assert set(per_budget["question_type"]) == set(QUESTION_TYPES)
    # Per scan only positives; the negatives are the dataset-wide draw (test_pinpoint_presence.py).
    tpv = per_budget.filter(pl.col("question_type") == "presence")
    assert set(tpv["ground_truth"]) == {"Yes"}
    # A third of the targets (rounded up) is reserved for presence, and nothing else names them.
    asked = {json.loads(g)["label"] for g in tpv["geometry"]}
    assert len(asked) >= -(-targets.height // 3)
    others = per_budget.filter(pl.col("question_type") != "presence")
    texts = " ".join(q + " " + " ".join(o) for q, o in zip(others["question"], others["options"])).lower()
    for label in asked:
        assert not re.search(rf"\b{label}s?\b", texts), label


def test_ssp_and_fsd_content(hand_qa):
    objects, targets, neighbors, _, qa = hand_qa
    ssp = {json.loads(g)["target"]: json.loads(g) for g in qa.filter((pl.col("question_type") == "structured_localization") & (pl.col("budget") == "all"))["ground_truth"]}
    assert ssp["phone"]["support_surface"] == "desk"
    assert ssp["charger"]["support_surface"] == "floor"
    refs = ssp["phone"]["references"]
    assert [r["object"] for r in refs] == sorted([r["object"] for r in refs], key=lambda o: [x["distance_cm"] for x in refs if x["object"] == o][0])
    assert "desk" not in [r["object"] for r in refs]
    fsd = qa.filter((pl.col("question_type") == "free_form_localization") & (pl.col("budget") == "all"))
    phone = [g for g in fsd["ground_truth"] if g.startswith(("The phone", "You can find the phone"))][0]
    assert "desk" in phone and "cm" in phone


def test_nri_excludes_support_and_contact(hand_qa):
    _, targets, neighbors, _, qa = hand_qa
    nri = qa.filter(pl.col("question_type") == "reference_mcq")
    assert nri.height > 0
    for r in nri.iter_rows(named=True):
        geo = json.loads(r["geometry"])
        target = geo["target_id"]
        rows = neighbors.filter((pl.col("target_id") == target) & (pl.col("neighbor_id") == geo["answer"]["object_id"]))
        assert not rows["is_support"][0] and not rows["contact"][0]


def test_only_visible_targets(hand_qa):
    objects, targets, neighbors, _, _ = hand_qa
    phone = targets.filter(pl.col("label") == "phone")["object_id"][0]
    vis = _visibility(KEY, objects["object_id"].to_list(), budgets=("16",), hidden={phone})
    qa = generate_questions(KEY, targets, neighbors, objects, vis, budgets=("16",))
    assert phone not in {i for ids in qa["used_obj_ids"] for i in ids}
    assert not any("phone" in q for q in qa.filter(pl.col("ground_truth") == "Yes")["question"])


def test_deterministic_and_seeded(hand_qa):
    objects, targets, neighbors, vis, qa = hand_qa
    again = generate_questions(KEY, targets, neighbors, objects, vis, seed=7, budgets=BUDGETS)
    assert again.equals(qa)
    other = generate_questions(KEY, targets, neighbors, objects, vis, seed=8, budgets=BUDGETS)
    assert other.height > 0


def _random_tables(seed: int):
    """A random scene as tables only: targets on supports, neighbours with random distances."""
    rng = np.random.default_rng(seed)
    key = f"synthetic/rand{seed:04d}_00"
    labels = ["desk", "table", "chair", "lamp", "monitor", "shelf", "sofa", "bed", "cabinet", "plant", "tv", "box"]
    small = ["phone", "mug", "remote", "key", "book", "laptop", "bottle", "wallet"]
    objs, tgt, nbr = [], [], []
    oid = 0
    for lab in labels + ["floor", "wall"]:
        objs.append({"key": key, "object_id": oid, "raw_label": lab, "category": lab, "structural": lab in ("floor", "wall"),
                     "small_object": False, "center": list(rng.uniform(0, 4, 3)), "extent": [0.5, 0.5, 0.5], "rotation": list(np.eye(3).ravel())})
        oid += 1
    big = list(range(len(labels)))
    for lab in rng.choice(small, size=rng.integers(1, 5), replace=False):
        objs.append({"key": key, "object_id": oid, "raw_label": str(lab), "category": str(lab), "structural": False,
                     "small_object": True, "center": list(rng.uniform(0, 4, 3)), "extent": [0.1, 0.1, 0.05], "rotation": list(np.eye(3).ravel())})
        sup = int(rng.choice(big)) if rng.random() < 0.8 else None  # some targets hang or lean: no support
        tgt.append({"key": key, "object_id": oid, "label": str(lab), "category": str(lab), "support_object_id": sup,
                    "support_label": None if sup is None else labels[sup], "neighbor_count": 0, "distance_source": "mesh"})
        for n in rng.choice(big, size=rng.integers(1, 8), replace=False):
            d = 0.0 if n == sup else float(rng.uniform(0, 0.9))
            nbr.append({"key": key, "target_id": oid, "neighbor_id": int(n), "neighbor_label": labels[n], "shortest_distance": d,
                        "contact": d <= 0.02, "relation": str(rng.choice(RELATIONS)), "is_support": bool(n == sup), "distance_source": "mesh"})
        oid += 1
    objects = schemas.from_rows("objects", objs)
    vis = _visibility(key, list(range(oid)))
    return key, schemas.from_rows("pinpoint_targets", tgt), schemas.from_rows("pinpoint_neighbors", nbr), objects, vis


def test_formats_and_balance_on_random_tables():
    frames = []
    for seed in range(60):
        key, targets, neighbors, objects, vis = _random_tables(seed)
        frames.append(generate_questions(key, targets, neighbors, objects, vis, seed=seed, budgets=("32",)))
    qa = pl.concat(frames)
    check_qa(qa)
    tpv = qa.filter(pl.col("question_type") == "presence")
    assert tpv.height > 0 and set(tpv["ground_truth"]) == {"Yes"}
    assert qa.filter(pl.col("question_type") == "reference_mcq").height > 20
    letters = qa.filter(pl.col("question_type") == "reference_mcq")["ground_truth"].value_counts()
    assert letters.height == 4


def test_absent_labels_avoid_word_overlaps():
    from pipeline.pinpoint.questions import absent_labels

    absent = absent_labels(["Paper Bag", "smartphone", "desk", "coffee cup"])
    for label in ("bag", "paper bag", "phone", "mobile phone", "smartphone", "cup"):
        assert label not in absent
    assert "mug" in absent and "tote bag" in absent


def test_far_distractor_distances_batched_equal_the_pairwise_box_distance():
    """``ScanLookups`` measures every candidate in one batched call: the same floats as ``box_distance``."""
    from pipeline.pinpoint.config import PinpointConfig
    from pipeline.pinpoint.geometry import box_distance, box_of_row
    from pipeline.pinpoint.questions import ScanLookups

    gen = np.random.default_rng(5)
    rows = []
    for i in range(120):
        a = gen.uniform(0, np.pi)
        rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        if i % 7 == 0:  # some boxes tilted off the floor plane too
            b = gen.uniform(0, 0.5)
            rot = rot @ np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
        extent = gen.uniform(0.05, 2.0, 3) if i % 11 else np.array([0.3, 0.3, 0.0])  # and flat ones
        rows.append({"key": "s/x", "object_id": i, "center": gen.uniform(-4, 4, 3).tolist(),
                     "extent": extent.tolist(), "rotation": rot.reshape(9).tolist()})
    objects = pl.DataFrame(rows)
    labels = {i: f"label{i % 17}" for i in range(120)}
    neighbors = pl.DataFrame({"target_id": [3], "neighbor_id": [4], "shortest_distance": [0.5]})
    far = ScanLookups(objects, neighbors)
    target = {"object_id": 3, "label": labels[3], "support_label": None}
    closest = far.closest_by_label(target, labels, {9}, PinpointConfig())
    boxes = {r["object_id"]: box_of_row(r) for r in rows}
    expected: dict[str, tuple[float, int]] = {}
    for oid in range(120):
        if oid in (3, 9) or labels[oid] in {labels[3], labels[4]} | set(PinpointConfig().questions.excluded_reference_labels):
            continue
        d = box_distance(boxes[3], boxes[oid])
        if labels[oid] not in expected or d < expected[labels[oid]][0]:
            expected[labels[oid]] = (d, oid)
    assert closest == expected and len(expected) > 10
    for t in range(0, 120, 13):  # every target's batch against the pairwise distance, bit for bit
        batched = far.closest_by_label({"object_id": t, "label": "none", "support_label": None}, labels, set(),
                                       PinpointConfig())
        for label, (d, oid) in batched.items():
            assert d == box_distance(boxes[t], boxes[oid])
