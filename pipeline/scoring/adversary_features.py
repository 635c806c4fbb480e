"""What the learned blind adversary reads of a question: its text, its options and its scene's other questions.

A model without the video still reads the category names a question mentions,
the option texts, and, when a benchmark is released whole, every other
question asked about the same scene. Brown et al. 2025 ("Benchmark designers
should train on the test set") found that this is enough to beat chance on
VSI-Bench; the features here are the ones that carried their Test-set
Stress-Test, written for our tables:

* *categories* are the words of a question that are not its template's: a
  word in more than half of a type's questions is template ("How", "many",
  "the", "(s)"), every maximal run of other words is one category name. No
  template file is needed, so PinpointQA and VSI-Bench rows are read alike;
* a question's *mentions* are its categories and its option texts; the scene
  context of a question counts, over the other questions of the same scene,
  profile and budget, how many there are of each type and how often each of
  its mentions appears in them (the "Yes" of a presence question whose object
  another question names; a room with many questions being a large room).

Nothing here depends on an answer: target statistics are fitted per fold in
``adversary``.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import polars as pl

from pipeline.seeding import stable_int

TEMPLATE_SHARE = 0.5  # a word in more than this share of a type's questions belongs to its template
CONTEXT_BUCKETS = 8  # hashed bag of the categories a scene's questions mention
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*|[^\sA-Za-z0-9]")
_WORD = re.compile(r"[A-Za-z0-9]")


def option_text(option: str) -> str:
    """"B. chair" -> "chair" (an option without a letter is its own text)."""
    head, _, rest = option.partition(". ")
    return rest if rest and len(head) == 1 else option


def question_categories(questions: list[str]) -> list[list[str]]:
    """The category names of each question of one type, in order of appearance (see the module docstring)."""
    tokens = [_TOKEN.findall(q.lower()) for q in questions]
    share = Counter(w for words in tokens for w in {t for t in words if _WORD.match(t)})
    template = {w for w, n in share.items() if n > TEMPLATE_SHARE * max(len(questions), 1)}
    out = []
    for words in tokens:
        found, run = [], []
        for t in words:
            if _WORD.match(t) and t not in template:
                run.append(t)
                continue
            if run:
                found.append(" ".join(run))
                run = []
        if run:
            found.append(" ".join(run))
        out.append(list(dict.fromkeys(found)))
    return out


def with_mentions(qa: pl.DataFrame) -> pl.DataFrame:
    """``qa`` with ``_categories`` (list of category names) and ``_mentions`` (categories and option texts)."""
    categories: list[list[str]] = [[] for _ in range(qa.height)]
    indexed = qa.select("question_type", "question").with_row_index("_r")
    for _, part in indexed.group_by("question_type", maintain_order=True):
        for row, found in zip(part["_r"].to_list(), question_categories([str(q) for q in part["question"].to_list()])):
            categories[row] = found
    mentions = [
        sorted(set(cats) | {option_text(o).lower() for o in (options or [])})
        for cats, options in zip(categories, qa["options"].to_list())
    ]
    return qa.with_columns(
        pl.Series("_categories", categories, dtype=pl.List(pl.String)),
        pl.Series("_mentions", mentions, dtype=pl.List(pl.String)),
    )


class SceneContext:
    """Counts over the questions of each (profile, budget, scene): per type, and per mention.

    Built once from the questions a reader of the benchmark would see together (one profile and budget of
    the released table, real videos); a question's own contribution is taken off when it is asked about.
    """

    def __init__(self, qa: pl.DataFrame, types: list[str] | None = None):
        frame = qa if "_mentions" in qa.columns else with_mentions(qa)
        self.types = sorted(set(frame["question_type"].to_list())) if types is None else list(types)
        self._type_index = {t: i for i, t in enumerate(self.types)}
        self.per_type: dict[tuple, np.ndarray] = {}
        self.mentions: dict[tuple, Counter] = {}
        self.type_mentions: dict[tuple, Counter] = {}
        for profile, budget, key, qtype, mentioned in frame.select(
            "profile", "budget", "key", "question_type", "_mentions"
        ).iter_rows():
            scene = (profile, budget, key)
            counts = self.per_type.setdefault(scene, np.zeros(len(self.types), dtype=float))
            if qtype in self._type_index:
                counts[self._type_index[qtype]] += 1
            self.mentions.setdefault(scene, Counter()).update(mentioned)
            self.type_mentions.setdefault(scene, Counter()).update((qtype, m) for m in mentioned)

    def width(self) -> int:
        return len(self.types) + 2 + CONTEXT_BUCKETS

    def scene_features(self, scene: tuple, question_type: str) -> np.ndarray:
        """Questions per type (this question not counted), all of them, distinct mentions, and a hashed bag."""
        counts = self.per_type.get(scene, np.zeros(len(self.types))).copy()
        if question_type in self._type_index:
            counts[self._type_index[question_type]] = max(counts[self._type_index[question_type]] - 1, 0)
        mentioned = self.mentions.get(scene, Counter())
        bag = np.zeros(CONTEXT_BUCKETS)
        for name, n in mentioned.items():
            bag[stable_int("adversary/bag", name) % CONTEXT_BUCKETS] += n
        return np.concatenate([counts, [counts.sum(), len(mentioned)], bag])

    def others(self, scene: tuple, question_type: str, name: str, own: bool) -> tuple[float, float]:
        """(mentions of ``name`` in the scene's other questions, of them in questions of the same type)."""
        total = self.mentions.get(scene, Counter()).get(name, 0) - int(own)
        same = self.type_mentions.get(scene, Counter()).get((question_type, name), 0) - int(own)
        return float(max(total, 0)), float(max(same, 0))
