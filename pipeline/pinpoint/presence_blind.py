"""How well presence (TPV) is answered without the video, by the simple priors a reviewer tries first.

Over released ``qa`` rows (every profile; presence rows of ``pinpointqa``), each predictor scored on the presence
questions, cross-validated by scene where it learns anything (folds of whole scenes, so a scene never informs
its own answers):

* ``category_prior``: the majority answer of the asked label in the other folds (ties and unseen labels: the
  other folds' majority, "Yes" on a tie);
* ``mentioned``: "Yes" exactly when another PinpointQA question of the same scene (any budget, question text and
  options) names the label; ``mentioned_any_profile`` the same over every profile's questions of the scene;
* ``both`` (``both_any_profile``): the majority of the other folds' questions with the same label and the same
  "mentioned" flag, backing off to the same flag, then to the overall majority;
* ``frequency``: the majority of the other folds' questions whose label is as common in the benchmark (quartile of
  its number of presence questions).

The bound (issue 37, SPEC §6) is 55% for each, against 50% chance. A label's answers are independent draws
(``presence``: one side of each matched pair is asked), so these priors sit at chance up to the noise of a few
questions per label; the learned adversary (``pipeline.scoring.adversary``) is the stronger test.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import polars as pl

from pipeline.pinpoint.presence import PRESENCE, asked_label, label_pattern, shown_texts

FOLDS = 5


def _majority(counter: Counter, fallback: str) -> str:
    yes, no = counter.get("Yes", 0), counter.get("No", 0)
    return fallback if yes == no else ("Yes" if yes > no else "No")


def presence_items(qa: pl.DataFrame) -> pl.DataFrame:
    """One row per presence question: key, label, answer, and whether a sibling question names the label
    (``mentioned``: a PinpointQA sibling; ``mentioned_any``: a sibling of any profile)."""
    is_tpv = (pl.col("profile") == "pinpointqa") & (pl.col("question_type") == PRESENCE)
    tpv = qa.filter(is_tpv)
    others = qa.filter(~is_tpv)
    blob: dict[tuple[str, bool], str] = defaultdict(str)
    for key, profile, text in zip(others["key"].to_list(), others["profile"].to_list(), shown_texts(others)):
        blob[(key, profile == "pinpointqa")] += "\n" + text.lower()
    rows = []
    for key, question, answer in zip(tpv["key"].to_list(), tpv["question"].to_list(), tpv["ground_truth"].to_list()):
        label = asked_label(question)
        pattern = label_pattern(label) if label else None
        own = bool(pattern and pattern.search(blob.get((key, True), "")))
        other = bool(pattern and pattern.search(blob.get((key, False), "")))
        rows.append({"key": key, "label": label, "answer": answer, "mentioned": own, "mentioned_any": own or other})
    schema = {"key": pl.String, "label": pl.String, "answer": pl.String, "mentioned": pl.Boolean, "mentioned_any": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def blind_figures(qa: pl.DataFrame, folds: int = FOLDS) -> dict[str, float]:
    """Accuracy (%) of each blind predictor on the presence questions, with their count and the Yes share."""
    items = presence_items(qa)
    n = items.height
    if n == 0:
        return {"questions": 0}
    keys = sorted(set(items["key"].to_list()))
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    label_count = Counter(items["label"].to_list())
    ranks = np.array(sorted(label_count.values()), dtype=float)
    quartile = {lab: int(np.searchsorted(np.quantile(ranks, [0.25, 0.5, 0.75]), c, side="right")) for lab, c in label_count.items()}
    rows = items.to_dicts()
    hits = Counter()
    scopes = {"": "mentioned", "_any_profile": "mentioned_any"}
    for f in range(folds):
        train = [r for r in rows if fold_of[r["key"]] != f]
        test = [r for r in rows if fold_of[r["key"]] == f]
        overall = _majority(Counter(r["answer"] for r in train), "Yes")
        by_label, by_freq = defaultdict(Counter), defaultdict(Counter)
        by_cell, by_flag = defaultdict(Counter), defaultdict(Counter)
        for r in train:
            by_label[r["label"]][r["answer"]] += 1
            by_freq[quartile[r["label"]]][r["answer"]] += 1
            for suffix, col in scopes.items():
                by_cell[(suffix, r["label"], r[col])][r["answer"]] += 1
                by_flag[(suffix, r[col])][r["answer"]] += 1
        for r in test:
            guesses = {
                "category_prior": _majority(by_label[r["label"]], overall),
                "frequency": _majority(by_freq[quartile[r["label"]]], overall),
            }
            for suffix, col in scopes.items():
                flag = _majority(by_flag[(suffix, r[col])], overall)
                guesses["mentioned" + suffix] = "Yes" if r[col] else "No"
                guesses["both" + suffix] = _majority(by_cell[(suffix, r["label"], r[col])], flag)
            for name, guess in guesses.items():
                hits[name] += guess == r["answer"]
    out = {name: round(100.0 * hits[name] / n, 1) for name in sorted(hits)}
    out["questions"] = n
    out["yes_share"] = round(100.0 * items.filter(pl.col("answer") == "Yes").height / n, 1)
    for col in scopes.values():
        for answer in ("Yes", "No"):
            out[f"{col}_{answer.lower()}"] = items.filter((pl.col("answer") == answer) & pl.col(col)).height
    return out
