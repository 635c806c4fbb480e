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

import hashlib
import math

import numpy as np
import polars as pl

from pipeline.groups import sorted_groups
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


def _option_text(option: pl.Expr) -> pl.Expr:
    """``_text`` as a polars expression."""
    parts = option.str.splitn(". ", 2)
    head, rest = parts.struct.field("field_0"), parts.struct.field("field_1")
    return pl.when(rest.is_not_null() & (rest != "") & (head.str.len_chars() == 1)).then(rest).otherwise(option)


def _correct_text(options: list[str], letter: str) -> str:
    for option in options:
        if option.startswith(f"{letter}. "):
            return _text(option)
    return letter


def scene_folds(keys: list[str], seed: int = 0, folds: int = FOLDS) -> dict[str, int]:
    """Each scene's fold (a seeded hash of its key, so a scene's fold never depends on the others)."""
    distinct = sorted(set(keys))
    return {k: stable_int(seed, "blind/fold", k) % folds for k in distinct}


class BlindGroup:
    """One (profile, budget, type) group, read once, answered blind for any subset of it.

    The answer-distribution control asks for the blind score of a shrinking subset of each type dozens of
    times, and a type holds tens of thousands of questions at 10,000 scans; so everything that depends on a
    question alone (option texts, letters, the no-prior guess, the ground truth) is worked out here once, and
    each subset costs array arithmetic: option-text counts per fold, and the best constant per question text,
    kept between calls for every text whose questions did not change.
    """

    def __init__(self, group: pl.DataFrame, seed: int = 0, folds: int = FOLDS):
        rows = group.select("id", "key", "question", "options", "ground_truth", "video_kind")
        self.ids = rows["id"].to_list()
        self.size = len(self.ids)
        fold_of = scene_folds(rows["key"].to_list(), seed, folds)
        self.fold = np.asarray([fold_of[k] for k in rows["key"].to_list()], dtype=np.int64)
        self.folds = sorted(set(self.fold.tolist()))
        self.real = (rows["video_kind"].fill_null("real") == "real").to_numpy()
        offered = rows["options"].filter(rows["options"].list.len().fill_null(0) > 0)
        self.truths = rows["ground_truth"].to_list()
        question_type = group["question_type"][0] if "question_type" in group.columns and self.size else ""
        self.kind = metrics.answer_kind(question_type, offered[0].to_list() if offered.len() else None)
        if self.kind == "mcq":
            self._read_choices(rows["options"])
        elif self.kind == "nq":
            self._read_numbers(rows["question"].to_list())
        elif self.kind == "yesno":
            self.yes = np.asarray([t.strip().lower() == "yes" for t in self.truths], dtype=bool)

    # --- multiple choice ---------------------------------------------------------------------------------------

    def _read_choices(self, options: pl.Series) -> None:
        # Per option, in polars: its text (``_text``), its letter (``option_letters``) and whether it is the
        # correct option's (``_correct_text``); Python only for what a row needs as a list.
        frame = pl.DataFrame({"row": np.arange(self.size), "option": options, "truth": self.truths})
        each = (
            frame.explode("option").drop_nulls("option")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("row").alias("slot"))
            .with_columns(_option_text(pl.col("option")).alias("text"),
                          pl.col("option").str.extract(r"^\s*([A-Za-z])[.)]", 1).str.to_uppercase().alias("letter"))
        )
        width = int(each["slot"].max() or 0) + 1
        rows, slots = each["row"].to_numpy(), each["slot"].to_numpy()
        first_right = (
            each.filter(pl.col("option").str.starts_with(pl.col("truth") + ". "))
            .group_by("row").agg(pl.col("text").first())
        )
        right_text = frame.join(first_right, on="row", how="left").sort("row").select(
            pl.col("text").fill_null(pl.col("truth"))
        ).to_series()
        vocabulary, inverse = np.unique(
            pl.concat([each["text"], right_text]).to_numpy().astype(str), return_inverse=True
        )
        self.vocabulary = max(len(vocabulary), 1)
        self.codes = np.full((self.size, width), -1, dtype=np.int64)
        self.codes[rows, slots] = inverse[: each.height]
        self.right_code = inverse[each.height:]
        # Every option whose text is the correct one counts as right (two options may share a text).
        self.right_slots = (self.codes == self.right_code[:, None]).sum(axis=1)
        self.chance = metrics.choice_chances(options.list.len().fill_null(0).to_numpy())
        self.texts = frame.select("row").join(
            each.group_by("row").agg("text"), on="row", how="left"
        ).sort("row")["text"].to_list()
        matched = frame.select("row").join(
            each.drop_nulls("letter").group_by("row").agg("letter"), on="row", how="left"
        ).sort("row")["letter"].to_list()
        self.letters = [found if found else ["A", "B", "C", "D"] for found in matched]
        self.right_letter = np.zeros(self.codes.shape, dtype=bool)  # the slot's letter is the ground truth's
        for row, (letters, truth) in enumerate(zip(self.letters, self.truths)):
            wanted = str(truth).strip().lower()
            for slot, letter in enumerate(letters[:width]):
                self.right_letter[row, slot] = letter.lower() == wanted
        self.guess = np.full(self.size, -1, dtype=np.int64)  # drawn when first needed (``_guesses``)

    def _guesses(self, rows: np.ndarray) -> np.ndarray:
        """A guesser without a prior: the option whose text, with the question id, hashes lowest."""
        for row in rows[self.guess[rows] < 0]:
            qid, texts = self.ids[row], self.texts[row]
            self.guess[row] = min(range(len(texts)), key=lambda i: stable_int("blind/guess", qid, texts[i]))
        return self.guess[rows]

    def _choice_counts(self, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes = self.codes[train]
        appear = np.bincount(codes[codes >= 0], minlength=self.vocabulary)
        correct = np.bincount(self.right_code[train], weights=self.right_slots[train], minlength=self.vocabulary)
        return appear, correct

    def _choices(self, keep: np.ndarray) -> np.ndarray:
        """The option index each kept row picks (-1: the row has no options), the prior fitted on the kept rows."""
        picks = np.full(self.size, -1, dtype=np.int64)
        training = keep & self.real
        total_appear, total_correct = self._choice_counts(training)
        for fold in self.folds:
            rows = np.flatnonzero(keep & (self.fold == fold))
            if rows.size == 0:
                continue
            appear_in, correct_in = self._choice_counts(training & (self.fold == fold))
            appear, correct = total_appear - appear_in, total_correct - correct_in
            codes = self.codes[rows]
            valid = codes >= 0
            safe = np.where(valid, codes, 0)
            chance = self.chance[rows][:, None]
            rates = np.where(valid, (correct[safe] + SMOOTHING * chance) / (appear[safe] + SMOOTHING), -np.inf)
            best = np.argmax(rates, axis=1)  # the first of equal rates, as the lowest letter
            seen = appear[safe[np.arange(rows.size), best]].astype(float)
            rate = rates[np.arange(rows.size), best]
            chance = chance[:, 0]
            with np.errstate(divide="ignore", invalid="ignore"):
                margin = EVIDENCE * np.sqrt(chance * (1 - chance) / seen)
            # Only a text the training scenes show to be right more often than chance is a prior; otherwise
            # argmax over noise picks what the *other* folds lack, which on a balanced type is what this fold
            # has in excess, and scores below chance. Then the guess is a letter drawn from the question id.
            no_prior = (seen == 0) | (rate - chance <= margin)
            has_options = valid.any(axis=1)
            picks[rows] = np.where(has_options, best, -1)
            guessed = rows[no_prior & has_options]
            picks[guessed] = self._guesses(guessed)
        return picks

    # --- numbers -------------------------------------------------------------------------------------------------

    def _read_numbers(self, questions: list[str]) -> None:
        self.values = np.asarray([math.nan if (v := finite_float(t)) is None else v for t in self.truths], dtype=float)
        self.finite = np.isfinite(self.values)
        texts, self.text_code = np.unique(np.asarray(questions, dtype=object).astype(str), return_inverse=True)
        order = np.argsort(self.text_code, kind="stable")
        bounds = np.searchsorted(self.text_code[order], np.arange(len(texts) + 1))
        self.rows_of_text = [order[bounds[i]:bounds[i + 1]] for i in range(len(texts))]
        self._constants: dict[tuple, float | None] = {}  # (text, fold) -> answer, while its training rows hold

    def _constant(self, rows: np.ndarray) -> float | None:
        found = best_constant(self.values[rows])
        return found[1] if found else None

    def _numbers(self, keep: np.ndarray) -> np.ndarray:
        """The number each kept row is given (nan: no answer), the prior fitted on the kept rows."""
        out = np.full(self.size, math.nan)
        training = keep & self.real & self.finite
        for fold in self.folds:
            in_fold = keep & (self.fold == fold)
            if not in_fold.any():
                continue
            fallback: list = []  # the best constant of the whole type, worked out when a text needs it
            for text in np.unique(self.text_code[in_fold]):
                rows = self.rows_of_text[text]
                same = rows[training[rows] & (self.fold[rows] != fold)]
                value = None
                if same.size >= MIN_TEXT_EXAMPLES:
                    signature = (int(text), fold, hashlib.blake2b(same.tobytes(), digest_size=16).digest())
                    if signature not in self._constants:
                        self._constants[signature] = self._constant(same)
                    value = self._constants[signature]
                if value is None:
                    if not fallback:
                        fallback.append(self._constant(np.flatnonzero(training & (self.fold != fold))))
                    value = fallback[0]
                if value is not None and math.isfinite(value):
                    out[rows[in_fold[rows]]] = float(f"{value:.6g}")  # what the reply says, read back
        return out

    # --- answers and scores --------------------------------------------------------------------------------------

    def _mask(self, keep: np.ndarray | None) -> np.ndarray:
        return np.ones(self.size, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)

    def replies(self, keep: np.ndarray | None = None) -> dict[str, str]:
        """id -> the blind guess of every kept question, each fold answered by a prior fitted on the others."""
        keep = self._mask(keep)
        rows = np.flatnonzero(keep)
        if self.kind == "mcq":
            picks = self._choices(keep)
            return {self.ids[r]: (self.letters[r][picks[r]] if picks[r] >= 0 else "") for r in rows}
        if self.kind == "nq":
            numbers = self._numbers(keep)
            return {self.ids[r]: ("" if math.isnan(numbers[r]) else f"{numbers[r]:.6g}") for r in rows}
        if self.kind == "yesno":
            return {self.ids[r]: reply for r, reply in zip(rows, self._yes_no(keep)[rows])}
        return {self.ids[r]: "" for r in rows}

    def _yes_no(self, keep: np.ndarray) -> np.ndarray:
        training = keep & self.real
        out = np.full(self.size, "", dtype=object)
        for fold in self.folds:
            train = training & (self.fold != fold)
            out[self.fold == fold] = "Yes" if 2 * int(self.yes[train].sum()) > int(train.sum()) else "No"
        return out

    def harness_scores(self, keep: np.ndarray) -> np.ndarray:
        """The harness score of each kept question's blind reply (multiple choice and numbers), in row order.

        The same figures as ``score_question`` of ``replies`` (a letter scores when it is the ground truth's;
        a number by MRA against the ground truth), computed on arrays.
        """
        keep = self._mask(keep)
        if self.kind == "mcq":
            rows = np.flatnonzero(keep)
            picks = self._choices(keep)[rows]
            return np.where(picks >= 0, self.right_letter[rows, np.maximum(picks, 0)], False).astype(float)
        if self.kind == "nq":
            return metrics.mean_relative_accuracies(self._numbers(keep)[keep], self.values[keep])
        raise ValueError(f"no array scoring for answer kind {self.kind!r}")


def blind_predictions(qa: pl.DataFrame, seed: int = 0, folds: int = FOLDS) -> dict[str, str]:
    """id -> the blind guess, each scene answered by a prior fitted on the other folds' scenes."""
    if qa.is_empty():
        return {}
    out: dict[str, str] = {}
    for _, group in qa.sort("id").group_by(["profile", "budget", "question_type"], maintain_order=True):
        out.update(BlindGroup(group, seed, folds).replies())
    return out


def blind_scores(
    qa: pl.DataFrame, seed: int = 0, by=("profile", "budget", "video_kind", "question_type"), where: pl.Expr | None = None
) -> dict[tuple, float]:
    """The blind baseline's mean score per group, as the evaluator's ``score_question`` scores its replies.

    Choices and numbers are scored on arrays (``BlindGroup.harness_scores``, the same figures); the other
    kinds go through the evaluator itself.
    """
    from pipeline.scoring.evaluate import score_questions

    if not {"profile", "budget", "question_type"} <= set(by):
        raise ValueError(f"blind_scores groups within profile, budget and question type; by={by!r} is coarser")
    if qa.is_empty():
        return {}
    qa = qa.with_columns(pl.col("video_kind").fill_null("real"))
    scored = []
    for _, group in sorted_groups(qa, ["profile", "budget", "question_type"], where=where):
        if "scene_id" not in group.columns:  # a slim frame (the report's): the scorer names the scene in its rows
            group = group.with_columns(pl.col("key").alias("scene_id"))
        blind = BlindGroup(group, seed)
        if blind.kind in ("mcq", "nq"):
            scores = pl.Series("score", blind.harness_scores(np.ones(group.height, dtype=bool)))
            rows = group.select(*by).with_columns(scores)
        else:
            rows = score_questions(group, blind.replies(), "harness", None).select(*by, pl.col("score").cast(pl.Float64))
        # Each group of ``by`` lies inside one of these groups: its mean is taken here, so only a few numbers per
        # group are kept (a row per question, kept to the end, was gigabytes at 10,000 scans).
        scored.append(rows.group_by(list(by)).agg(pl.col("score").mean()))
    means = pl.concat(scored)
    return {tuple(r[c] for c in by): r["score"] for r in means.iter_rows(named=True)}
