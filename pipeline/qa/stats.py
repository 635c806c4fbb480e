"""``scan2qa stats``: question counts, answer distributions and baselines per type and budget.

Baselines use the definitions of ``pipeline.scoring.metrics`` (SPEC §6) so that
stats and eval report the same numbers: random chance (MCQ: mean of
1/#options; NQ: expected MRA of a uniform guess over the type's answer range)
and the frequency baseline (always the most frequent ground truth of the
type: for NQ the mode scored with MRA, for MCQ the most frequent letter). As
letters are balanced, the MCQ frequency baseline by letter sits near chance;
the share of the most frequent correct option *text* (e.g. always "left") is
reported beside it as ``text_mode_share`` because that is the bias letter
balancing cannot remove.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np
import polars as pl

from pipeline.scoring.metrics import chance_score, frequency_baseline, mean_or_none, task_of
from pipeline.storage import read_table, upath

GROUP = ("profile", "budget", "video_kind", "question_type")
_MAX_DISTINCT_VALUES = 15
_HISTOGRAM_BINS = 10


def _numeric_distribution(values: list[float]) -> dict:
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

    With mixed option counts (1-turn routes have 3 options, longer ones 4) the
    uniform share of letter k is the mean over questions of 1/n where k < n.
    """
    total = len(option_counts)
    worst = 0.0
    for k, letter in enumerate("ABCDEF"[: max(option_counts)]):
        expected = sum(1.0 / n for n in option_counts if k < n) / total
        worst = max(worst, abs(letters.get(letter, 0) / total - expected))
    return round(100.0 * worst, 2)


def compute_stats(qa: pl.DataFrame) -> dict:
    """Everything ``scan2qa stats`` prints, as one JSON-able object."""
    frequency = {
        tuple(r[c] for c in GROUP): r for r in frequency_baseline(qa, by=GROUP).iter_rows(named=True)
    } if qa.height else {}
    groups = []
    for group_key, group in qa.sort(list(GROUP) + ["id"]).group_by(list(GROUP), maintain_order=True):
        values = dict(zip(GROUP, group_key))
        ground_truths = group["ground_truth"].to_list()
        options = group["options"].to_list()
        mcq = any(len(o) for o in options)
        entry = {**values, "questions": group.height, "kind": "mcq" if mcq else "nq"}
        if mcq:
            letters = Counter(ground_truths)
            texts = Counter(_correct_text(o, g) for o, g in zip(options, ground_truths))
            top_text, top_count = min(texts.items(), key=lambda kv: (-kv[1], kv[0]))
            entry["letters"] = {k: letters[k] for k in sorted(letters)}
            entry["max_letter_deviation_points"] = _max_letter_deviation(letters, [len(o) for o in options])
            entry["text_mode"] = top_text
            entry["text_mode_share"] = round(top_count / group.height, 4)
        else:
            numbers = [float(g) for g in ground_truths]
            entry["answers"] = _numeric_distribution(numbers)
        freq = frequency.get(tuple(values[c] for c in GROUP))
        entry["random_baseline"] = chance_score(values["question_type"], ground_truths, options)
        entry["frequency_answer"] = freq["answer"] if freq else None
        entry["frequency_baseline"] = freq["score"] if freq else None
        groups.append(entry)
    tasks: dict[tuple, dict[str, list]] = {}
    for entry in groups:
        k = (entry["profile"], entry["budget"], entry["video_kind"], task_of(entry["question_type"]))
        t = tasks.setdefault(k, {"random": [], "frequency": [], "questions": 0})
        t["random"].append(entry["random_baseline"])
        t["frequency"].append(entry["frequency_baseline"])
        t["questions"] += entry["questions"]
    task_rows = [
        {
            "profile": k[0],
            "budget": k[1],
            "video_kind": k[2],
            "task": k[3],
            "questions": v["questions"],
            "random_baseline": mean_or_none(v["random"]),
            "frequency_baseline": mean_or_none(v["frequency"]),
        }
        for k, v in sorted(tasks.items())
    ]
    return {"questions": qa.height, "types": groups, "tasks": task_rows}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:5.1f}"


def _distribution_text(entry: dict) -> str:
    if entry["kind"] == "mcq":
        letters = " ".join(f"{k}:{v}" for k, v in entry["letters"].items())
        return f"{letters}  top text {entry['text_mode']!r} {100 * entry['text_mode_share']:.0f}%"
    answers = entry["answers"]
    if "values" in answers:
        return " ".join(f"{k}:{v}" for k, v in answers["values"].items())
    bins = " ".join(str(b["count"]) for b in answers["histogram"])
    return f"{answers['min']:g}..{answers['max']:g} median {answers['median']:g} hist [{bins}]"


def format_text(stats: dict) -> str:
    lines = [f"{stats['questions']} questions", ""]
    header = f"{'profile':9} {'budget':6} {'video':11} {'question_type':36} {'n':>6} {'rand':>5} {'freq':>5}  answers"
    lines += [header, "-" * len(header)]
    for e in stats["types"]:
        lines.append(
            f"{e['profile']:9} {e['budget']:6} {e['video_kind']:11} {e['question_type']:36} {e['questions']:6d} "
            f"{_pct(e['random_baseline'])} {_pct(e['frequency_baseline'])}  {_distribution_text(e)}"
        )
    lines += ["", f"{'profile':9} {'budget':6} {'video':11} {'task':36} {'n':>6} {'rand':>5} {'freq':>5}"]
    for t in stats["tasks"]:
        lines.append(
            f"{t['profile']:9} {t['budget']:6} {t['video_kind']:11} {t['task']:36} {t['questions']:6d} "
            f"{_pct(t['random_baseline'])} {_pct(t['frequency_baseline'])}"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qa", help="qa Parquet table (default: <output_root>/tables/qa.parquet)")
    parser.add_argument("--config", help="scan2qa YAML config (for output_root)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def run(args: argparse.Namespace) -> int:
    if args.qa:
        path = upath(args.qa)
    else:
        from pipeline.config import load_config

        config = load_config(args.config)
        path = upath(f"{config.tables_root}/qa.parquet", config.storage_options)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no qa table (build it first or pass --qa)")
    stats = compute_stats(read_table(path, "qa"))
    print(json.dumps(stats, indent=2, sort_keys=True) if args.json else format_text(stats))
    return 0
