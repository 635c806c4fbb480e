"""Filling question templates and formatting options.

Harnesses compare question text and option strings literally, so every string
that reaches the ``qa`` table is produced here from the profile's template.
"""

from __future__ import annotations

import string
from collections.abc import Sequence


def template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def render(template: str, **values: object) -> str:
    """Fill a template; a missing or unexpected field is a profile error, not a silent blank."""
    wanted = template_fields(template)
    missing = wanted - set(values)
    if missing:
        raise KeyError(f"template {template!r} needs {sorted(missing)}")
    return template.format(**{k: v for k, v in values.items() if k in wanted})


def format_options(texts: Sequence[str], letters: Sequence[str]) -> list[str]:
    """``["A. left", "B. right", ...]`` — the released benchmarks' option format."""
    if len(texts) > len(letters):
        raise ValueError(f"{len(texts)} options but only {len(letters)} letters")
    return [f"{letter}. {text}" for letter, text in zip(letters, texts)]


def option_text(option: str) -> str:
    """The text of an ``"A. text"`` option."""
    head, sep, tail = option.partition(". ")
    return tail if sep and len(head) == 1 else option
