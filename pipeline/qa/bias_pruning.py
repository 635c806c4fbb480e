"""Iterative Bias Pruning: drop what the learned blind adversary answers, refit, until it is held to its bound.

The answer-distribution and blind controls bound priors we can name (a
constant answer, a per-text rate); the learned adversary
(``pipeline.scoring.adversary``) finds the ones we did not think of, such as
"categories with many instances are rarely farthest". Following Brown et al.
2025 (IBP), per (profile, budget, type) of real-video questions:

1. fit the three variants of the adversary (without and with the scene
   context, the category prior) by cross-validation by scene on the kept
   questions;
2. if every one of them is within the type's bound, less ``PRUNE_SLACK`` (choices: chance + 5
   points, ``balance.adversary_margin``; presence: 55%; numbers: the type's
   ``balance.max_frequency``, the constant ceiling) stop;
3. otherwise drop the ``ROUND_SHARE`` of kept questions that a variant over
   its bound answers *correctly* and most confidently (held-out probability of
   the right option, or MRA for numbers), ties by a seeded draw then id;
   pinned questions never go; then refit (step 1).

A type is never cut below ``floor_size`` questions, where the 95% interval of
a score is ``WIDE_CI`` (20 points) wide: a type pruned that far cannot rank
models either. There pruning stops and the drop record says the bound was not
met. Each drop is recorded with its round ("the learned blind adversary
answered it (round 3)"). The scene context is the profile and budget's
questions handed to the control (before any drop), fixed for all rounds: the
same input always gives the same rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import polars as pl

from pipeline.qa.ids import unit_draws
from pipeline.qa.pruning_cost import recorded
from pipeline.qa.stability import preference
from pipeline.scoring import metrics
from pipeline.scoring.adversary import AdversaryGroup, group_score
from pipeline.scoring.adversary_features import SceneContext

CHOICE_MARGIN = 0.05
PRESENCE_BOUND = 0.55
ROUND_SHARE = 0.05
MAX_ROUNDS = 40
WIDE_CI = 0.20
# Pruning aims this far under the bound: the released table is read with its letters placed and the other types
# pruned, and there the held-out scores moved by up to 0.4 points on revsi's 288 scenes (40.1 -> 40.4).
PRUNE_SLACK = 0.01
PRUNED_VARIANTS = ("adversary", "adversary_context", "category_prior")  # all three are published; all three are held


def floor_size(kind: str, chance: float) -> int:
    """The smallest n whose 95% interval (at chance; numbers: the widest, p = 1/2) is ``WIDE_CI`` wide."""
    p = 0.5 if kind in ("nq", "yesno") else chance
    return math.ceil((2 * 1.96 / WIDE_CI) ** 2 * p * (1 - p))


def round_share(scores: dict, over: list[str], bound: float) -> float:
    """Share of the kept questions one round drops: ``ROUND_SHARE``, or half of what dropping right answers alone
    would take to reach the bound, when that is more.

    Dropping k of n questions answered right moves a score s to (s·n − k)/(n − k), which is the bound b at
    k/n = (s − b)/(1 − b); half of that leaves the refit room to find what it still knows. Far over its bound (a
    table of replicated scans, every answer known) a type then reaches its floor in a handful of fits, not forty
    rounds of 5%; near it, rounds stay at 5%.
    """
    excess = max((scores[v] - bound) / max(1.0 - bound, 1e-9) for v in over)
    return max(ROUND_SHARE, min(0.5, 0.5 * excess))


def adversary_bound(kind: str, settings: dict, chance: float) -> float | None:
    """The most the adversary may score on a type: None when the type sets no bound."""
    if kind == "mcq":
        return chance + float(settings.get("adversary_margin", CHOICE_MARGIN))
    if kind == "yesno":
        return PRESENCE_BOUND
    ceiling = settings.get("max_frequency")
    return float(ceiling) if kind == "nq" and ceiling is not None else None


@recorded  # its cost is a phase of ``scan2qa bench dataset``
def prune_group(
    part: pl.DataFrame,
    context: SceneContext,
    settings: dict,
    seed: int,
    keep: np.ndarray | None = None,
    pinned: np.ndarray | None = None,
    first_round: int = 1,
    guard: Callable[[np.ndarray], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """(keep mask, reason of each row dropped here, summary) of one group after Iterative Bias Pruning.

    ``keep`` is what the earlier steps kept (all rows: None); the summary holds the rounds, whether the bound
    was met, and the scores before and after; rounds are numbered from ``first_round``. ``guard`` (a kept mask
    -> whether the other published baselines still hold on it) vetoes a round: dropping what the adversary knows
    can leave a denser most-frequent answer, and a round that lifts one blind baseline to lower another is no
    gain; pruning then stops there, the bound unmet.
    """
    keep = np.ones(part.height, dtype=bool) if keep is None else np.asarray(keep, dtype=bool).copy()
    reasons = np.full(part.height, "", dtype=object)
    group = AdversaryGroup(part, context, seed)
    summary = {"rounds": 0, "met": True, "before": None, "after": None, "bound": None, "floor": None}
    if group.kind not in ("mcq", "nq", "yesno") or not keep.any():
        return keep, reasons, summary
    movable = np.ones(part.height, dtype=bool) if pinned is None else ~np.asarray(pinned, dtype=bool)
    draws = np.asarray(unit_draws(seed, "adversary/prune", group.ids), dtype=float)
    id_rank = np.argsort(np.argsort(np.asarray(group.ids, dtype=str), kind="stable"), kind="stable")
    option_counts = part["options"].list.len().fill_null(0).to_numpy()
    dropped_last = np.zeros(part.height, dtype=bool)
    tiers = preference(part)
    while True:
        chance = metrics.chance_of_choices(option_counts, np.flatnonzero(keep)) if group.kind == "mcq" else 0.5
        bound = adversary_bound(group.kind, settings, chance)
        floor = floor_size(group.kind, chance)
        answers = group.held_out(keep, PRUNED_VARIANTS)
        scores = group_score(answers)
        summary.update(after=scores, bound=bound, floor=floor)
        if summary["before"] is None:
            summary["before"] = scores
        if bound is None:
            return keep, reasons, summary
        over = [v for v, s in scores.items() if s is not None and s > bound - PRUNE_SLACK + 1e-12]
        if not over:
            return keep, reasons, summary
        room = int(keep.sum()) - floor
        strength = np.full(part.height, -np.inf)
        for variant in over:
            score, confidence = answers[variant]
            right = np.isfinite(score) & (score >= 1.0 if group.kind != "nq" else score > 0.0)
            strength = np.where(right, np.maximum(strength, confidence), strength)
        eligible = np.flatnonzero(keep & movable & np.isfinite(strength))
        if room <= 0 or summary["rounds"] >= MAX_ROUNDS or eligible.size == 0:
            summary["met"] = False
            if dropped_last.any():
                reasons[dropped_last] = (
                    f"{reasons[dropped_last][0]}; the bound ({100 * bound:.1f}%) was not met at {int(keep.sum())} "
                    f"questions (floor {floor})"
                )
            return keep, reasons, summary
        count = min(room, max(1, math.ceil(round_share(scores, over, bound) * keep.sum())), eligible.size)
        keys = (id_rank[eligible], draws[eligible], -strength[eligible])
        if tiers is not None:  # the previous release's questions go last, a bound may still take them (``stability``)
            keys += (-tiers[eligible],)
        order = eligible[np.lexsort(keys)]
        chosen = order[:count]
        if guard is not None:
            trial = keep.copy()
            trial[chosen] = False
            if not guard(trial):
                summary["met"] = False
                return keep, reasons, summary
        summary["rounds"] += 1
        keep[chosen] = False
        reasons[chosen] = f"the learned blind adversary answered it (round {first_round - 1 + summary['rounds']})"
        dropped_last = np.zeros(part.height, dtype=bool)
        dropped_last[chosen] = True


PINPOINT_TYPES = {"presence": {}, "reference_mcq": {}}  # PinpointQA's choice types: 55% / chance + 5 points
CONTEXT_PASSES = 3  # pruning passes over a whole table, each reading the scenes as the previous one left them


@recorded
def prune_table(
    qa: pl.DataFrame, seed: int, types: dict[str, dict] | None = None, pinned: frozenset[str] = frozenset()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kept rows, ``qa_distribution_drops`` rows) of a table whose ``types`` (type -> balance settings) are pruned.

    For tables that do not pass through the answer-distribution control (PinpointQA's ``pinpoint_qa``):
    per (profile, budget, type) of real-video rows, the scene context being the table's real-video rows as the
    previous pass left them (``CONTEXT_PASSES``).
    """
    from pipeline import schemas
    from pipeline.scoring.adversary_features import option_text, with_mentions

    types = PINPOINT_TYPES if types is None else types
    real = pl.col("video_kind").fill_null("real") == "real"
    rows = with_mentions(qa.with_row_index("_row").filter(real))
    groups = sorted(
        rows.filter(pl.col("question_type").is_in(list(types))).sort("id")
        .partition_by(["profile", "budget", "question_type"], as_dict=True, maintain_order=True).items()
    )
    kept = {name: np.ones(part.height, dtype=bool) for name, part in groups}
    why = {name: np.full(part.height, "", dtype=object) for name, part in groups}
    rounds = {name: 0 for name, _ in groups}
    gone: list[int] = []
    for _ in range(CONTEXT_PASSES):
        # The scene context is what the previous pass kept: dropping a "Yes" whose object another question names
        # changes what the others reveal, so pruning is repeated on the pruned table until it drops nothing.
        context = SceneContext(rows.filter(~pl.col("_row").is_in(pl.Series(gone, dtype=rows["_row"].dtype))))
        changed = False
        for name, part in groups:
            pins = part["id"].is_in(list(pinned)).to_numpy() if pinned else None
            keep, reasons, summary = prune_group(part, context, types[name[2]], seed, kept[name], pins, rounds[name] + 1)
            lost = kept[name] & ~keep
            if lost.any():
                changed = True
                why[name][lost] = reasons[lost]
                gone += part["_row"].filter(pl.Series(lost)).to_list()
            kept[name], rounds[name] = keep, rounds[name] + summary["rounds"]
        if not changed:
            break
    dropped: list[int] = []
    records: list[dict] = []
    for name, part in groups:
        lost = part.filter(pl.Series(~kept[name]))
        dropped += lost["_row"].to_list()
        for row, reason in zip(lost.iter_rows(named=True), why[name][~kept[name]]):
            options = row["options"] or []
            answer = next((option_text(o) for o in options if o.startswith(f"{row['ground_truth']}. ")), row["ground_truth"])
            records.append({
                "id": row["id"], "key": row["key"], "profile": row["profile"], "budget": row["budget"],
                "video_kind": row["video_kind"] or "real", "question_type": name[2],
                "answer": answer, "answer_class": answer, "reason": str(reason),
            })
    if not dropped:
        return qa, schemas.empty("qa_distribution_drops")
    mask = np.ones(qa.height, dtype=bool)
    mask[dropped] = False
    records.sort(key=lambda r: (r["profile"], r["budget"], r["question_type"], r["id"]))
    return qa.filter(pl.Series(mask)), schemas.from_rows("qa_distribution_drops", records)


def adversary_overruns(baselines: list[dict], settings_of) -> list[str]:
    """One line per released real-video type whose learned adversary scores over its bound, of the types pruning
    holds (``settings_of(profile, question_type)`` gives their balance settings, None for a type not pruned).

    What pruning could not meet (a type at its floor, a pool too small) must not pass silently: the release's
    check warns with these lines, and the manifest's ``checks.baselines`` holds the figures.
    """
    lines = []
    for row in baselines:
        if row.get("video_kind", "real") != "real":
            continue
        settings = settings_of(row["profile"], row["question_type"])
        if settings is None:
            continue
        kind = "yesno" if row["question_type"] == "presence" else ("nq" if row.get("best_constant") is not None else "mcq")
        bound = adversary_bound(kind, settings, float(row.get("random") or 0.0))
        if bound is None:
            continue
        over = {v: row[v] for v in PRUNED_VARIANTS if row.get(v) is not None and row[v] > bound + 1e-9}
        if over:
            scores = ", ".join(f"{v} {100 * x:.1f}" for v, x in over.items())
            lines.append(f"{row['profile']} {row['budget']} {row['question_type']} ({row['questions']} questions): "
                         f"{scores} over {100 * bound:.1f}")
    return lines
