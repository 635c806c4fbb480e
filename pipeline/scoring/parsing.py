"""Reading a model's reply as a letter, a number or yes/no, in two modes.

``harness`` reproduces lmms-eval's ``revsi``/``vsibench`` rule exactly (reasoning
blocks removed as lmms-eval's evaluator removes them by default, then the first
space-separated token of the stripped reply, trailing periods removed, compared
case-insensitively; numbers through ``float``), so scores here equal the
published leaderboards'. ``robust`` removes the same blocks first, then also reads what models actually write
("The answer is B", "B) chair", "2.5 meters", "three") so that format slips can
be told apart from spatial mistakes; both modes report which replies they could
not read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline import question_types

MODES: tuple[str, ...] = ("harness", "robust")


@dataclass(frozen=True)
class Parsed:
    """The value read from a reply (letter, float, "yes"/"no") and whether the reply was readable."""

    value: str | float | None
    ok: bool


# lmms-eval's default ``--reasoning_tags`` (``lmms_eval/__main__.py``, v0.7.2), applied in this order.
REASONING_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<analysis>", "</analysis>"))


def strip_reasoning(reply: str, tag_pairs: Sequence[tuple[str, str]] = REASONING_TAGS) -> str:
    """lmms-eval's ``strip_reasoning_tags`` (``lmms_eval/api/reasoning.py``, v0.7.2), rule for rule.

    Per tag pair: cut from the first opening tag to the first closing tag after it, while both occur; then,
    if a closing tag is left without any opening tag (a chat template that prefilled ``<think>``), keep what
    follows the last one. Tags match case-sensitively; an opening tag never closed stays, with its text.
    The result is stripped of surrounding whitespace, as there.
    """
    result = reply
    for start_tag, end_tag in tag_pairs:
        while start_tag in result and end_tag in result:
            start = result.find(start_tag)
            end = result.find(end_tag, start)
            if end == -1:
                break
            result = result[:start] + result[end + len(end_tag) :]
        if end_tag in result and start_tag not in result:
            result = result.rsplit(end_tag, 1)[-1]
    return result.strip()


def harness_token(reply: object) -> str:
    """lmms-eval's ``fuzzy_matching``: first token split on a single space, trailing '.' stripped."""
    return str(reply).strip().split(" ")[0].rstrip(".").strip()


def option_letters(options: Sequence[str] | None) -> list[str]:
    """Letters of ``"A. text"`` options (A-D when the question carries none)."""
    letters = []
    for option in options or ():
        match = re.match(r"\s*([A-Za-z])[.)]", option)
        if match:
            letters.append(match.group(1).upper())
    return letters or ["A", "B", "C", "D"]


def _option_texts(options: Sequence[str] | None) -> dict[str, str]:
    texts = {}
    for option in options or ():
        match = re.match(r"\s*([A-Za-z])[.)]\s*(.*)$", option, flags=re.S)
        if match:
            texts[match.group(1).upper()] = match.group(2).strip().lower().rstrip(".")
    return texts


def finite_float(text: str) -> float | None:
    """The number a plain numeric string holds, or None (also for nan/inf)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- harness mode


def parse_harness(reply: object, kind: str, options: Sequence[str] | None = None) -> Parsed:
    token = harness_token(strip_reasoning(str(reply)))
    if kind == "nq":
        try:
            value = float(token)
        except ValueError:
            return Parsed(None, False)
        return Parsed(value, math.isfinite(value))
    if kind == "mcq":
        return Parsed(token, token.upper() in option_letters(options))
    if kind == "yesno":
        # PinpointQA reads a Yes/No label; "Yes," and "No!" are the label with punctuation, not another answer
        label = token.rstrip(",;:!").lower()
        return Parsed(label, label in ("yes", "no"))
    raise ValueError(f"no harness parsing for answer kind {kind!r}")


# ----------------------------------------------------------------- robust mode

_ANSWER_LEAD = re.compile(
    r"(?:final\s+answer|answer|option|choice)\s*(?:is|would\s+be|:|=)?\s*[:\-]?\s*[\"'*(\[]*\s*([A-Za-z])\s*[\"'*)\].,:;!]*(?=\s|$)",
    re.I,
)
_LEADING_LETTER = re.compile(r"^[\"'*(\[]*([A-Za-z])(?:[\"'*)\].:,;]+|\s*$|\s+[-–:]?\s*\S)")
_BARE_LETTER = re.compile(r"(?<![A-Za-z'])\(?([A-Z])\)?(?![A-Za-z'])")


def _robust_choice(reply: str, options: Sequence[str] | None) -> Parsed:
    letters = option_letters(options)
    text = reply.strip().replace("**", "")
    if not text:
        return Parsed(None, False)
    for match in _ANSWER_LEAD.finditer(text):
        if match.group(1).upper() in letters:
            return Parsed(match.group(1).upper(), True)
    match = _LEADING_LETTER.match(text)
    if match and match.group(1).upper() in letters:
        letter = match.group(1).upper()
        # "a chair" is an article, not option A, unless the reply is just the letter or a marked letter
        if letter != "A" or match.group(1) == "A" or re.match(r"^[\"'*(\[]*a[\"'*)\].:,;]", text) or text.lower() == "a":
            return Parsed(letter, True)
    texts = _option_texts(options)
    lowered = text.lower().rstrip(".")
    exact = [letter for letter, body in texts.items() if body and lowered == body]
    if len(exact) == 1:
        return Parsed(exact[0], True)
    mentioned = [letter for letter, body in texts.items() if body and re.search(rf"\b{re.escape(body)}\b", lowered)]
    if len(mentioned) == 1:
        return Parsed(mentioned[0], True)
    bare = sorted({m.group(1) for m in _BARE_LETTER.finditer(text) if m.group(1) in letters})
    if len(bare) == 1:
        return Parsed(bare[0], True)
    return Parsed(None, False)


_UNITS_TO_METRES: dict[str, float] = {
    "mm": 0.001,
    "millimeter": 0.001,
    "millimetre": 0.001,
    "cm": 0.01,
    "centimeter": 0.01,
    "centimetre": 0.01,
    "m": 1.0,
    "meter": 1.0,
    "metre": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "inch": 0.0254,
    "ft": 0.3048,
    "foot": 0.3048,
    "feet": 0.3048,
}
# The unit a numeric question type is asked in (metres or centimetres; the table's ``unit``); others are unit-free
# or areas.
_EXPECTED_UNIT: dict[str, float] = {qt.name: qt.unit for qt in question_types.QUESTION_TYPES if qt.unit is not None}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_WITH_UNIT = re.compile(
    rf"({_NUMBER})\s*(square\s+(?:meters?|metres?)|sq\.?\s*m|m2|m²|mm|cm|km|m|millimet(?:er|re)s?|centimet(?:er|re)s?|"
    r"met(?:er|re)s?|inch(?:es)?|in|ft|foot|feet)?(?![A-Za-z])",
    re.I,
)

_SMALL_NUMBERS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS = {word: 10 * (i + 2) for i, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALES = {"hundred": 100, "thousand": 1000}
_NUMBER_WORDS = re.compile(
    r"\b(?:(?:" + "|".join(list(_SMALL_NUMBERS) + list(_TENS) + list(_SCALES) + ["and", "a"]) + r")[\s-]*)+\b",
    re.I,
)


def _words_to_number(phrase: str) -> float | None:
    """'twenty-one' -> 21, 'two hundred and five' -> 205; None when no number word is present."""
    total, current, seen = 0, 0, False
    for word in re.split(r"[\s-]+", phrase.lower().strip()):
        if word in _SMALL_NUMBERS:
            current += _SMALL_NUMBERS[word]
            seen = True
        elif word in _TENS:
            current += _TENS[word]
            seen = True
        elif word == "hundred":
            current = max(current, 1) * 100
            seen = True
        elif word == "thousand":
            total += max(current, 1) * 1000
            current = 0
            seen = True
    return float(total + current) if seen else None


def _unit_scale(unit: str | None) -> float | None:
    if not unit:
        return None
    key = unit.lower().rstrip("s") if unit.lower() not in ("feet", "inches") else unit.lower()
    key = {"inche": "inch", "inches": "inch", "metre": "metre"}.get(key, key)
    return _UNITS_TO_METRES.get(key)


def _robust_number(reply: str, question_type: str) -> Parsed:
    text = reply.strip().replace("**", "")
    if not text:
        return Parsed(None, False)
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,200 -> 1200
    lead = re.search(r"answer\s*(?:is|would\s+be|:|=)\s*(.*)$", text, re.I | re.S)
    candidates = [lead.group(1), text] if lead else [text]
    for candidate in candidates:
        match = _NUMBER_WITH_UNIT.search(candidate)
        if match:
            value = finite_float(match.group(1))
            if value is None:
                continue
            scale, expected = _unit_scale(match.group(2)), _EXPECTED_UNIT.get(question_type)
            if scale is not None and expected is not None:
                value = value * scale / expected
            return Parsed(value, True)
        for words in _NUMBER_WORDS.finditer(candidate):
            value = _words_to_number(words.group(0))
            if value is not None:
                return Parsed(value, True)
    return Parsed(None, False)


def _robust_yes_no(reply: str) -> Parsed:
    match = re.search(r"\b(yes|no)\b", reply.lower())
    return Parsed(match.group(1), True) if match else Parsed(None, False)


def parse_robust(reply: object, kind: str, options: Sequence[str] | None = None, question_type: str = "") -> Parsed:
    text = "" if reply is None else strip_reasoning(str(reply))
    if kind == "nq":
        return _robust_number(text, question_type)
    if kind == "mcq":
        return _robust_choice(text, options)
    if kind == "yesno":
        return _robust_yes_no(text)
    raise ValueError(f"no robust parsing for answer kind {kind!r}")


def parse_reply(
    reply: object, kind: str, mode: str, options: Sequence[str] | None = None, question_type: str = ""
) -> Parsed:
    if mode == "harness":
        return parse_harness("" if reply is None else reply, kind, options)
    if mode == "robust":
        return parse_robust(reply, kind, options, question_type)
    raise ValueError(f"unknown parsing mode {mode!r}; choose one of {MODES}")


def matches_choice(parsed: Parsed, ground_truth: str) -> bool:
    """Case-insensitive comparison of a parsed letter / yes-no with the ground truth (the harness rule)."""
    return parsed.value is not None and str(parsed.value).lower() == str(ground_truth).strip().lower()
