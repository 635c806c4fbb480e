"""``scan2qa baseline``: write baseline predictions that go through the same scorer as models.

Kinds:
- ``random``: a uniform option letter for choices, Yes/No at even odds for
  presence, and for numeric questions a uniform draw from the answer range of
  the question's type (integers when every answer of the type is an integer);
  on a dummy video a numeric guess is one of the real-video answers of its
  profile, budget and type drawn uniformly (counting: ReVSI scores 0 by exact
  match, so a guess from the dummy group's own range, always 0, would be
  perfect); nothing for SSP/FSD, which have no chance level.
- ``frequency``: the most frequent ground truth of the question's type within
  its profile, budget and video kind (``metrics.frequency_baseline``), so the
  scored file reproduces the frequency baseline the evaluator reports.
- ``blind``: answers from the question text and options alone, with a prior
  fitted on the other scenes (cross-validated by scene; ``pipeline.scoring.blind``),
  the "vision disabled" model VSI-Bench measured; ``scan2qa stats`` and the
  report show the same score per type.
- ``black``: what a model that sees nothing would say: "0" for every numeric
  question (counts, sizes, distances), "A" for every multiple-choice question,
  "No" for presence, nothing for SSP/FSD.

Random draws come from ``pipeline.seeding.rng(seed, "baseline", question id)``,
so a question's guess does not change when other questions are added.
"""

from __future__ import annotations

import argparse
import sys

import polars as pl

from pipeline.scoring import metrics
from pipeline.scoring.evaluate import write_predictions
from pipeline.scoring.parsing import option_letters
from pipeline.scoring.release import add_release_argument, load_release
from pipeline.seeding import rng

KINDS: tuple[str, ...] = ("random", "frequency", "black", "blind")
_GROUP = ("profile", "budget", "video_kind", "question_type")


def _with_kind(qa: pl.DataFrame) -> pl.DataFrame:
    return qa.with_columns(pl.col("video_kind").fill_null("real"))


def random_predictions(qa: pl.DataFrame, seed: int = 0) -> dict[str, str]:
    qa = _with_kind(qa)
    ranges = {}
    for key, group in qa.group_by(list(_GROUP)):
        if metrics.answer_kind(key[3]) == "nq":
            ranges[key] = metrics.numeric_answer_range(group["ground_truth"].to_list())
    pools = metrics.real_answer_pools(qa)
    out = {}
    for row in qa.iter_rows(named=True):
        kind = metrics.answer_kind(row["question_type"], row["options"])
        gen = rng(seed, "baseline", "random", row["id"])
        if kind == "nq" and row["video_kind"] != "real":
            pool = metrics.pool_for(pools, row["profile"], row["budget"], row["question_type"])
            if pool:  # a dummy video: guess like a model that knows the real answers but sees nothing
                out[row["id"]] = pool[int(gen.integers(len(pool)))]
                continue
        if kind == "mcq":
            letters = option_letters(row["options"])
            out[row["id"]] = letters[int(gen.integers(len(letters)))]
        elif kind == "yesno":
            out[row["id"]] = "Yes" if gen.random() < 0.5 else "No"
        elif kind == "nq":
            low, high, integer = ranges[tuple(row[c] for c in _GROUP)]
            if integer:
                out[row["id"]] = str(int(gen.integers(int(low), int(high) + 1)))
            else:
                out[row["id"]] = f"{gen.uniform(low, high):.6g}"
        else:
            out[row["id"]] = ""
    return out


def frequency_predictions(qa: pl.DataFrame) -> dict[str, str]:
    qa = _with_kind(qa)
    answers = {
        tuple(r[c] for c in _GROUP): r["answer"] for r in metrics.frequency_baseline(qa, _GROUP).iter_rows(named=True)
    }
    return {row["id"]: answers[tuple(row[c] for c in _GROUP)] for row in qa.iter_rows(named=True)}


def black_predictions(qa: pl.DataFrame) -> dict[str, str]:
    constant = {"nq": "0", "mcq": "A", "yesno": "No"}
    return {
        row["id"]: constant.get(metrics.answer_kind(row["question_type"], row["options"]), "")
        for row in qa.iter_rows(named=True)
    }


def baseline_predictions(qa: pl.DataFrame, kind: str, seed: int = 0) -> dict[str, str]:
    if kind == "random":
        return random_predictions(qa, seed)
    if kind == "frequency":
        return frequency_predictions(qa)
    if kind == "black":
        return black_predictions(qa)
    if kind == "blind":
        from pipeline.scoring.blind import blind_predictions

        return blind_predictions(qa)
    raise ValueError(f"unknown baseline kind {kind!r}; choose one of {KINDS}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=KINDS, required=True)
    add_release_argument(parser, "release folder holding tables/qa.parquet")
    parser.add_argument("--out", required=True, help="predictions file to write (JSONL)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random baseline")


def run(args: argparse.Namespace) -> int:
    release = load_release(args.release)
    predictions = baseline_predictions(release.qa, args.kind, args.seed)
    write_predictions(args.out, predictions)
    print(f"wrote {len(predictions)} {args.kind} predictions to {args.out}", file=sys.stderr)
    return 0
