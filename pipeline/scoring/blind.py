"""The blind baseline: answers from the question text and options alone, with a prior fitted on other scenes.

A model that never looks at the video still knows that beds are large, that
the biggest object listed is often the closest, and which turn sequences a
generator favours. VSI-Bench measured "vision disabled" models for this
reason; the content frequency baseline cannot see it, because it answers one
constant per type. The blind guesser reads only what a model reads without
the video:

* multiple choice: each option's text is scored by how often that text was
  the correct option of the same type on the training scenes (smoothed toward
  chance), and the best-scoring option is answered (ties: the first letter)
  when its rate is ``EVIDENCE`` standard errors above chance, else a letter
  chosen by a hash of the question id and the option texts (a guesser with
  no prior guesses; never the letter, so letter balancing does not move it);
* numbers: the question text (it names the objects) picks the training
  answers of the same text, and the best constant answer of those is given
  (``best_constant``); with fewer than ``MIN_TEXT_EXAMPLES`` of them, the best
  constant of the whole type;
* presence: the training majority; SSP/FSD: nothing (no chance level).

The prior is never fitted on the scene it answers: scenes are split into
``FOLDS`` folds by a seeded hash of their key and each fold is answered by a
prior fitted on the others (cross-validation by scene). Fitting is per
(profile, budget, type) over real-video questions; a dummy-video question is
answered like its text's real counterpart.
"""

from __future__ import annotations

import math
from collections import defaultdict

import polars as pl

from pipeline.scoring import metrics
from pipeline.scoring.best_constant import best_constant
from pipeline.scoring.parsing import finite_float, option_letters
from pipeline.seeding import stable_int

FOLDS = 5
MIN_TEXT_EXAMPLES = 3
SMOOTHING = 2.0  # pseudo-questions at chance behind every option text's rate
EVIDENCE = 2.0  # standard errors above chance before an option text counts as a prior


def _text(option: str) -> str:
    head, _, rest = option.partition(". ")
    return rest if rest and len(head) == 1 else option


def _correct_text(options: list[str], letter: str) -> str:
    for option in options:
        if option.startswith(f"{letter}. "):
            return _text(option)
    return letter


def scene_folds(keys: list[str], seed: int = 0, folds: int = FOLDS) -> dict[str, int]:
    """Each scene's fold (a seeded hash of its key, so a scene's fold never depends on the others)."""
    distinct = sorted(set(keys))
    return {k: stable_int(seed, "blind/fold", k) % folds for k in distinct}


class _Prior:
    def __init__(self, rows: list[dict], kind: str, seed: int = 0):
        self.kind = kind
        self.seed = seed
        self.appear: dict[str, int] = defaultdict(int)
        self.correct: dict[str, int] = defaultdict(int)
        self.by_text: dict[str, list[float]] = defaultdict(list)
        self.values: list[float] = []
        self.yes = 0
        for row in rows:
            if kind == "mcq":
                options = list(row["options"] or [])
                right = _correct_text(options, row["ground_truth"])
                for option in options:
                    self.appear[_text(option)] += 1
                    self.correct[_text(option)] += _text(option) == right
            elif kind == "nq":
                value = finite_float(row["ground_truth"])
                if value is not None:
                    self.by_text[row["question"]].append(value)
                    self.values.append(value)
            elif kind == "yesno":
                self.yes += row["ground_truth"].strip().lower() == "yes"
        self.count = len(rows)
        found = best_constant(self.values) if kind == "nq" else None
        self.constant = found[1] if found else None

    def answer(self, row: dict) -> str:
        if self.kind == "mcq":
            options = list(row["options"] or [])
            letters = option_letters(options)
            if not letters:
                return ""
            chance = 1.0 / len(options)

            def rate(option: str) -> float:
                text = _text(option)
                return (self.correct.get(text, 0) + SMOOTHING * chance) / (self.appear.get(text, 0) + SMOOTHING)

            best = max(range(len(options)), key=lambda i: (rate(options[i]), -i))
            text = _text(options[best])
            seen = self.appear.get(text, 0)
            # Only a text the training scenes show to be right more often than chance is a prior; otherwise
            # argmax over noise picks what the *other* folds lack, which on a balanced type is what this fold
            # has in excess, and scores below chance. Then the guess is a letter drawn from the question id.
            if seen == 0 or rate(options[best]) - chance <= EVIDENCE * math.sqrt(chance * (1 - chance) / seen):
                pick = min(range(len(options)), key=lambda i: stable_int("blind/guess", row["id"], _text(options[i])))
                return letters[pick]
            return letters[best]
        if self.kind == "nq":
            same = self.by_text.get(row["question"], [])
            found = best_constant(same) if len(same) >= MIN_TEXT_EXAMPLES else None
            value = found[1] if found else self.constant
            return "" if value is None or not math.isfinite(value) else f"{value:.6g}"
        if self.kind == "yesno":
            return "Yes" if 2 * self.yes > self.count else "No"
        return ""


def blind_predictions(qa: pl.DataFrame, seed: int = 0, folds: int = FOLDS) -> dict[str, str]:
    """id -> the blind guess, each scene answered by a prior fitted on the other folds' scenes."""
    if qa.is_empty():
        return {}
    qa = qa.with_columns(pl.col("video_kind").fill_null("real"))
    fold_of = scene_folds(qa["key"].to_list(), seed, folds)
    out: dict[str, str] = {}
    columns = ["id", "key", "question", "options", "ground_truth", "video_kind"]
    for (profile, budget, question_type), group in qa.sort("id").group_by(["profile", "budget", "question_type"], maintain_order=True):
        rows = group.select(columns).to_dicts()
        kind = metrics.answer_kind(question_type, next((r["options"] for r in rows if r["options"]), None))
        real = [r for r in rows if r["video_kind"] == "real"]
        for fold in sorted({fold_of[r["key"]] for r in rows}):
            prior = _Prior([r for r in real if fold_of[r["key"]] != fold], kind, seed)
            for r in rows:
                if fold_of[r["key"]] == fold:
                    out[r["id"]] = prior.answer(r)
    return out


def blind_scores(qa: pl.DataFrame, seed: int = 0, by=("profile", "budget", "video_kind", "question_type")) -> dict[tuple, float]:
    """The blind baseline's mean score per group, scored by the evaluator's own ``score_question``."""
    from pipeline.scoring.evaluate import score_questions

    if qa.is_empty():
        return {}
    qa = qa.with_columns(pl.col("video_kind").fill_null("real"))
    if "scene_id" not in qa.columns:  # a slim frame (the report's): the scorer names the scene in its rows
        qa = qa.with_columns(pl.col("key").alias("scene_id"))
    scored = score_questions(qa, blind_predictions(qa, seed), "harness", None)
    means = scored.group_by(list(by)).agg(pl.col("score").mean())
    return {tuple(r[c] for c in by): r["score"] for r in means.iter_rows(named=True)}
