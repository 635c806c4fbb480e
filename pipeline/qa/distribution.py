"""Answer-distribution control: keep a type's answers spread so that no prior answers it for free.

ReVSI's Table 10/11 rules (``pipeline.qa.filters``) remove the worst biases of
VSI-Bench, yet on the same scenes "always right" still answers 48% of
forward-easy direction questions and a size near one metre a third of the size
questions. This step comes after those rules and the per-scene caps, and is
configured per task in the profile's ``balance`` block (revsi only; the
``vsibench`` profile reproduces VSI-Bench's biases on purpose):

* every question has an *answer class*: its correct option text for multiple
  choice (``"left"``, ``"Turn Left, Turn Back"``), for numbers a bin of
  ``bin_width`` relative width in log space (10% wide: 100 and 109 cm share a
  bin, 100 and 111 cm do not; counts 1, 2, 3 each get their own);
* ``max_share``: no class holds more than this share of the type's kept
  questions. The largest kept set meeting it is found by water-filling: every
  class keeps at most C questions, C as large as possible with C <= share x
  kept; a class over C keeps its C lowest draws of (seed, question id);
* ``max_frequency``: no constant answer may score more than this: for choices
  the share of the most frequent correct text (the content frequency
  baseline), lowering C until it holds; for numbers with ``ceiling_on:
  best_constant`` (revsi) the best mean MRA of *any* number
  (``pipeline.scoring.best_constant``: it bounds the mode whatever the
  tie-break, which the mode alone did not: shrinking classes creates ties and
  the smallest tied answer scored below the limit while another scored above),
  met by the largest selection ``constant_bound`` finds, however small: a
  type kept whole over its ceiling is a type a constant answer passes (14
  counting questions on 20 synthetic scans at 16 frames, best constant 65%
  against 50%), while a small bounded one is only imprecise, and ``scan2qa
  stats`` flags its 95% interval as too wide to rank models. Only where no
  selection at all meets it (every answer alike) does the type keep its
  share-capped set, its baseline shown in ``scan2qa stats``;
* ``blind``: the text-only baseline is held to chance (``blind_control``);
* ``adversary``: Iterative Bias Pruning (``bias_pruning``) against the learned
  blind adversary, the last selection: it runs once every group's other rules
  have decided, so the adversary reads each scene's other questions as they
  left them; the constant ceiling and the blind bound are re-established after it;
* the control never raises a baseline: a numeric mode depends on which
  questions are kept, so a choice of survivors that scores above the whole
  group is replaced by another seeded choice that does not (or none is dropped).

Groups are (profile, budget, video kind, type), the groups every baseline is
reported in; only real-video questions are controlled (dummy-video questions
follow their real counterparts afterwards). Every dropped question is recorded
with its class and reason (``qa_distribution_drops``), so ``scan2qa stats`` can
show what the control did and the baseline before and after.

Questions a reviewer accepted are ``pinned``: the control is dataset-wide, so
one more scan changes which members of a class fill its cap, and without pins
an accepted question could leave the next release. A pinned question is kept
in every choice, fills its class's cap before the others, and counts in the
water-filling (a class pinned past C enlarges the kept set, so the others may
keep more and the share stays as close to ``max_share`` as the pins allow).

Per-scene caps come first and see only one scan, so ``row_classes`` lets
them prefer a scan's rarer classes (one of each class before a second of any),
which is what gives this step enough "back" answers to balance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.qa.constant_bound import keep_under_ceiling
from pipeline.qa.ids import id_among, unit_draws
from pipeline.qa.profiles import Profile, TaskRule
from pipeline.qa.pruning_cost import recorded
from pipeline.qa.stability import PREFERENCE, PreviousRelease, preferred_draws, soft_pins, with_preference
from pipeline.scoring.best_constant import best_constant_score
from pipeline.scoring.metrics import _mode_answer, score_constant_answer

GROUP = ("profile", "budget", "video_kind", "question_type")


def drops_path(qa_path):
    """Where the drop record of a qa table lives: ``<stem>_distribution_drops.parquet`` beside it."""
    from pathlib import Path

    qa_path = Path(str(qa_path))
    return qa_path.with_name(f"{qa_path.stem}_distribution_drops.parquet")


def balance_settings(rule: TaskRule) -> dict:
    return dict(rule.balance or {})


def answer_class(value: float | None, text: str, bin_width: float) -> str:
    """The answer class: a log-space bin label for numbers, the option text for choices."""
    if value is None:
        return text
    if not math.isfinite(value) or value <= 0:
        return f"={value:g}"
    index = math.floor(math.log(value) / math.log1p(bin_width) + 1e-9)
    return f"bin{index:+d}"


def _classes(part: pl.DataFrame, bin_width: float) -> list[str]:
    """Answer classes of rows with ``options``, ``geometry`` and ``answer_value``."""
    out = []
    for options, geometry, value in zip(part["options"].to_list(), part["geometry"].to_list(), part["answer_value"].to_list()):
        if options:
            out.append(json.loads(geometry)["correct"])
        else:
            out.append(answer_class(value, "", bin_width))
    return out


def content_answers(part: pl.DataFrame) -> list[str]:
    """What the frequency baseline counts: correct option text for choices, the ground truth for numbers."""
    out = []
    for options, geometry, truth in zip(part["options"].to_list(), part["geometry"].to_list(), part["ground_truth"].to_list()):
        out.append(json.loads(geometry)["correct"] if options else truth)
    return out


def content_frequency(question_type: str, answers: Sequence[str], mcq: bool) -> float | None:
    """Frequency baseline by content: the share of the top correct text, or the mode's mean MRA."""
    if not answers:
        return None
    if mcq:
        counts: dict[str, int] = {}
        for a in answers:
            counts[a] = counts.get(a, 0) + 1
        return max(counts.values()) / len(answers)
    return score_constant_answer(question_type, _mode_answer(list(answers), True), list(answers))


def _water_fill(sizes: Sequence[int], share: float, pinned: Sequence[int] | None = None) -> int:
    """The largest per-class cap C with C <= share * sum(min(n, C)).

    With fewer than 1/share classes no subset meets the share (k classes hold at
    least 1/k each); then nothing is capped, rather than cutting every class to one.
    ``pinned`` (per class, how many of its members must stay) counts a class as
    max(pinned, min(n, C)): pins past C enlarge the kept set, so the other classes
    may keep more and the pinned class's share stays as low as it can.
    """
    cap = max(sizes) if sizes else 0
    if pinned is None:
        while cap > 1 and cap > share * sum(min(n, cap) for n in sizes) + 1e-9:
            cap -= 1
    else:
        while cap > 1 and cap > share * sum(max(p, min(n, cap)) for n, p in zip(sizes, pinned)) + 1e-9:
            cap -= 1
    if cap <= 1 and 1 > share * len(sizes) + 1e-9:
        return max(sizes) if sizes else 0
    return max(cap, 1)


def _select(classes: list[str], draws: list[float], ids: list[str], cap: int, pinned: np.ndarray | None = None) -> np.ndarray:
    """Keep mask: per class, the ``cap`` lowest (draw, id); pinned rows first, and all of them even over ``cap``."""
    keep = np.zeros(len(classes), dtype=bool)
    by_class: dict[str, list[int]] = {}
    for i, c in enumerate(classes):
        by_class.setdefault(c, []).append(i)
    for members in by_class.values():
        if pinned is None:
            members.sort(key=lambda i: (draws[i], ids[i]))
            keep[members[:cap]] = True
        else:
            members.sort(key=lambda i: (not pinned[i], draws[i], ids[i]))
            keep[members[: max(cap, int(pinned[members].sum()))]] = True
    return keep


def _max_share(classes: list[str], keep: np.ndarray) -> float:
    kept = [c for c, k in zip(classes, keep) if k]
    return max((kept.count(c) for c in set(kept)), default=0) / max(len(kept), 1)


SMALL_BOUNDED = 20  # fewer kept under a numeric ceiling: the drop record says so (the 95% interval is over 40 points)
RESAMPLE_ATTEMPTS = 16  # other seeded choices of which members of an over-full class stay, when the first raises the baseline


def _capped_keep(
    part: pl.DataFrame,
    rule: TaskRule,
    classes: list[str],
    draws: list[float],
    prior,
    pinned: np.ndarray | None = None,
    values: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """Keep mask and drop reason for one ordering of the rows (``draws``): the share cap, then the ceiling.

    With ``values`` (numeric answers, ``ceiling_on: best_constant``) the ceiling bounds the best constant
    answer and is met by peeling its densest point (``constant_bound``), not by lowering every class's cap.

    ``pinned`` rows (a mask, or None) are kept whatever the caps, and fill their class's cap first.
    """
    settings = balance_settings(rule)
    share = settings.get("max_share")
    ceiling = settings.get("max_frequency")
    ids = part["id"].to_list()
    sizes = list({c: classes.count(c) for c in dict.fromkeys(classes)}.values())
    pinned_sizes = None
    if pinned is not None:
        pinned_count = {c: 0 for c in dict.fromkeys(classes)}
        for c, p in zip(classes, pinned):
            pinned_count[c] += bool(p)
        pinned_sizes = list(pinned_count.values())
    cap = _water_fill(sizes, float(share), pinned_sizes) if share is not None else max(sizes)
    reason = f"answer class over {100 * float(share):g}% of its type" if share is not None else ""
    keep = _select(classes, draws, ids, cap, pinned)
    if ceiling is not None and values is not None:
        # From the share-capped set and from the whole group: the whole group's selection is taken when it
        # is larger and still meets the share (a selection spread for the ceiling usually does).
        order = np.asarray(draws, dtype=float)
        chosen = keep_under_ceiling(values, order, keep, float(ceiling), pinned)
        if share is not None and not keep.all():
            wide = keep_under_ceiling(values, order, np.ones(keep.size, dtype=bool), float(ceiling), pinned)
            if wide.sum() > chosen.sum() and _max_share(classes, wide) <= float(share) + 1e-12:
                chosen = wide
        if not chosen.any():
            # Out of reach: no selection scores under the ceiling (every answer alike), so only the share cap
            # applies and stats shows the baseline.
            return keep, reason
        if (chosen != keep).any():
            reason = f"a constant answer scored above {100 * float(ceiling):g}% (the densest answers first)"
            if chosen.sum() < SMALL_BOUNDED:
                reason += f"; only {int(chosen.sum())} of {keep.size} meet it (too few to rank models)"
        return chosen, reason
    if ceiling is not None:
        step = max(1, cap // 25)
        share_keep, share_reason = keep, reason
        while cap > 1:
            if prior(keep) <= float(ceiling) + 1e-12:
                break
            cap = max(1, cap - step)
            keep = _select(classes, draws, ids, cap, pinned)
            reason = f"answer class over {cap} questions (a constant answer scored above {100 * float(ceiling):g}%)"
        if prior(keep) > float(ceiling) + 1e-12:
            # Out of reach (the answers are too alike for any subset to spread): gutting the type would not
            # remove the prior, only the questions, so only the share cap applies and stats shows the baseline.
            keep, reason = share_keep, share_reason
    return keep, reason


def control_group(
    part: pl.DataFrame, rule: TaskRule, seed: int, pinned: np.ndarray | None = None
) -> tuple[np.ndarray, str]:
    """Keep mask of one group's rows and the reason the others were dropped.

    The control never makes a baseline worse: for numbers the mode is a property
    of the kept set (with all answers distinct it is the smallest one), so a
    share cap can raise it, as it did for 20 synthetic rooms (18.0 -> 21.0).
    When the first choice of survivors scores above the whole group, up to
    ``RESAMPLE_ATTEMPTS`` other seeded choices are tried and the lowest-scoring
    one that does not rise is kept; if none exists the group is left whole.

    ``pinned`` (a mask over the rows, or None) marks questions a reviewer accepted: every choice keeps
    them, and they count toward their class's cap before any other member, so the kept set stays
    within the share and ceiling as far as the pins allow.
    """
    settings = balance_settings(rule)
    bin_width = float(settings.get("bin_width", 0.1))
    classes = _classes(part, bin_width)
    ids = part["id"].to_list()
    mcq = bool(part["options"].list.len().max() or 0)
    answers = content_answers(part)
    values = part["answer_value"].to_list()
    question_type = rule.question_type
    on_best = not mcq and settings.get("ceiling_on") == "best_constant"

    def content(keep: np.ndarray) -> float:
        return content_frequency(question_type, [a for a, k in zip(answers, keep) if k], mcq) or 0.0

    def best(keep: np.ndarray) -> float:
        return best_constant_score([v for v, k in zip(values, keep) if k]) or 0.0

    prior = best if on_best else content
    whole = np.ones(part.height, dtype=bool)
    before = (content(whole), best(whole) if on_best else 0.0)

    ceiling = settings.get("max_frequency")
    numbers = np.asarray([math.nan if v is None else v for v in values], dtype=float) if on_best else None

    def no_worse(keep: np.ndarray) -> bool:
        if on_best and ceiling is not None and best(keep) <= float(ceiling) + 1e-12:
            return True  # the bound holds for every constant answer, the mode under any tie-break included
        return content(keep) <= before[0] + 1e-12 and (not on_best or best(keep) <= before[1] + 1e-12)

    def draws(purpose: str) -> list[float]:  # soft pins (the previous release's questions) first: ``stability``
        return preferred_draws(part, unit_draws(seed, purpose, ids))

    keep, reason = _capped_keep(part, rule, classes, draws("distribution"), prior, pinned, numbers)
    if keep.all() or no_worse(keep):
        return keep, reason
    chosen = None
    for attempt in range(1, RESAMPLE_ATTEMPTS + 1):
        other, other_reason = _capped_keep(
            part, rule, classes, draws(f"distribution/{attempt}"), prior, pinned, numbers
        )
        if no_worse(other) and (chosen is None or prior(other) < prior(chosen[0]) - 1e-12):
            chosen = (other, other_reason)
    return chosen if chosen is not None else (whole, "")


BLIND_REASON = "the blind (text-only) baseline scored outside its bound on these questions"
BLIND_ROUNDS = 3  # blind pass, then the constant bound again, until neither drops anything


def _hold_blind(part: pl.DataFrame, rule: TaskRule, keep: np.ndarray, seed: int, pinned: np.ndarray | None) -> np.ndarray:
    """``keep`` after the blind control (``blind_control``); for numbers the constant bound is re-established."""
    from pipeline.qa.blind_control import control_blind
    from pipeline.scoring.blind import BlindGroup

    mcq = bool(part["options"].list.len().max() or 0)
    draws = preferred_draws(part, np.asarray(unit_draws(seed, "distribution/blind", part["id"].to_list()), dtype=float))
    settings = balance_settings(rule)
    ceiling = settings.get("max_frequency")
    on_best = not mcq and settings.get("ceiling_on") == "best_constant" and ceiling is not None
    values = np.asarray([math.nan if v is None else v for v in part["answer_value"].to_list()], dtype=float)
    start = keep
    reached = on_best and (best_constant_score(values[keep]) or 0.0) <= float(ceiling) + 1e-12
    blind = BlindGroup(part)
    for _ in range(BLIND_ROUNDS):
        after = control_blind(part, rule, keep, draws, pinned, mcq, blind)
        if reached:  # the control met the ceiling: keep it met, unless no selection of this set does
            again = keep_under_ceiling(values, draws, after, float(ceiling), pinned)
            after = again if again.any() else after
        if (after == keep).all():
            break
        keep = after
    answers = content_answers(part)
    content = lambda k: content_frequency(rule.question_type, [a for a, x in zip(answers, k) if x], mcq) or 0.0  # noqa: E731
    allowed = max(content(start), content(np.ones(part.height, dtype=bool)), _content_bound(part, rule, mcq, keep))
    if content(keep) > allowed + 1e-12:
        return start  # the blind pass never lifts the content baseline over its bound, nor over where it was
    return keep


def _content_bound(part: pl.DataFrame, rule: TaskRule, mcq: bool, keep: np.ndarray) -> float:
    """How high the blind pass may lift the content baseline of ``keep``: the type's own bound on it.

    Dropping a handful of questions the blind guess gets wrong (or right) lifts the share of the most frequent
    correct text a little, whatever they are; holding that share where it was undid every such pass. On 20
    synthetic scans it undid a closest-distance pass that met chance by dropping 5 of 160 questions (content
    6.9% -> 7.1%, far below chance, 25%), and left a guesser with no prior at all (a seeded letter) 5.6 points
    under chance. The bound is ``max_frequency`` where the type sets one; for choices ``max_share`` (the
    content baseline is the top correct text's share), else the blind bound's top (chance + margin: always
    naming one text is itself a text-only guesser). Numbers without a ceiling stay where they were (-inf).
    """
    from pipeline.qa.blind_control import blind_target

    settings = balance_settings(rule)
    if settings.get("max_frequency") is not None:
        return float(settings["max_frequency"])
    if mcq and settings.get("max_share") is not None:
        return float(settings["max_share"])
    if not mcq:
        return -math.inf
    target = blind_target(part["options"].list.len().fill_null(0).to_numpy(), rule, True, np.flatnonzero(keep))
    return target[1] if target is not None else -math.inf


def _with_mentions(qa: pl.DataFrame, balanced: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the controlled rows, every real-video row), both with their mentions (``adversary_features``)."""
    from pipeline.scoring.adversary_features import with_mentions

    real = with_mentions(qa.with_row_index("_row").filter(pl.col("video_kind").fill_null("real") == "real"))
    return real.filter(pl.col("question_type").is_in(balanced)), real


def _scene_context(real: pl.DataFrame, dropped_rows: list[int]):
    """The scene context of the real-video questions the earlier steps kept."""
    from pipeline.scoring.adversary_features import SceneContext

    gone = pl.Series("_gone", dropped_rows, dtype=real["_row"].dtype)
    return SceneContext(real.filter(~pl.col("_row").is_in(gone)))


def _prune(
    part: pl.DataFrame, rule: TaskRule, keep: np.ndarray, seed: int, pinned, context, reasons: np.ndarray, first_round: int = 1
) -> tuple[np.ndarray, int]:
    """``keep`` after Iterative Bias Pruning (``bias_pruning``), the constant ceiling and the blind bound held again.

    Pruning drops the questions the adversary answers best, which for numbers can leave a denser mode (a
    constant answer over the ceiling) or a blind prior over its bound: both are re-established as
    ``_hold_blind`` does, and their drops keep their own reasons. Neither pruning nor those steps may lift the
    content baseline over where it was or its bound (``_content_bound``): a round that would stops pruning, and
    a re-established bound that would leaves the group as it came. Returns (keep, pruning rounds).
    """
    from pipeline.qa.bias_pruning import prune_group
    from pipeline.qa.blind_control import control_blind

    settings = balance_settings(rule)
    mcq = bool(part["options"].list.len().max() or 0)
    answers = content_answers(part)
    content = lambda k: content_frequency(rule.question_type, [a for a, x in zip(answers, k) if x], mcq) or 0.0  # noqa: E731
    allowed = max(content(keep), content(np.ones(part.height, dtype=bool)), _content_bound(part, rule, mcq, keep))
    holds = lambda k: content(k) <= allowed + 1e-12  # noqa: E731
    pruned, why, summary = prune_group(part, context, settings, seed, keep, pinned, first_round, holds)
    reasons[keep & ~pruned] = why[keep & ~pruned]
    draws = preferred_draws(part, np.asarray(unit_draws(seed, "distribution/blind", part["id"].to_list()), dtype=float))
    ceiling = settings.get("max_frequency")
    after = pruned
    if not mcq and settings.get("ceiling_on") == "best_constant" and ceiling is not None:
        values = np.asarray([math.nan if v is None else v for v in part["answer_value"].to_list()], dtype=float)
        if (best_constant_score(values[after]) or 0.0) > float(ceiling) + 1e-12:
            again = keep_under_ceiling(values, draws, after, float(ceiling), pinned)
            if again.any():
                reasons[after & ~again] = f"a constant answer scored above {100 * float(ceiling):g}% (after pruning)"
                after = again
    if settings.get("blind"):
        held = control_blind(part, rule, after, draws, pinned, mcq)
        if summary["floor"] is None or held.sum() >= min(summary["floor"], after.sum()):  # never below the floor
            reasons[after & ~held] = BLIND_REASON
            after = held
    if not holds(after):  # the ceiling or blind step after pruning lifted the content baseline: none of it is taken
        reasons[keep & ~after] = ""
        return keep, 0
    return after, summary["rounds"]


@recorded  # with the scene contexts it builds: the cost ``scan2qa bench dataset`` reports
def _prune_all(ordered: pl.DataFrame, profile: Profile, seed: int, pinned, real_rows: pl.DataFrame, decided: list, dropped: list[int]) -> None:
    """Iterative Bias Pruning of every group with ``balance.adversary``, updating ``decided`` in place.

    The last selection: the adversary reads each scene as the other rules left it, and pruning repeats
    (``bias_pruning.CONTEXT_PASSES``) with the scenes as the previous pass left them until a pass drops nothing.
    """
    from pipeline.qa.bias_pruning import CONTEXT_PASSES

    dropped = list(dropped)
    rounds = [0] * len(decided)
    for _ in range(CONTEXT_PASSES):
        context = _scene_context(real_rows, dropped)
        changed = False
        for index, (_, part) in enumerate(ordered.group_by(list(GROUP), maintain_order=True)):
            rule = profile.task(part["question_type"][0])
            if not balance_settings(rule).get("adversary"):
                continue
            pins = part["_pinned"].to_numpy() if pinned else None
            pins = pins if pins is not None and pins.any() else None
            keep, reasons = decided[index]
            after, done = _prune(part, rule, keep, seed, pins, context, reasons, rounds[index] + 1)
            rounds[index] += done
            if (after != keep).any():
                changed = True
                dropped += part["_row"].filter(pl.Series(keep & ~after)).to_list()
                decided[index] = (after, reasons)
        if not changed:
            return


def _history_free_if_as_stable(part, rule, seed, pins, soft, keep, reasons) -> tuple[np.ndarray, np.ndarray]:
    """The group decided as a first build would (no tiers) when that keeps as many soft pins as ``keep``, lets no
    more of what the previous control dropped back in, and meets every bound ``keep`` meets; else ``keep``.

    Soft pins make a decision depend on the releases before it. Where that history changes nothing that matters
    (a scan put back whose questions return anyway, a rebuild of the same scans), the group gets a first build's
    bytes, drop reasons included, so a deployment that went through releases ends where a fresh build of the same
    scans does.
    """
    fresh, fresh_reasons = _decide(part.drop(PREFERENCE), rule, seed, pins)
    if np.array_equal(fresh, keep):
        return fresh, fresh_reasons  # the same questions: a first build's reasons for the drops
    released = np.zeros(part.height, dtype=bool) if soft is None else soft
    dropped_before = (part[PREFERENCE] == 1).to_numpy()
    fewer_released = (released & fresh).sum() < (released & keep).sum()
    more_back = (dropped_before & fresh).sum() > (dropped_before & keep).sum()
    if fewer_released or more_back:
        return keep, reasons  # history-free would churn more: fewer released questions, or more old ones back
    if not all(f or not k for f, k in zip(_bounds_met(part, rule, fresh), _bounds_met(part, rule, keep))):
        return keep, reasons
    return fresh, fresh_reasons


def _decide(part: pl.DataFrame, rule: TaskRule, seed: int, pins: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, reasons) of one group under its share, ceiling and blind rules, before pruning."""
    keep, reason = control_group(part, rule, seed, pins)
    reasons = np.full(part.height, reason, dtype=object)
    if balance_settings(rule).get("blind"):
        blind_keep = _hold_blind(part, rule, keep, seed, pins)
        reasons[keep & ~blind_keep] = BLIND_REASON
        keep = blind_keep
    return keep, reasons


def _bounds_met(part: pl.DataFrame, rule: TaskRule, keep: np.ndarray) -> tuple[bool, bool, bool, bool]:
    """Whether ``keep`` meets the group's share cap, its constant ceiling, its blind bound, and leaves the content
    baseline no higher than the whole group's or its bound: what holding the soft pins may not give up."""
    from pipeline.qa.blind_control import blind_target
    from pipeline.scoring.blind import BlindGroup

    settings = balance_settings(rule)
    mcq = bool(part["options"].list.len().max() or 0)
    answers = content_answers(part)
    content = lambda k: content_frequency(rule.question_type, [a for a, x in zip(answers, k) if x], mcq) or 0.0  # noqa: E731
    share, ceiling = settings.get("max_share"), settings.get("max_frequency")
    share_met = share is None or _max_share(_classes(part, float(settings.get("bin_width", 0.1))), keep) <= float(share) + 1e-12
    if ceiling is None:
        ceiling_met = True
    elif not mcq and settings.get("ceiling_on") == "best_constant":
        values = [v for v, k in zip(part["answer_value"].to_list(), keep) if k]
        ceiling_met = (best_constant_score(values) or 0.0) <= float(ceiling) + 1e-12
    else:
        ceiling_met = content(keep) <= float(ceiling) + 1e-12
    blind_met = True
    if settings.get("blind") and keep.any():
        target = blind_target(part["options"].list.len().fill_null(0).to_numpy(), rule, mcq, np.flatnonzero(keep))
        if target is not None:
            mean = float(BlindGroup(part).harness_scores(keep).mean())
            blind_met = target[0] - 1e-12 <= mean <= target[1] + 1e-12
    whole = np.ones(part.height, dtype=bool)
    no_raise = content(keep) <= max(content(whole), _content_bound(part, rule, mcq, keep)) + 1e-12
    return share_met, ceiling_met, blind_met, no_raise


def control_distribution(
    qa: pl.DataFrame,
    profile: Profile,
    seed: int,
    pinned: Collection[str] = frozenset(),
    previous: PreviousRelease | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kept qa rows, ``qa_distribution_drops`` record) under the profile's ``balance`` rules.

    ``pinned`` question ids (accepted by a reviewer) are never dropped; ``previous`` release's questions are
    soft pins (``stability``); with neither, nothing changes.
    """
    balanced = [qt for qt, rule in profile.tasks.items() if rule.balance]
    real = (pl.col("video_kind").fill_null("real") == "real") & pl.col("question_type").is_in(balanced)
    controlled = qa.with_row_index("_row").filter(real)
    if controlled.is_empty():
        return qa, schemas.empty("qa_distribution_drops")
    pruning = any(balance_settings(rule).get("adversary") for rule in profile.tasks.values())
    real_rows = None
    if pruning:
        controlled, real_rows = _with_mentions(qa, balanced)
    if pinned:
        controlled = controlled.with_columns(id_among(pinned).alias("_pinned"))
    controlled = with_preference(controlled, previous)
    dropped_rows: list[int] = []
    records: list[dict] = []
    decided = []
    ordered = controlled.sort([*GROUP, "id"])
    for _, part in ordered.group_by(list(GROUP), maintain_order=True):
        rule = profile.task(part["question_type"][0])
        pins = part["_pinned"].to_numpy() if pinned else None
        pins = pins if pins is not None and pins.any() else None
        keep, reasons = _decide(part, rule, seed, pins)
        soft = soft_pins(part)
        if soft is not None and (soft & ~keep).any():
            # A soft pin went: hold every one of them, unless that misses a bound the preference alone meets.
            held, held_reasons = _decide(part, rule, seed, soft if pins is None else pins | soft)
            if all(h or not p for h, p in zip(_bounds_met(part, rule, held), _bounds_met(part, rule, keep))):
                keep, reasons = held, held_reasons
        if PREFERENCE in part.columns:
            keep, reasons = _history_free_if_as_stable(part, rule, seed, pins, soft, keep, reasons)
        decided.append((keep, reasons))
        dropped_rows += part["_row"].filter(pl.Series(~keep)).to_list()
    if pruning:
        _prune_all(ordered, profile, seed, pinned, real_rows, decided, dropped_rows)
        dropped_rows = []
    for (_, part), (keep, reasons) in zip(ordered.group_by(list(GROUP), maintain_order=True), decided):
        rule = profile.task(part["question_type"][0])
        if keep.all():
            continue
        bin_width = float(balance_settings(rule).get("bin_width", 0.1))
        lost = part.filter(pl.Series(~keep))
        if pruning:
            dropped_rows += lost["_row"].to_list()
        lost_reasons = reasons[~keep].tolist()
        for row, cls, answer, why in zip(lost.iter_rows(named=True), _classes(lost, bin_width), content_answers(lost), lost_reasons):
            records.append(
                {
                    "id": row["id"], "key": row["key"], "profile": row["profile"], "budget": row["budget"],
                    "video_kind": row["video_kind"] or "real", "question_type": row["question_type"],
                    "answer": answer, "answer_class": cls, "reason": why,
                }
            )
    if not dropped_rows:
        return qa, schemas.empty("qa_distribution_drops")
    mask = np.ones(qa.height, dtype=bool)
    mask[dropped_rows] = False
    drops = schemas.from_rows("qa_distribution_drops", sorted(records, key=lambda r: (r["profile"], r["budget"], r["question_type"], r["id"])))
    return qa.filter(pl.Series(mask)), drops


def row_classes(qa: pl.DataFrame, profile: Profile) -> pl.Series:
    """Each row's answer class for types with a ``balance`` rule, "" for every other row.

    The per-scene cap ranks a scan's questions by (rank within their class, draw),
    so a scan gives one question of each class before a second of any; for a type
    without a rule every row shares the class "" and the order is the draw alone.
    """
    balanced = {qt: float(balance_settings(r).get("bin_width", 0.1)) for qt, r in profile.tasks.items() if r.balance}
    out = [""] * qa.height
    if balanced and qa.height:
        rows = qa.with_row_index("_row").filter(pl.col("question_type").is_in(list(balanced)))
        for (qt,), part in rows.group_by("question_type", maintain_order=True):
            for row, cls in zip(part["_row"].to_list(), _classes(part, balanced[qt])):
                out[row] = cls
    return pl.Series("_class", out, dtype=pl.String)
