"""PinpointQA presence (TPV) that cannot be answered without looking.

A yes/no question about a small object is answerable blind when anything but the video tells the answer. Three
things did on the first releases: the category (a label asked only ever as absent is always "No"), how common it
is, and whether the scene's other questions name it (a localisation question about the mug gives "Is there a mug?"
away). The rules here remove all three:

* **Mention**: a negative is absent from its scene, so no other question of that scene can name it; therefore a
  positive must not be named either. Positives are small-vocabulary labels of the scene that no other question of
  the scene shows a model (question text and options, any profile, any budget) names, word-wise with plurals and
  synonyms (``named_labels``). The per-scan step reserves such labels for presence (``questions``).
* **Category and frequency**: every label asked somewhere is asked "Yes" as often as "No" in expectation, and
  each of its answers is a draw of its own. The draw (``draw_presence``, run by the ``pinpoint_qa`` step) matches
  each positive with a negative of the same label, in a scene where no object's label or category overlaps it
  (``absent_labels``), and asks one side of each pair, chosen at random. A label nobody has is never asked, a
  label everybody has loses the positives no scene can match.
* **No balance a held-out fold can invert**: asking both sides of every pair balanced each label exactly, and
  exact balance is itself a pattern. Cross-validated by scene (the learned adversary, SPEC §6), holding out a
  scene where a label is "Yes" leaves its "No" in the training folds; the training prior of the label is then
  the opposite of the held-out answer, a nested model learns to invert it, and on 20 synthetic scans it answered
  58-70% (its category prior 35-44%). With one side per pair, a label's answers are independent draws and no
  fold says anything about another: on the same scans 28-42% without the scene's other questions, 26-48% with
  them, the category prior 44-48% (46-50 questions a budget, one standard error 7 points).
* **Scenes**: the program keeps as many negatives in a scene as positives, so a scene's expected share of
  "Yes" is one half whatever it holds; the side of each pair is drawn so that every budget pattern of a split is
  half "Yes" (an odd number of pairs leaves one over, on a drawn side).
* **Keyed**: the side is drawn from the release's letter key (``pipeline.qa.letter_key``; the environment's
  when the caller passes none, and one line saying how to give one when there is none): the seed ships with the
  release, the key does not, so a side is never a draw anyone holding the release can repeat.
* **Per split**: the draw is made within each scene-level split (``draw_presence_per_split``), so no pair
  spans two splits.

The matching keeps as many positives as can be matched: a maximum circulation over positives (scene -> label) and
candidate negatives (label -> a scene that lacks it, from a seeded shortlist of ``OFFER_PER_POSITIVE`` scenes per
positive), one linear program whose vertex solutions are integral (network matrix), seeded costs in the last
digits choosing among equally large draws. Positives are grouped by
the budgets they are visible in, so a negative is asked in exactly the budgets of a positive of its scene.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from scipy.optimize import linprog

from pipeline import schemas
from pipeline.pinpoint import templates as T
from pipeline.pinpoint.rows import question_row
from pipeline.qa.letter_key import LetterKey, required
from pipeline.seeding import stable_int
from pipeline.vocab import SMALL_OBJECT_LABELS, SMALL_OBJECT_SYNONYMS, normalize_label, small_object_category

PRESENCE = "presence"
OFFER_PER_POSITIVE = 8  # candidate host scenes offered to the draw per positive of a label


def spellings(label: str) -> set[str]:
    """The words a question may use for a small-object label: itself, its category and the category's synonyms."""
    label = normalize_label(label)
    category = small_object_category(label)
    same = {name for name, cat in SMALL_OBJECT_SYNONYMS.items() if cat == category}
    return {label, category} | same


def _plural_forms(word: str) -> list[str]:
    forms = [word, word + "s", word + "es"]
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    if word.endswith("fe"):
        forms.append(word[:-2] + "ves")
    elif word.endswith("f"):
        forms.append(word[:-1] + "ves")
    return forms


def label_pattern(label: str) -> re.Pattern:
    forms = sorted({f for s in spellings(label) for f in _plural_forms(s)}, key=lambda f: (-len(f), f))
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(f) for f in forms) + r")(?![a-z0-9])")


def named_labels(texts: Iterable[str], labels: Iterable[str]) -> set[str]:
    """The labels among ``labels`` that some text names (lowercase, word-wise, plurals and synonyms)."""
    blob = "\n".join(t.lower() for t in texts if t)
    return {label for label in labels if label_pattern(label).search(blob)}


def shown_texts(rows: pl.DataFrame) -> list[str]:
    """What a model is shown of each row besides the video: the question and its options."""
    if rows.is_empty():
        return []
    return [" ".join([q or "", *(o or [])]) for q, o in zip(rows["question"].to_list(), rows["options"].to_list())]


def presence_row(key: str, budget: str, label: str, present: bool, object_ids=()) -> dict:
    """One TPV row; the wording is a hash of scene and label, the same whatever the answer."""
    name = sorted(T.PRESENCE_QUESTIONS)[stable_int("pinpoint-template", key, "tpv", label) % len(T.PRESENCE_QUESTIONS)]
    question = T.PRESENCE_QUESTIONS[name].format(a_target=T.with_article(label))
    geometry = {"present": present, "label": label, "object_ids": sorted(int(i) for i in object_ids)}
    return question_row(key, budget, PRESENCE, name, question, "Yes" if present else "No", object_ids, geometry=geometry)


_TEMPLATE_RES = [
    re.compile("^" + re.escape(t).replace(re.escape("{a_target}"), r"an? (?P<label>.+?)") + "$")
    for t in T.PRESENCE_QUESTIONS.values()
]


def asked_label(question: str) -> str | None:
    """The label a TPV question asks about, read back from its wording."""
    for pattern in _TEMPLATE_RES:
        m = pattern.match(question)
        if m:
            return normalize_label(m.group("label"))
    return None


def absent_labels(scene_labels) -> list[str]:
    """Vocabulary labels safe to ask about as absent: no object's label or category is, contains or is
    contained in them word-wise ("bag" is not absent from a scene with a "paper bag")."""
    present = {normalize_label(label) for label in scene_labels}
    present |= {small_object_category(label) for label in present}
    padded = [f" {p} " for p in present]

    def overlaps(label: str) -> bool:
        word = f" {label} "
        return any(word in p or p in word for p in padded)

    return sorted({lab for lab in SMALL_OBJECT_LABELS if not overlaps(lab) and not overlaps(small_object_category(lab))})


# --- the dataset-wide draw -------------------------------------------------------------------------------------


def _match_pattern(
    items: list[tuple[str, str]], absent: Mapping[str, set[str]], taken: set[tuple[str, str]], seed: int, tag: str
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Positives (scene, label) kept and negatives (scene, label) drawn for one budget pattern.

    A maximum circulation: keep positive p (scene s, label l) and draw negative n (scene s', label l) with
    Σ kept = Σ drawn per scene and per label. The constraint matrix is a network matrix, so the simplex vertex
    is integral; seeded costs in the last digits pick among equally large draws.
    """
    items = sorted(items)
    demand = Counter(label for _, label in items)
    hosts = sorted({key for key, _ in items})
    offered: dict[str, list[str]] = defaultdict(list)
    for s in hosts:
        for label in absent.get(s, ()):
            if label in demand and (s, label) not in taken:
                offered[label].append(s)
    # A label needs one host per positive: a seeded shortlist of OFFER_PER_POSITIVE hosts per positive keeps the
    # program small at thousands of scenes (the full list grows with scenes x labels) and the draw as large.
    negatives = []
    for label, scenes in offered.items():
        room = OFFER_PER_POSITIVE * demand[label]
        if len(scenes) > room:
            scenes = sorted(scenes, key=lambda s: (stable_int("tpv-offer", seed, tag, label, s), s))[:room]
        negatives += [(s, label) for s in scenes]
    negatives.sort()
    if not negatives:
        return [], []
    scene_index = {s: i for i, s in enumerate(hosts)}
    labels = sorted(demand)
    label_index = {label: len(hosts) + i for i, label in enumerate(labels)}
    n_pos, n_var = len(items), len(items) + len(negatives)
    rows, cols, vals = [], [], []
    for j, (s, label) in enumerate(items):
        rows += [scene_index[s], label_index[label]]
        cols += [j, j]
        vals += [1.0, 1.0]
    for j, (s, label) in enumerate(negatives, start=n_pos):
        rows += [scene_index[s], label_index[label]]
        cols += [j, j]
        vals += [-1.0, -1.0]
    a_eq = csr_matrix((vals, (rows, cols)), shape=(len(hosts) + len(labels), n_var))
    jitter = np.array([stable_int("tpv-draw", seed, tag, s, label) / 2.0**64 for s, label in [*items, *negatives]])
    cost = -(1.0 + jitter / (4.0 * n_var))
    result = linprog(cost, A_eq=a_eq, b_eq=np.zeros(a_eq.shape[0]), bounds=(0.0, 1.0), method="highs-ds")
    if result.status != 0:
        raise RuntimeError(f"presence draw: the balancing program failed ({result.message})")
    chosen = result.x > 0.5
    kept = [it for j, it in enumerate(items) if chosen[j]]
    drawn = [it for j, it in enumerate(negatives, start=n_pos) if chosen[j]]
    return kept, drawn


def _pairs(kept: list[tuple[str, str]], drawn: list[tuple[str, str]], seed: int, tag: str) -> list[tuple[str, str, str]]:
    """(label, scene where it is, scene where it is not) pairs of one pattern's draw, matched per label in a
    seeded order: the program's per-label balance makes the two lists of every label equally long."""
    yes: dict[str, list[str]] = defaultdict(list)
    no: dict[str, list[str]] = defaultdict(list)
    for key, label in kept:
        yes[label].append(key)
    for key, label in drawn:
        no[label].append(key)
    pairs = []
    for label in sorted(yes):
        order = (lambda key, label=label: (stable_int("tpv-pair", seed, tag, label, key), key))
        pairs += [(label, a, b) for a, b in zip(sorted(yes[label], key=order), sorted(no[label], key=order))]
    return pairs


def _sides(pairs: list[tuple[str, str, str]], seed: int, tag: str, key: LetterKey | None) -> list[bool]:
    """For each pair, whether its "Yes" side is asked: half the pairs of a pattern (an odd count's extra pair
    either way), which half being a keyed draw (the seed alone ships with the release)."""
    names = [f"{tag}\x1f{label}\x1f{a}\x1f{b}" for label, a, b in pairs]
    draws = required(key).ints(seed, "presence/side", names)
    ranked = sorted(range(len(pairs)), key=lambda j: (draws[j], names[j]))
    first = bool(draws[ranked[0]] & 1) if ranked else True  # which side an odd count's extra pair takes
    asked_yes = [False] * len(pairs)
    for rank, j in enumerate(ranked):
        asked_yes[j] = (rank % 2 == 0) == first
    return asked_yes


def draw_presence(
    positives: pl.DataFrame, scene_labels: Mapping[str, Iterable[str]], seed: int, key: LetterKey | None = None
) -> pl.DataFrame:
    """The released TPV rows: one question per matched (positive, negative) pair, its side drawn (module doc).

    ``positives`` are the per-scan steps' "Yes" rows (every budget); ``scene_labels`` every object label of
    every scene of the benchmark (what "absent" is judged against); ``key`` the release's letter key, which
    draws the sides (without it, the environment's: ``letter_key.required``).
    """
    if positives.is_empty():
        return schemas.empty("qa_candidates")
    geometry = [json.loads(g) for g in positives["geometry"].to_list()]
    budgets: dict[tuple[str, str], set[str]] = defaultdict(set)
    rows_of: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row, geo in zip(positives.iter_rows(named=True), geometry):
        item = (row["key"], geo["label"])
        budgets[item].add(row["budget"])
        rows_of[item].append(row)
    absent = {scene: set(absent_labels(labels)) for scene, labels in scene_labels.items()}
    by_pattern: dict[tuple[str, ...], list[tuple[str, str]]] = defaultdict(list)
    for item, bs in budgets.items():
        by_pattern[tuple(sorted(bs))].append(item)
    taken: set[tuple[str, str]] = set()
    out: list[dict] = []
    for pattern in sorted(by_pattern, key=lambda p: (-len(p), p)):
        tag = "|".join(pattern)
        kept, negatives = _match_pattern(by_pattern[pattern], absent, taken, seed, tag)
        taken |= set(negatives)
        pairs = _pairs(kept, negatives, seed, tag)
        for (label, there, not_there), yes in zip(pairs, _sides(pairs, seed, tag, key)):
            if yes:
                out += rows_of[(there, label)]
            else:
                out += [presence_row(not_there, b, label, False) for b in pattern]
    frame = schemas.from_rows("qa_candidates", out)
    return frame.sort(["key", "budget", "id"])


def draw_presence_per_split(
    candidates: pl.DataFrame, scene_labels: Mapping[str, Iterable[str]], seed: int, config=None,
    key: LetterKey | None = None,
) -> tuple[pl.DataFrame, dict[str, str]]:
    """The candidates with their presence rows drawn, and the scene splits the draw was made within.

    Scenes are split first (each positive counted once: it brings one question, in its scene or in the scene
    of its negative) and every split is drawn on its own, so no pair crosses splits and every split is half
    "Yes". Pass the mapping to ``splits.with_splits`` as ``previous``.
    """
    from pipeline.pinpoint.splits import SPLITS, assign_splits, scene_task_counts

    positives = candidates.filter(pl.col("question_type") == PRESENCE)
    mapping = assign_splits(scene_task_counts(candidates), config)
    drawn = [
        draw_presence(positives.filter(pl.col("key").is_in([k for k, s in mapping.items() if s == split])),
                      scene_labels, seed, key)
        for split in SPLITS
    ]
    return pl.concat([candidates.filter(pl.col("question_type") != PRESENCE), *drawn]), mapping
