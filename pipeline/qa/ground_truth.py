"""The answer record every generator returns, and the answer formats of SPEC §4.

Numeric answers are number strings (counts and sizes in integer units,
distances and areas with one decimal) and ``answer_value`` holds the same
number, so a scorer never re-parses text. Multiple-choice answers carry the
correct option's text; letters are assigned later by the dataset-wide
balancing step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Question:
    question_type: str
    template_id: str
    question: str
    used_obj_ids: list[int]
    geometry: dict[str, Any]
    answer_text: str  # numeric string for NQ, correct option text for MCQ
    answer_value: float | None = None
    options: list[str] | None = None  # option texts (MCQ); order is not final
    video_kind: str = "real"
    video: str | None = None  # overrides the budget's video (dummy videos)
    distance_source: str | None = None


def count_answer(n: int) -> tuple[str, float]:
    return str(int(n)), float(int(n))


def centimetre_answer(metres: float) -> tuple[str, float]:
    cm = int(round(float(metres) * 100.0))
    return str(cm), float(cm)


def one_decimal_answer(value: float) -> tuple[str, float]:
    text = f"{float(value):.1f}"
    return text, float(text)
