"""PinpointQA presence: the dataset-wide negative draw leaves category, frequency and mention without signal."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.pinpoint.presence import absent_labels, asked_label, draw_presence, named_labels, presence_row
from pipeline.pinpoint.presence_blind import blind_figures
from pipeline.pinpoint.rows import question_row

VOCAB = ["phone", "mug", "remote", "key", "book", "laptop", "bottle", "wallet", "cup", "pen", "scissors", "clock",
         "tissue box", "backpack", "towel", "toothbrush", "soap", "shoe", "hat", "umbrella"]
EVERYWHERE = "pillow"  # in every scene: its positives have no scene to draw a negative from
BUDGETS = ("16", "32", "64", "all")


def _benchmark(seed: int, scenes: int = 80):
    """Scenes with Zipf-like label frequencies; a few labels are positives (visible in some budgets), the
    rest are localisation targets whose questions name them, as the per-scan step would leave them."""
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCAB) + 1)
    rows, labels = [], {}
    for s in range(scenes):
        key = f"synthetic/s{s:03d}_00"
        present = list(gen.choice(VOCAB, size=int(gen.integers(2, 8)), replace=False, p=weights / weights.sum()))
        labels[key] = [*present, EVERYWHERE, "desk", "chair"]
        reserved = present[: max(1, len(present) // 3)] + [EVERYWHERE]
        for i, label in enumerate(reserved):
            shown = BUDGETS[int(gen.integers(0, 2)):]  # some are not seen in 16 frames
            rows += [presence_row(key, b, label, True, [i]) for b in shown]
        for label in present[len(reserved) - 1:]:
            for b in BUDGETS:
                question = f"Which of the following objects is closest to the {label}?"
                rows.append(question_row(key, b, "reference_mcq", "nri_1", question, "A", [],
                                         options=["A. desk", "B. chair", "C. lamp", "D. door"]))
    frame = schemas.from_rows("qa_candidates", rows)
    return frame, labels


def _drawn(seed: int = 0):
    candidates, labels = _benchmark(seed)
    tpv = draw_presence(candidates.filter(pl.col("question_type") == "presence"), labels, seed=seed)
    return candidates, labels, tpv


def test_each_label_and_each_scene_budget_is_half_yes():
    candidates, labels, tpv = _drawn()
    geo = [json.loads(g) for g in tpv["geometry"]]
    # Nearly as many positives kept as category balance allows (a label keeps at most as many scenes as lack it);
    # the draw offers each label a seeded shortlist of hosts, which costs 1 of 104 here.
    offered = {(r["key"], json.loads(r["geometry"])["label"]) for r in candidates.filter(pl.col("question_type") == "presence").iter_rows(named=True)}
    kept = {(k, g["label"]) for k, g, a in zip(tpv["key"], geo, tpv["ground_truth"]) if a == "Yes"}
    lacking = Counter(label for key in labels for label in absent_labels(labels[key]))
    per_label = Counter(label for _, label in offered)
    assert len(kept) >= 0.97 * sum(min(n, lacking[label]) for label, n in per_label.items())
    per_label = Counter((g["label"], r) for g, r in zip(geo, tpv["ground_truth"]))
    for label in {g["label"] for g in geo}:
        assert per_label[(label, "Yes")] == per_label[(label, "No")] > 0
    per_scene = tpv.group_by("key", "budget").agg((pl.col("ground_truth") == "Yes").sum().alias("yes"), pl.len())
    assert (per_scene["len"] == 2 * per_scene["yes"]).all()
    assert EVERYWHERE not in {g["label"] for g in geo}  # absent nowhere: never asked


def test_negatives_are_absent_from_their_scene_and_seeded():
    _, labels, tpv = _drawn()
    for r in tpv.filter(pl.col("ground_truth") == "No").iter_rows(named=True):
        label = json.loads(r["geometry"])["label"]
        assert label in absent_labels(labels[r["key"]]) and asked_label(r["question"]) == label
        assert r["used_obj_ids"] == []
    positives = _benchmark(0)[0].filter(pl.col("question_type") == "presence")
    assert draw_presence(positives, labels, seed=0).equals(tpv)
    other = draw_presence(positives, labels, seed=1)
    assert set(other.filter(pl.col("ground_truth") == "No")["id"]) != set(tpv.filter(pl.col("ground_truth") == "No")["id"])


def test_names_match_words_plurals_and_synonyms():
    texts = ["How many mugs are in this room?", "Which object is closest to the smartphone?", "A. paper bag"]
    assert named_labels(texts, ["mug", "phone", "mobile phone", "bag", "cup", "pen"]) == {"mug", "phone", "mobile phone", "bag"}


def test_blind_predictors_stay_at_chance():
    """Category prior (cross-validated by scene), mention in the scene's other questions, both, frequency: <= 55%."""
    candidates, labels, tpv = _drawn()
    qa = pl.concat([candidates.filter(pl.col("question_type") != "presence"), tpv])
    figures = blind_figures(qa)
    assert figures["yes_share"] == 50.0
    for name in ("category_prior", "mentioned", "both", "frequency"):
        assert figures[name] <= 55.0, (name, figures)
    # The per-scan positives alone, balanced the old way (negatives from any absent label), are answerable blind.
    old = []
    for key, frame in candidates.filter(pl.col("question_type") == "presence").group_by("key", maintain_order=True):
        key = key[0]
        absent = absent_labels(labels[key])
        for i, r in enumerate(frame.iter_rows(named=True)):
            old.append(r)
            old.append(presence_row(key, r["budget"], absent[i % len(absent)], False))
    before = blind_figures(pl.concat([candidates.filter(pl.col("question_type") != "presence"),
                                      schemas.from_rows("qa_candidates", old)]))
    assert before["category_prior"] > 60.0


def test_each_split_is_balanced_on_its_own():
    """Train answers must not give away val/test ones: every label is half "Yes" inside every split."""
    from pipeline.pinpoint.presence import draw_presence_per_split
    from pipeline.pinpoint.splits import with_splits

    candidates, labels = _benchmark(0)
    drawn, mapping = draw_presence_per_split(candidates, labels, seed=0)
    table = with_splits(drawn, previous=mapping)
    assert dict(zip(table["key"], table["split"])) == {k: mapping[k] for k in table["key"]}
    tpv = table.filter(pl.col("question_type") == "presence")
    assert set(tpv["split"]) == {"train", "val", "test"}
    counts = Counter((s, json.loads(g)["label"], a) for s, g, a in zip(tpv["split"], tpv["geometry"], tpv["ground_truth"]))
    for (split, label, answer), n in counts.items():
        assert counts[(split, label, "No" if answer == "Yes" else "Yes")] == n
    assert table.filter(pl.col("question_type") != "presence").height == candidates.filter(pl.col("question_type") != "presence").height
