"""How well presence (TPV) is answered without the video, by the simple priors a reviewer tries first.

Over released ``qa`` rows (every profile; presence rows of ``pinpointqa``), each predictor scored on the presence
questions, cross-validated by scene where it learns anything (folds of whole scenes, so a scene never informs
its own answers):

* ``category_prior``: the majority answer of the asked label in the other folds (ties and unseen labels: the
  other folds' majority, "Yes" on a tie);
* ``mentioned``: "Yes" exactly when another question of the same scene (any profile, any budget, question text
  and options) names the label;
* ``both``: the majority of the other folds' questions with the same label and the same "mentioned" flag,
  backing off to the same flag, then to the overall majority;
* ``frequency``: the majority of the other folds' questions whose label is as common in the benchmark (quartile of
  its number of presence questions).

The bound (issue 37, SPEC §6) is 55% for each, against 50% chance. Exact per-label balance can push the
cross-validated priors below 50%: holding a scene out leaves its labels' other answer in the majority, a pull no
model can learn from the training folds.
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
    """One row per presence question: key, label, answer, and whether a sibling question names the label."""
    tpv = qa.filter((pl.col("profile") == "pinpointqa") & (pl.col("question_type") == PRESENCE))
    others = qa.filter(~((pl.col("profile") == "pinpointqa") & (pl.col("question_type") == PRESENCE)))
    blob: dict[str, str] = defaultdict(str)
    for key, text in zip(others["key"].to_list(), shown_texts(others)):
        blob[key] += "\n" + text.lower()
    rows = []
    for key, question, answer in zip(tpv["key"].to_list(), tpv["question"].to_list(), tpv["ground_truth"].to_list()):
        label = asked_label(question)
        mentioned = bool(label and label_pattern(label).search(blob.get(key, "")))
        rows.append({"key": key, "label": label, "answer": answer, "mentioned": mentioned})
    return pl.DataFrame(rows, schema={"key": pl.String, "label": pl.String, "answer": pl.String, "mentioned": pl.Boolean})


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
    for f in range(folds):
        train = [r for r in rows if fold_of[r["key"]] != f]
        test = [r for r in rows if fold_of[r["key"]] == f]
        overall = _majority(Counter(r["answer"] for r in train), "Yes")
        by_label, by_cell, by_flag, by_freq = defaultdict(Counter), defaultdict(Counter), defaultdict(Counter), defaultdict(Counter)
        for r in train:
            by_label[r["label"]][r["answer"]] += 1
            by_cell[(r["label"], r["mentioned"])][r["answer"]] += 1
            by_flag[r["mentioned"]][r["answer"]] += 1
            by_freq[quartile[r["label"]]][r["answer"]] += 1
        for r in test:
            flag = _majority(by_flag[r["mentioned"]], overall)
            guesses = {
                "category_prior": _majority(by_label[r["label"]], overall),
                "mentioned": "Yes" if r["mentioned"] else "No",
                "both": _majority(by_cell[(r["label"], r["mentioned"])], flag),
                "frequency": _majority(by_freq[quartile[r["label"]]], overall),
            }
            for name, guess in guesses.items():
                hits[name] += guess == r["answer"]
    out = {name: round(100.0 * hits[name] / n, 1) for name in ("category_prior", "mentioned", "both", "frequency")}
    out["questions"] = n
    out["yes_share"] = round(100.0 * items.filter(pl.col("answer") == "Yes").height / n, 1)
    out["mentioned_yes"] = items.filter((pl.col("answer") == "Yes") & pl.col("mentioned")).height
    out["mentioned_no"] = items.filter((pl.col("answer") == "No") & pl.col("mentioned")).height
    return out
