"""Score a predictions file against a release (SPEC §6).

Questions are grouped the way harnesses report them: one group per profile,
frame budget and video kind (real videos vs. each dummy kind), because a
16-frame score and a 64-frame score are different benchmarks. Within a group:
per-type scores, the SPEC's composite tasks, the overall mean of the task scores
(PinpointQA: micro and macro), and the random and frequency baselines computed
on exactly the same questions, so every model score sits next to its chance
level. The release's ``overall`` is the mean of the real-video groups' overall
scores; dummy-video groups are diagnostics and are reported separately.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from pipeline.errors import ScanError
from pipeline.frames.budgets import budget_sort_key
from pipeline.scoring import metrics
from pipeline.scoring.judge import FsdJudge, JudgeError
from pipeline.scoring.parsing import matches_choice, parse_reply
from pipeline.scoring.release import load_release
from pipeline.scoring.ssp import ssp_breakdown

PINPOINT_PROFILE = "pinpointqa"
FSD_NOT_SCORED = "FSD (free_form_localization) not scored: no judge endpoint configured; excluded from averages"


def _lmms_eval_sample(record: dict) -> tuple[str, object] | None:
    """(id, reply) of an lmms-eval ``--log_samples`` record of an exported task, else None."""
    doc = record.get("doc")
    if not isinstance(doc, dict) or "id" not in doc:
        return None
    reply = record.get("filtered_resps", record.get("resps"))
    while isinstance(reply, list):
        reply = reply[0] if reply else ""
    return str(doc["id"]), reply


def load_predictions(path: str | Path) -> dict[str, str]:
    """Read JSONL ``{"id": ..., "prediction": ...}``; a repeated id is an error naming both lines.

    Which of two answers to score is not ours to guess (a rerun appended to an old file, a merge gone wrong).

    lmms-eval ``--log_samples`` files of an exported task are read too (the doc's ``id`` and its first
    filtered response), so a harness run can be rescored here, e.g. in robust mode, without conversion.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"predictions file not found: {path}")
    predictions: dict[str, str] = {}
    first_line: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise ScanError("predictions", str(path), f"line {number}: not valid JSON") from None
            sample = _lmms_eval_sample(record) if isinstance(record, dict) else None
            if sample is None and (not isinstance(record, dict) or "id" not in record or "prediction" not in record):
                raise ScanError("predictions", str(path), f"line {number}: expected an object with id and prediction")
            qid, prediction = sample if sample is not None else (str(record["id"]), record["prediction"])
            if qid in first_line:
                raise ScanError("predictions", str(path),
                                f"line {number}: id {qid} already predicted on line {first_line[qid]}")
            first_line[qid] = number
            predictions[qid] = "" if prediction is None else str(prediction)
    return predictions


def write_predictions(path: str | Path, predictions: Mapping[str, str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for qid in sorted(predictions):
            fh.write(json.dumps({"id": qid, "prediction": predictions[qid]}, ensure_ascii=False) + "\n")


def score_question(row: Mapping, reply: str | None, mode: str, judge: FsdJudge | None) -> dict:
    """Score one reply: ``score`` (None only for an FSD item nobody judged), ``parse_ok``, ``missing``."""
    question_type = row["question_type"]
    kind = metrics.answer_kind(question_type, row.get("options"))
    missing = reply is None
    text = "" if reply is None else reply
    out = {"kind": kind, "missing": missing, "parse_ok": False, "score": 0.0, "parsed": None, "judged": False}
    if kind in ("nq", "mcq", "yesno"):
        parsed = parse_reply(text, kind, mode, row.get("options"), question_type)
        out["parse_ok"], out["parsed"] = parsed.ok, None if parsed.value is None else str(parsed.value)
        if kind == "nq":
            try:
                truth = float(row["ground_truth"])
            except (TypeError, ValueError):
                raise ScanError(
                    row["key"], "tables/qa.parquet", f"question {row['id']}: ground truth {row['ground_truth']!r} is not a number"
                ) from None
            value = parsed.value if isinstance(parsed.value, float) else None
            out["score"] = metrics.mean_relative_accuracy(value, truth)
        else:
            out["score"] = 1.0 if matches_choice(parsed, row["ground_truth"]) else 0.0
    elif kind == "ssp":
        breakdown = ssp_breakdown(text, row["ground_truth"])
        out["parse_ok"], out["score"] = breakdown.parsed, breakdown.score
    elif kind == "fsd":
        out["parse_ok"] = bool(text.strip())
        if not text.strip():
            out["score"] = 0.0  # nothing to judge: wrong, without spending a request
        elif judge is None:
            out["score"] = None
        else:
            judgment = judge.judge(row["id"], row["question"], row["ground_truth"], text)
            out["score"] = None if judgment is None else judgment.normalized
            out["judged"] = judgment is not None
    return out


def score_questions(
    qa: pl.DataFrame, predictions: Mapping[str, str], mode: str, judge: FsdJudge | None
) -> pl.DataFrame:
    """One row per question with its score; the input of every aggregate."""
    rows = []
    for row in qa.sort("id").iter_rows(named=True):
        scored = score_question(row, predictions.get(row["id"]), mode, judge)
        rows.append(
            {
                "id": row["id"],
                "profile": row["profile"],
                "budget": row["budget"],
                "video_kind": row["video_kind"] or "real",
                "scene_id": row["scene_id"],
                "question_type": row["question_type"],
                "task": metrics.task_of(row["question_type"]),
                "kind": scored["kind"],
                "missing": scored["missing"],
                "parse_ok": scored["parse_ok"],
                "parsed": scored["parsed"],
                "score": scored["score"],
            }
        )
    schema = {
        "id": pl.String,
        "profile": pl.String,
        "budget": pl.String,
        "video_kind": pl.String,
        "scene_id": pl.String,
        "question_type": pl.String,
        "task": pl.String,
        "kind": pl.String,
        "missing": pl.Boolean,
        "parse_ok": pl.Boolean,
        "parsed": pl.String,
        "score": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _budget_order(budget: str) -> tuple:
    return budget_sort_key(budget)


def group_name(profile: str, budget: str, video_kind: str) -> str:
    name = f"{profile}/{budget}_frame"
    return name if video_kind == "real" else f"{name}/{video_kind}"


def _type_entry(
    scored: pl.DataFrame, qa: pl.DataFrame, freq: Mapping[str, dict], fsd_scored: bool, pool: list[str] | None = None
) -> dict:
    question_type = scored["question_type"][0]
    kind = scored["kind"][0]
    present = scored.filter(~pl.col("missing"))
    values = scored["score"].to_list()
    if kind == "fsd" and not fsd_scored:
        score, not_judged = None, scored.height
    else:
        score = metrics.mean_or_none(values)
        not_judged = sum(v is None for v in values)
    truths = qa["ground_truth"].to_list()
    chance = metrics.chance_score(question_type, truths, qa["options"].to_list())
    if pool and kind == "nq":
        chance = metrics.pool_chance(question_type, truths, pool)  # dummy video: guesses drawn from the real answers
    if kind == "fsd" and not fsd_scored:
        chance = None
    return {
        "kind": kind,
        "score": score,
        "questions": scored.height,
        "missing": scored.height - present.height,
        "parse_failures": int((~present["parse_ok"]).sum()),
        "not_judged": not_judged,
        "chance": chance,
        "frequency": freq.get(question_type, {}).get("score"),
        "frequency_answer": freq.get(question_type, {}).get("answer"),
    }


def _pinpoint_macro(scored: pl.DataFrame, tasks: list[str], fsd_scored: bool) -> dict[str, float | None]:
    macro = {}
    for task in tasks:
        rows = scored.filter(pl.col("question_type") == task)
        if task == "free_form_localization" and not fsd_scored:
            macro[task] = None
            continue
        per_scene = [
            metrics.mean_or_none(group["score"].to_list())
            for _, group in rows.group_by("scene_id", maintain_order=True)
        ]
        macro[task] = metrics.mean_or_none(per_scene)
    return macro


def summarize_group(
    scored: pl.DataFrame, qa: pl.DataFrame, fsd_scored: bool, pools: Mapping[tuple[str, str, str], list[str]] | None = None
) -> dict:
    """One group's scores; ``pools`` (``metrics.real_answer_pools``) are where a dummy group's random guesses come from."""
    profile, budget, video_kind = scored["profile"][0], scored["budget"][0], scored["video_kind"][0]
    freq_rows = metrics.frequency_baseline(qa.with_columns(pl.col("video_kind").fill_null("real")))
    freq = {r["question_type"]: r for r in freq_rows.iter_rows(named=True)}
    types = {}
    for question_type in sorted(scored["question_type"].unique().to_list()):
        types[question_type] = _type_entry(
            scored.filter(pl.col("question_type") == question_type),
            qa.filter(pl.col("question_type") == question_type),
            freq,
            fsd_scored,
            metrics.pool_for(dict(pools or {}), profile, budget, question_type) if video_kind != "real" else None,
        )
    tasks = metrics.task_scores({qt: e["score"] for qt, e in types.items()})
    random_tasks = metrics.task_scores({qt: e["chance"] for qt, e in types.items()})
    frequency_tasks = metrics.task_scores({qt: e["frequency"] for qt, e in types.items()})
    group = {
        "name": group_name(profile, budget, video_kind),
        "profile": profile,
        "budget": budget,
        "video_kind": video_kind,
        "questions": scored.height,
        "missing": int(scored["missing"].sum()),
        "parse_failures": sum(e["parse_failures"] for e in types.values()),
        "types": types,
        "tasks": tasks,
        "overall": metrics.overall_score(tasks),
        "baselines": {
            "random": {"tasks": random_tasks, "overall": metrics.overall_score(random_tasks)},
            "frequency": {"tasks": frequency_tasks, "overall": metrics.overall_score(frequency_tasks)},
        },
    }
    if video_kind != "real":
        # ReVSI Tables 5-6 names: exact match of 0 for counting, MRA (lower is better) for size on black videos.
        group["dummy_metrics"] = metrics.dummy_metric_scores(tasks)
        group["lower_is_better"] = sorted(set(group["dummy_metrics"]) & metrics.DUMMY_LOWER_IS_BETTER)
        for name in ("random", "frequency"):
            group["baselines"][name]["dummy_metrics"] = metrics.dummy_metric_scores(group["baselines"][name]["tasks"])
        if group["lower_is_better"]:
            # A mean of a higher-is-better and a lower-is-better probe means nothing: the probes stand alone.
            group["overall"] = None
            for name in ("random", "frequency"):
                group["baselines"][name]["overall"] = None
    if profile == PINPOINT_PROFILE:
        macro = _pinpoint_macro(scored, sorted(tasks), fsd_scored)
        group["micro"] = tasks
        group["macro"] = macro
        group["avg_micro"] = metrics.overall_score(tasks)
        group["avg_macro"] = metrics.overall_score(macro)
    return group


def evaluate(
    qa: pl.DataFrame, predictions: Mapping[str, str], mode: str = "harness", judge: FsdJudge | None = None
) -> dict:
    """The full score report (a JSON-ready dict) for predictions on a qa table."""
    notes: list[str] = []
    if mode not in ("harness", "robust"):
        raise ValueError(f"unknown parsing mode {mode!r}")
    has_fsd = qa.height > 0 and (qa["question_type"] == "free_form_localization").any()
    if judge is not None:
        try:
            scored = score_questions(qa, predictions, mode, judge)
        except JudgeError as exc:
            notes.append(f"FSD not scored: {exc}; excluded from averages")
            judge = None
            scored = score_questions(qa, predictions, mode, None)
    else:
        scored = score_questions(qa, predictions, mode, None)
    fsd_scored = judge is not None
    if has_fsd and not fsd_scored and not notes:
        notes.append(FSD_NOT_SCORED)
    if judge is not None and judge.failures:
        notes.append(
            f"FSD: {judge.failures} prediction(s) got no usable judgment ({judge.last_error}); "
            "excluded from the FSD mean"
        )
    qa = qa.with_columns(pl.col("video_kind").fill_null("real"))
    groups = []
    pools = metrics.real_answer_pools(qa)
    keys = scored.select("profile", "budget", "video_kind").unique().rows()
    for profile, budget, video_kind in sorted(keys, key=lambda k: (k[0], _budget_order(k[1]), k[2] != "real", k[2])):
        selector = (
            (pl.col("profile") == profile) & (pl.col("budget") == budget) & (pl.col("video_kind") == video_kind)
        )
        groups.append(summarize_group(scored.filter(selector), qa.filter(selector), fsd_scored, pools))
    real = [g for g in groups if g["video_kind"] == "real"]
    extra_ids = sorted(set(predictions) - set(qa["id"].to_list()))
    if extra_ids:
        notes.append(f"{len(extra_ids)} prediction id(s) match no question and were ignored")
    missing = int(scored["missing"].sum())
    if missing:
        notes.append(f"{missing} question(s) had no prediction and count as wrong")
    if len(real) > 1:
        notes.append("overall = mean of the real-video groups' overall scores (one group per profile and budget)")
    return {
        "mode": mode,
        "overall": metrics.mean_or_none(g["overall"] for g in real),
        "questions": scored.height,
        "missing": missing,
        "parse_failures": sum(g["parse_failures"] for g in groups),
        "unmatched_predictions": len(extra_ids),
        "fsd_scored": fsd_scored if has_fsd else None,
        "baselines": {
            name: metrics.mean_or_none(g["baselines"][name]["overall"] for g in real) for name in ("random", "frequency")
        },
        "notes": notes,
        "groups": groups,
    }


def evaluate_release(
    release_dir: str | Path, predictions_path: str | Path, mode: str = "harness", judge: FsdJudge | None = None
) -> dict:
    release = load_release(release_dir)
    report = evaluate(release.qa, load_predictions(predictions_path), mode, judge)
    report["release"] = str(release_dir)
    report["predictions"] = str(predictions_path)
    return report

