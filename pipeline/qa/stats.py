"""``scan2qa stats``: question counts, answer distributions and baselines per type and budget.

Works on any ``qa`` table: ReVSI/VSI-Bench rows and PinpointQA rows alike. Each
type is described by how its answers are read (``metrics.answer_kind``):
numbers get a value table or histogram, multiple choice its letters and correct
texts, yes/no its two counts, and free text (FSD) or JSON (SSP) answers only
their count and distinct count: they are never converted to numbers.

Baselines use the definitions of ``pipeline.scoring.metrics`` (SPEC §6) so that
stats and eval report the same numbers: random chance (MCQ: mean of
1/#options; NQ: expected MRA of a uniform guess over the type's answer range)
and the frequency baseline. For multiple choice two frequency baselines are
shown: by letter (``freq``, what ``scan2qa eval`` reports, near chance because
letters are balanced) and by content (``content``: always answering the most
frequent correct option text, e.g. "left"; SPEC §6's definition and the bias
letter balancing cannot remove). For numbers both are the mode scored with
MRA, and ``best`` is the best score of any one answer (the prior a model can
learn; never below the mode's, over every real number, so it bounds the mode whatever the tie-break).
``blind`` is the text-only guesser of ``pipeline.scoring.blind`` (prior fitted on other scenes);
``adversary``, ``adversary_context`` and ``category_prior`` the held-out scores of the learned blind
adversary (``pipeline.scoring.adversary``: trees on the question, on the question and its scene's other
questions, and a target-encoded category prior alone), and ``ci95`` the width of the 95% interval a type of n questions gives a score, flagged over 20 points.

When the answer-distribution control's record (``<qa stem>_distribution_drops.parquet``
beside the table, see ``pipeline.qa.distribution``) exists, every type also shows
how many questions the control dropped and the content baseline before it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.groups import sorted_groups
from pipeline.qa.distribution import content_frequency, drops_path
from pipeline.scoring.adversary import VARIANTS, adversary_scores
from pipeline.scoring.best_constant import best_constant
from pipeline.scoring.blind import blind_scores
from pipeline.scoring.metrics import answer_kind, chance_score, frequency_baseline, mean_or_none, task_of
from pipeline.scoring.parsing import finite_float
from pipeline.storage import read_table, upath

GROUP = ("profile", "budget", "video_kind", "question_type")
_MAX_DISTINCT_VALUES = 15
_HISTOGRAM_BINS = 10


def _numeric_distribution(values: list[float]) -> dict:
    if not values:
        return {"values": {}}
    distinct = sorted(set(values))
    if len(distinct) <= _MAX_DISTINCT_VALUES:
        counts = Counter(values)
        return {"values": {_fmt(v): counts[v] for v in distinct}}
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=_HISTOGRAM_BINS)
    return {
        "histogram": [
            {"low": round(float(lo), 3), "high": round(float(hi), 3), "count": int(c)}
            for lo, hi, c in zip(edges[:-1], edges[1:], counts)
        ],
        "min": float(min(values)),
        "median": float(np.median(values)),
        "max": float(max(values)),
    }


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _correct_text(options: list[str], letter: str) -> str:
    for option in options:
        if option.startswith(f"{letter}. "):
            return option[len(letter) + 2 :]
    return letter


def _max_letter_deviation(letters: Counter, option_counts: list[int]) -> float:
    """Largest gap (percentage points) between a letter's share and its uniform share.

    With mixed option counts the uniform share of letter k is the mean over
    questions of 1/n where k < n.
    """
    total = len(option_counts)
    worst = 0.0
    for k, letter in enumerate("ABCDEF"[: max(option_counts)]):
        expected = sum(1.0 / n for n in option_counts if k < n) / total
        worst = max(worst, abs(letters.get(letter, 0) / total - expected))
    return round(100.0 * worst, 2)


def _kind(question_type: str, options: list) -> str:
    return answer_kind(question_type, next((o for o in options if len(o)), None))


def _drops_by_group(drops: pl.DataFrame | None) -> dict[tuple, list[str]]:
    if drops is None or drops.is_empty():
        return {}
    out: dict[tuple, list[str]] = {}
    for row in drops.sort("id").iter_rows(named=True):
        out.setdefault(tuple(row[c] for c in GROUP), []).append(row["answer"])
    return out


def _description(kind: str, ground_truths: list[str], contents: list[str], options: list[list[str]]) -> dict:
    """How a type's answers are spread (letters and texts, values or a histogram), for the stats printout."""
    if kind == "mcq":
        letters = Counter(ground_truths)
        texts = Counter(contents)
        top_text, top_count = min(texts.items(), key=lambda kv: (-kv[1], kv[0]))
        return {
            "letters": {k: letters[k] for k in sorted(letters)},
            "max_letter_deviation_points": _max_letter_deviation(letters, [len(o) for o in options]),
            "text_mode": top_text,
            "text_mode_share": round(top_count / len(ground_truths), 4),
        }
    if kind == "nq":
        numbers = [v for v in (finite_float(g) for g in ground_truths) if v is not None]
        return {"answers": _numeric_distribution(numbers)}
    if kind == "yesno":
        return {"answers": {"values": dict(sorted(Counter(ground_truths).items()))}}
    # free text (fsd) and JSON (ssp): described, never read as numbers
    return {"answers": {"distinct": len(set(ground_truths)), "format": "json" if kind == "ssp" else "text"}}


WIDE_CI = 0.20  # a type whose 95% interval is wider than this cannot tell models apart; stats flags it


def ci95_width(kind: str, question_type: str, ground_truths: list[str], options: list[list[str]]) -> float | None:
    """Width of the 95% confidence interval of a model's score on this many questions (normal approximation).

    Choices and yes/no: at chance, 2 x 1.96 x sqrt(p (1 - p) / n); numbers: the widest a score in [0, 1] can
    have, p (1 - p) = 1/4. What a type of n questions can resolve, whatever the model.
    """
    n = len(ground_truths)
    if n == 0 or kind not in ("mcq", "nq", "yesno"):
        return None
    p = chance_score(question_type, ground_truths, options) if kind in ("mcq", "yesno") else 0.5
    return 2 * 1.96 * math.sqrt(max(p * (1 - p), 0.0) / n)


def _rows(qa: pl.DataFrame, columns: list[str], where: pl.Expr | None) -> pl.DataFrame:
    """``columns`` of the rows ``where`` selects: only those columns are copied."""
    return qa.select(columns) if where is None else qa.select(columns).filter(qa.select(where).to_series())


def compute_stats(
    qa: pl.DataFrame, drops: pl.DataFrame | None = None, *, describe: bool = True, where: pl.Expr | None = None
) -> dict:
    """Everything ``scan2qa stats`` prints, as one JSON-able object; ``drops``: the distribution record.

    ``describe=False`` gives per type only its baselines (frequency and content, before and after the
    distribution control) and counts, which are all the report's baseline table reads: the answer
    distributions and the random baseline (MRA expectations, most of the cost) are left out; the best
    constant, the blind baseline and the interval stay.
    """
    qa = qa.with_columns(pl.col("video_kind").fill_null("real"))
    frequency = {
        tuple(r[c] for c in GROUP): r
        for r in frequency_baseline(_rows(qa, [*GROUP, "id", "ground_truth"], where), by=GROUP).iter_rows(named=True)
    } if qa.height else {}
    dropped = _drops_by_group(drops)
    blind = blind_scores(qa, by=GROUP, where=where)
    adversary = adversary_scores(qa, where=where)
    groups = []
    for group_key, group in sorted_groups(qa, GROUP, where=where):
        values = dict(zip(GROUP, group_key))
        question_type = values["question_type"]
        ground_truths = group["ground_truth"].to_list()
        options = [list(o or []) for o in group["options"].to_list()]
        kind = _kind(question_type, options)
        entry = {**values, "questions": group.height, "kind": kind}
        contents = [_correct_text(o, g) for o, g in zip(options, ground_truths)] if kind == "mcq" else ground_truths
        if describe:
            entry.update(_description(kind, ground_truths, contents, options))
        # Always: the release's adversary check reads a choice type's bound (chance + 5 points) from it.
        entry["random_baseline"] = chance_score(question_type, ground_truths, options)
        freq = frequency.get(tuple(values[c] for c in GROUP))
        entry["frequency_answer"] = freq["answer"] if freq else None
        entry["frequency_baseline"] = freq["score"] if freq else None
        if kind == "nq":
            found = best_constant([finite_float(g) for g in ground_truths])
            entry["best_constant_baseline"] = found[0] if found else None
            entry["best_constant_answer"] = round(found[1], 4) if found else None
        entry["blind_baseline"] = blind.get(tuple(values[c] for c in GROUP))
        learned = adversary.get(tuple(values[c] for c in GROUP), {})
        for variant in VARIANTS:
            entry[variant] = learned.get(variant)
        entry["ci95_width"] = ci95_width(kind, question_type, ground_truths, options)
        entry["ci_wide"] = entry["ci95_width"] is not None and entry["ci95_width"] > WIDE_CI
        if kind in ("mcq", "nq"):
            entry["content_frequency_baseline"] = content_frequency(question_type, contents, kind == "mcq")
            lost = dropped.get(tuple(values[c] for c in GROUP), [])
            entry["distribution_dropped"] = len(lost)
            entry["candidates"] = group.height + len(lost)
            entry["content_frequency_before_control"] = (
                content_frequency(question_type, contents + lost, kind == "mcq") if lost else entry["content_frequency_baseline"]
            )
        else:
            entry["content_frequency_baseline"] = entry["frequency_baseline"]
        groups.append(entry)
    if not describe:
        return {"questions": _rows(qa, ["id"], where).height, "types": groups}
    tasks: dict[tuple, dict] = {}
    for entry in groups:
        k = (entry["profile"], entry["budget"], entry["video_kind"], task_of(entry["question_type"]))
        t = tasks.setdefault(
            k, {"random": [], "frequency": [], "content": [], "before": [], "best": [], "blind": [], "questions": 0, "dropped": 0,
                **{variant: [] for variant in VARIANTS}}
        )
        for variant in VARIANTS:
            t[variant].append(entry.get(variant))
        t["random"].append(entry["random_baseline"])
        t["best"].append(entry.get("best_constant_baseline"))
        t["blind"].append(entry.get("blind_baseline"))
        t["frequency"].append(entry["frequency_baseline"])
        t["content"].append(entry["content_frequency_baseline"])
        t["before"].append(entry.get("content_frequency_before_control", entry["content_frequency_baseline"]))
        t["questions"] += entry["questions"]
        t["dropped"] += entry.get("distribution_dropped", 0)
    task_rows = [
        {
            "profile": k[0],
            "budget": k[1],
            "video_kind": k[2],
            "task": k[3],
            "questions": v["questions"],
            "distribution_dropped": v["dropped"],
            "random_baseline": mean_or_none(v["random"]),
            "frequency_baseline": mean_or_none(v["frequency"]),
            "content_frequency_baseline": mean_or_none(v["content"]),
            "content_frequency_before_control": mean_or_none(v["before"]),
            "best_constant_baseline": mean_or_none(v["best"]),
            "blind_baseline": mean_or_none(v["blind"]),
            **{variant: mean_or_none(v[variant]) for variant in VARIANTS},
        }
        for k, v in sorted(tasks.items())
    ]
    return {"questions": _rows(qa, ["id"], where).height, "types": groups, "tasks": task_rows}


def baseline_rows(qa: pl.DataFrame, drops: pl.DataFrame | None = None, where: pl.Expr | None = None) -> list[dict]:
    """One row per (profile, budget, video kind, type) for a report's baseline table.

    Keys: profile, budget, video_kind, question_type, questions, dropped (by the
    distribution control), answer (the frequency answer), frequency (by letter
    for choices), content (by option text), before (content baseline before the
    control), best_constant (numbers: the best score of any one answer) and best_constant_answer, blind
    (the text-only baseline, ``pipeline.scoring.blind``), adversary, adversary_context and category_prior
    (the learned blind adversary's held-out scores, ``pipeline.scoring.adversary``), candidates (kept + dropped by the control),
    ci95_width and ci_wide (wider than ``WIDE_CI``). Profiles are never merged: revsi and vsibench share
    type names.
    """
    return [
        {
            "profile": e["profile"], "budget": e["budget"], "video_kind": e["video_kind"],
            "question_type": e["question_type"], "questions": e["questions"],
            "dropped": e.get("distribution_dropped", 0), "answer": e["frequency_answer"],
            "frequency": e["frequency_baseline"], "content": e["content_frequency_baseline"],
            "before": e.get("content_frequency_before_control"),
            "best_constant": e.get("best_constant_baseline"), "best_constant_answer": e.get("best_constant_answer"),
            "random": e.get("random_baseline"), "blind": e.get("blind_baseline"), **{variant: e.get(variant) for variant in VARIANTS}, "candidates": e.get("candidates", e["questions"]),
            "ci95_width": e.get("ci95_width"), "ci_wide": e.get("ci_wide", False),
        }
        for e in compute_stats(qa, drops, describe=False, where=where)["types"]
    ]


def _pct(x: float | None) -> str:
    return "    -" if x is None else f"{100.0 * x:5.1f}"


def _distribution_text(entry: dict) -> str:
    kind = entry["kind"]
    if kind == "mcq":
        letters = " ".join(f"{k}:{v}" for k, v in entry["letters"].items())
        return f"{letters}  top text {entry['text_mode']!r} {100 * entry['text_mode_share']:.0f}%"
    answers = entry["answers"]
    if kind in ("fsd", "ssp"):
        return f"{answers['format']} answers, {answers['distinct']} distinct"
    if "values" in answers:
        return " ".join(f"{k}:{v}" for k, v in answers["values"].items())
    bins = " ".join(str(b["count"]) for b in answers["histogram"])
    return f"{answers['min']:g}..{answers['max']:g} median {answers['median']:g} hist [{bins}]"


def _ci(entry: dict) -> str:
    width = entry.get("ci95_width")
    if width is None:
        return "     -"
    return f"{100.0 * width:5.1f}" + ("!" if entry.get("ci_wide") else " ")


def format_text(stats: dict) -> str:
    lines = [f"{stats['questions']} questions", ""]
    header = (
        f"{'profile':10} {'budget':6} {'video':11} {'question_type':36} {'n':>6} {'cand':>5} {'drop':>5} {'rand':>5} "
        f"{'freq':>5} {'content':>7} {'before':>6} {'best':>5} {'at':>8} {'blind':>5} {'adv':>5} {'advctx':>6} {'catpr':>5} "
        f"{'ci95':>6}  answers"
    )
    lines += [header, "-" * len(header)]
    for e in stats["types"]:
        at = e.get("best_constant_answer")
        lines.append(
            f"{e['profile']:10} {e['budget']:6} {e['video_kind']:11} {e['question_type']:36} {e['questions']:6d} "
            f"{e.get('candidates', e['questions']):5d} {e.get('distribution_dropped', 0):5d} {_pct(e['random_baseline'])} "
            f"{_pct(e['frequency_baseline'])}   {_pct(e['content_frequency_baseline'])} "
            f"{_pct(e.get('content_frequency_before_control'))} {_pct(e.get('best_constant_baseline'))} "
            f"{'-' if at is None else f'{at:g}':>8} {_pct(e.get('blind_baseline'))} {_pct(e.get('adversary'))} "
            f" {_pct(e.get('adversary_context'))} {_pct(e.get('category_prior'))} {_ci(e)}  {_distribution_text(e)}"
        )
    lines += [
        "",
        f"{'profile':10} {'budget':6} {'video':11} {'task':36} {'n':>6} {'drop':>5} {'rand':>5} {'freq':>5} "
        f"{'content':>7} {'before':>6} {'best':>5} {'blind':>5} {'adv':>5} {'advctx':>6} {'catpr':>5}",
    ]
    for t in stats["tasks"]:
        lines.append(
            f"{t['profile']:10} {t['budget']:6} {t['video_kind']:11} {t['task']:36} {t['questions']:6d} "
            f"{t['distribution_dropped']:5d} {_pct(t['random_baseline'])} {_pct(t['frequency_baseline'])} "
            f"  {_pct(t['content_frequency_baseline'])} {_pct(t['content_frequency_before_control'])} "
            f"{_pct(t['best_constant_baseline'])} {_pct(t['blind_baseline'])} {_pct(t['adversary'])}  "
            f"{_pct(t['adversary_context'])} {_pct(t['category_prior'])}"
        )
    wide = [e["question_type"] for e in stats["types"] if e.get("ci_wide")]
    lines += [
        "",
        "n: questions kept; cand: candidates the control saw (kept + dropped); drop: dropped by the "
        "answer-distribution control; rand: random chance; freq: frequency baseline (choices: most frequent "
        "letter; numbers: the mode, ties to the smallest); content: most frequent answer content (choices: option "
        "text; numbers: the mode, MRA); before: content baseline before the control; best: best score of any one "
        "numeric answer (every constant, whatever the mode's tie-break) and at: that answer; blind: text-only "
        "guesser, prior fitted on other scenes; adv / advctx / catpr: the learned blind adversary's held-out score "
        "(trees on the question; with the scene's other questions; the category prior alone), cross-validated by "
        "scene; ci95: width of the 95% interval of a score on n questions "
        f"(! wider than {100 * WIDE_CI:g} points).",
    ]
    if wide:
        lines.append(f"too few questions to rank models (95% interval wider than {100 * WIDE_CI:g} points): {', '.join(wide)}")
    return "\n".join(lines)


def load_drops(qa_path: str | Path) -> pl.DataFrame | None:
    """The distribution record beside a local qa table, if there is one."""
    path = drops_path(qa_path)
    return read_table(upath(str(path)), "qa_distribution_drops") if path.exists() else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qa", help="qa Parquet table (default: <output_root>/tables/qa.parquet)")
    parser.add_argument("--config", help="scan2qa YAML config (for output_root)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--samplers",
        help="sampler specs, e.g. uniform:8 fps:1 fps:2,max=32 segments:16 16 64 "
        "(answer validity per type and sampler against the release's all-frame answers; needs --release)",
        nargs="+",
    )
    parser.add_argument("--release", help="release folder or output root, for --samplers")
    parser.add_argument("--plot", help="with --samplers: write the validity-against-frames plot (SVG) here")


def run(args: argparse.Namespace) -> int:
    if args.samplers:
        from pipeline.sampling.command import sampler_validity

        return sampler_validity(args.release, args.samplers, args.plot, args.json)
    if args.qa:
        location = args.qa
        path = upath(args.qa)
    else:
        from pipeline.config import load_config

        config = load_config(args.config)
        location = f"{config.tables_root}/qa.parquet"
        path = upath(location, config.storage_options)
    if not path.exists():
        if args.qa:
            raise FileNotFoundError(f"{args.qa}: no qa table there (the file passed with --qa does not exist)")
        raise FileNotFoundError(f"{path}: no qa table (build it first or pass --qa)")
    drops = load_drops(location) if "://" not in str(location) else None
    stats = compute_stats(read_table(path, "qa"), drops)
    print(json.dumps(stats, indent=2, sort_keys=True) if args.json else format_text(stats))
    return 0
