"""Per-question metrics, task composites and the chance/frequency baselines (SPEC §6).

The numbers published with a release (stats, eval, the generated lmms-eval task)
must agree to the last digit, so the metric definitions live here once: MRA uses
the harnesses' ten thresholds and their ``<=`` comparison, composites are the
means lmms-eval's ``revsi`` task reports, and ``frequency_baseline`` is the one
function every reporter calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from pipeline import question_types
from pipeline.groups import sorted_groups
from pipeline.scoring.parsing import finite_float

# The harnesses build these with np.linspace(.5, .95, int((.95-.5)/.05 + 2)), which yields exactly ten values.
MRA_THRESHOLDS: np.ndarray = np.linspace(0.50, 0.95, 10)

# The type lists every reporter reads, taken from the one question-type table (pipeline/question_types.py).
REVSI_NQ_TYPES: tuple[str, ...] = question_types.names("revsi", "nq")
REVSI_MCQ_TYPES: tuple[str, ...] = question_types.names("revsi", "mcq")
VSIBENCH_NQ_TYPES: tuple[str, ...] = question_types.names("vsibench", "nq")
VSIBENCH_MCQ_TYPES: tuple[str, ...] = question_types.names("vsibench", "mcq")
PINPOINT_TYPES: tuple[str, ...] = question_types.names("pinpointqa")

# Task name -> the question types whose scores it averages (SPEC §6 composites).
COMPOSITES: dict[str, tuple[str, ...]] = question_types.composites()


def answer_kind(question_type: str, options: Sequence[str] | None = None) -> str:
    """How an answer of this type is read and scored: nq, mcq, yesno, ssp or fsd (``question_types.KINDS``); a
    type outside the table is multiple choice when it has options."""
    known = question_types.BY_NAME.get(question_type)
    if known is not None:
        return known.kind
    return "mcq" if options else "nq"


def task_of(question_type: str) -> str:
    """The reported task a question type contributes to (itself unless it is part of a composite)."""
    known = question_types.BY_NAME.get(question_type)
    return question_type if known is None else known.reported_task


def mean_relative_accuracy(prediction: float | None, target: float) -> float:
    """MRA over the ten thresholds; a zero target (counts on dummy videos) needs an exact 0.

    The harnesses divide by the target and so can never credit a zero ground truth;
    SPEC §2 gives dummy-video counting a ground truth of 0, which only an exact match can honour.
    """
    if prediction is None or not math.isfinite(prediction) or target is None or not math.isfinite(target):
        return 0.0
    if target == 0:
        return 1.0 if prediction == 0 else 0.0
    relative_error = abs(prediction - target) / abs(target)
    return float(np.mean(relative_error <= 1.0 - MRA_THRESHOLDS))


def mean_relative_accuracies(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``mean_relative_accuracy`` of each (prediction, target) pair, on arrays: nan scores 0, a zero target
    needs an exact 0 (the blind baseline scores millions of replies at once)."""
    scores = np.zeros(predictions.size)
    usable = np.isfinite(predictions) & np.isfinite(targets)
    zero = usable & (targets == 0)
    scores[zero] = (predictions[zero] == 0).astype(float)
    rest = usable & (targets != 0)
    error = np.abs(predictions[rest] - targets[rest]) / np.abs(targets[rest])
    scores[rest] = (error[:, None] <= (1.0 - MRA_THRESHOLDS)[None, :]).mean(axis=1)
    return scores


def expected_mra_uniform(target: float, low: float, high: float, integer: bool) -> float:
    """Expected MRA of a uniform random guess on [low, high] (integers only if ``integer``).

    This is the chance level of the random baseline for numeric questions, computed
    exactly instead of sampled so that the reported chance does not depend on a seed.
    """
    if target is None or not math.isfinite(target):
        return 0.0
    if integer:
        values = np.arange(math.ceil(low), math.floor(high) + 1, dtype=float)
        if values.size == 0:
            return 0.0
        return float(np.mean([mean_relative_accuracy(v, target) for v in values]))
    if high <= low:
        return mean_relative_accuracy(low, target)
    if target == 0:
        return 0.0
    total = 0.0
    for theta in MRA_THRESHOLDS:
        half_width = (1.0 - theta) * abs(target)
        overlap = min(high, target + half_width) - max(low, target - half_width)
        total += max(overlap, 0.0) / (high - low)
    return total / len(MRA_THRESHOLDS)


def mean_or_none(values: Iterable[float | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return sum(present) / len(present) if present else None


def task_scores(type_scores: dict[str, float | None]) -> dict[str, float | None]:
    """Collapse per-type scores into task scores; composites average the types present."""
    grouped: dict[str, list[float | None]] = {}
    for question_type in sorted(type_scores):
        grouped.setdefault(task_of(question_type), []).append(type_scores[question_type])
    return {task: mean_or_none(values) for task, values in sorted(grouped.items())}


def overall_score(tasks: dict[str, float | None]) -> float | None:
    """Mean of the task scores that could be computed (an unscored FSD task is left out)."""
    return mean_or_none(tasks.values())


def _number_or_nan(text: str) -> float:
    value = finite_float(text)
    return math.nan if value is None else value


def _mode_answer(answers: list[str], numeric: bool) -> str:
    """Most frequent answer; ties go to the smallest value so the choice never depends on row order."""
    counts: dict[str, int] = {}
    for answer in answers:
        counts[answer] = counts.get(answer, 0) + 1

    def tie_key(answer: str):
        number = finite_float(answer) if numeric else None
        return (-counts[answer], number if number is not None else math.inf, answer)

    return min(counts, key=tie_key)


def score_constant_answer(question_type: str, answer: str, ground_truths: Sequence[str]) -> float | None:
    """Score of always giving ``answer`` to every question of a type (None where not machine-scorable).

    Each distinct ground truth is scored once (a type of a large benchmark
    repeats a few hundred answers over millions of questions); the mean is
    still taken over every question, in order, so the number is the same.
    """
    kind = answer_kind(question_type)
    if not ground_truths:
        return None
    if kind == "nq":
        guess = finite_float(answer)
        score = lambda gt: mean_relative_accuracy(guess, _number_or_nan(gt))  # noqa: E731
    elif kind in ("mcq", "yesno"):
        wanted = answer.strip().lower()
        score = lambda gt: wanted == gt.strip().lower()  # noqa: E731
    elif kind == "ssp":
        from pipeline.scoring.ssp import ssp_score

        score = lambda gt: ssp_score(answer, gt)  # noqa: E731
    else:
        return None  # fsd needs the judge
    scores = {gt: score(gt) for gt in set(ground_truths)}
    return float(np.mean([scores[gt] for gt in ground_truths]))


DEFAULT_BASELINE_GROUPS: tuple[str, ...] = ("profile", "budget", "video_kind", "question_type")


def frequency_baseline(qa_df: pl.DataFrame, by: Sequence[str] = DEFAULT_BASELINE_GROUPS) -> pl.DataFrame:
    """The frequency baseline: always answer the most frequent ground truth of the group.

    For numeric types the answer is the mode of the ground-truth strings, scored with
    MRA; for choices it is the most frequent letter (or Yes/No), scored by accuracy.
    Free-form descriptions have no machine score and get ``score = null``. Groups are
    ``by`` (the columns of it that the frame has), so stats and eval agree when they
    pass the same grouping. Returns one row per group: the ``by`` columns, ``answer``,
    ``score`` and ``questions``.
    """
    keys = [c for c in by if c in qa_df.columns]
    if "video_kind" in keys:
        qa_df = qa_df.with_columns(pl.col("video_kind").fill_null("real"))
    if "question_type" not in keys:
        raise ValueError("frequency_baseline needs question_type among the grouping columns")
    rows = []
    if qa_df.height:
        # Only the columns read here are sorted: a benchmark's question texts and geometry are gigabytes.
        qa_df = qa_df.select(list(dict.fromkeys([*keys, "id", "ground_truth"])))
        # One group at a time (``sorted_groups``): sorting the rows and splitting them into every group at once
        # held the table three times over, the release's peak at 10,000 scans.
        for group_key, group in sorted_groups(qa_df, keys, order=("id",)):
            group_values = dict(zip(keys, group_key))
            question_type = group_values["question_type"]
            ground_truths = group["ground_truth"].to_list()
            numeric = answer_kind(question_type) == "nq"
            answer = _mode_answer(ground_truths, numeric)
            rows.append(
                {
                    **group_values,
                    "answer": answer,
                    "score": score_constant_answer(question_type, answer, ground_truths),
                    "questions": len(ground_truths),
                }
            )
    schema = {k: pl.String for k in keys} | {"answer": pl.String, "score": pl.Float64, "questions": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def numeric_answer_range(ground_truths: Sequence[str]) -> tuple[float, float, bool]:
    """(low, high, integer) of a type's numeric answers: the range random guesses are drawn from."""
    values = [v for v in (finite_float(gt) for gt in ground_truths) if v is not None]
    if not values:
        return 0.0, 0.0, True
    integer = all(float(v).is_integer() for v in values)
    return min(values), max(values), integer


def chance_score(question_type: str, ground_truths: Sequence[str], options: Sequence[Sequence[str]]) -> float | None:
    """Expected score of the random baseline for one group of questions of a type.

    MCQ: mean of 1/len(options); yes/no: 1/2; numeric: the exact expected MRA of a
    uniform draw from the type's answer range; SSP and FSD: 0, since a guess carries
    no localisation (and the random baseline file leaves them empty, which scores 0).
    """
    kind = answer_kind(question_type)
    if not ground_truths:
        return None
    if kind == "mcq":
        return chance_of_choices(np.asarray([len(opts) for opts in options], dtype=np.int64))
    if kind == "yesno":
        return 0.5
    if kind == "nq":
        low, high, integer = numeric_answer_range(ground_truths)
        return float(
            np.mean([expected_mra_uniform(_number_or_nan(gt), low, high, integer) for gt in ground_truths])
        )
    return 0.0


def choice_chances(option_counts: np.ndarray) -> np.ndarray:
    """Each multiple-choice question's chance of a random letter: 1/options, 0 without options."""
    return np.where(option_counts > 0, 1.0 / np.maximum(option_counts, 1), 0.0)


def chance_of_choices(option_counts: np.ndarray, rows: np.ndarray | None = None) -> float:
    """The random baseline of multiple-choice questions with these option counts (of ``rows`` only, if given)."""
    return float(np.mean(choice_chances(option_counts if rows is None else option_counts[rows])))


# Dummy-video probes (ReVSI Tables 5-6): what each task is called and how it reads there.
# Counting on a dummy video has one right answer, 0, and is scored by exact match; object size on a
# black video keeps the real answer and is scored with MRA, where *lower* means less hallucination.
DUMMY_METRICS: dict[str, str] = {
    "object_counting": "object_counting_exact_match",
    "object_size_estimation": "object_size_estimation_mra",
}
DUMMY_LOWER_IS_BETTER: frozenset[str] = frozenset({"object_size_estimation_mra"})


def dummy_metric_scores(task_scores_: dict[str, float | None]) -> dict[str, float | None]:
    """A dummy-video group's task scores under the probe metric names (tasks without one are left out)."""
    return {DUMMY_METRICS[t]: v for t, v in sorted(task_scores_.items()) if t in DUMMY_METRICS}


def real_answer_pools(qa_df: pl.DataFrame) -> dict[tuple[str, str, str], list[str]]:
    """Ground truths of real-video questions per (profile, budget, type), sorted: what a dummy row's guess is drawn from.

    The random baseline on a dummy video must guess like a model that knows the
    real answers' distribution but sees nothing; a uniform draw over the dummy
    group's own range would answer 0 to every counting question (its only value).
    """
    real = qa_df.filter(pl.col("video_kind").fill_null("real") == "real").select("profile", "budget", "question_type", "ground_truth")
    pools: dict[tuple[str, str, str], list[str]] = {}
    for (profile, budget, question_type), group in real.group_by(["profile", "budget", "question_type"]):
        pools[(profile, budget, question_type)] = sorted(group["ground_truth"].to_list())
    return pools


def pool_for(pools: dict[tuple[str, str, str], list[str]], profile: str, budget: str, question_type: str) -> list[str]:
    """The pool of the same profile, budget and type, else of the same profile and type at any budget."""
    found = pools.get((profile, budget, question_type))
    if found:
        return found
    merged = [a for (p, _, t), answers in sorted(pools.items()) if p == profile and t == question_type for a in answers]
    return sorted(merged)


def pool_chance(question_type: str, ground_truths: Sequence[str], pool: Sequence[str]) -> float | None:
    """Expected score of a guess drawn uniformly from ``pool`` (with repetition), over ``ground_truths``."""
    if not ground_truths or not pool:
        return None
    counts: dict[str, int] = {}
    for answer in pool:
        counts[answer] = counts.get(answer, 0) + 1
    total = float(len(pool))
    per_truth = {
        gt: sum(n * (score_constant_answer(question_type, a, [gt]) or 0.0) for a, n in counts.items()) / total
        for gt in set(ground_truths)
    }
    return float(np.mean([per_truth[gt] for gt in ground_truths]))
