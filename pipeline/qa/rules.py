"""A profile and its question types as parsed from YAML (``pipeline.qa.profiles`` loads and checks them).

Apart from the loader so that the generator families, which read a ``TaskRule``, sit below the loader that
checks a profile's family names against them (``pipeline.qa.families``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import ConfigError


@dataclass(frozen=True)
class TaskRule:
    """One question type of a profile."""

    question_type: str
    family: str
    template: str
    template_id: str
    exclude: frozenset[str] = frozenset()
    skip_budgets: tuple[str, ...] = ()
    keep: dict[str, Any] = field(default_factory=dict)
    cap_per_scene: int | None = None
    max_candidates: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    balance: dict[str, Any] = field(default_factory=dict)  # answer-distribution control (pipeline/qa/distribution.py)

    def excludes(self, name: str) -> bool:
        return name.lower() in self.exclude


@dataclass(frozen=True)
class Profile:
    name: str
    tasks: dict[str, TaskRule]
    letters: tuple[str, ...]
    dummy: dict[str, Any]

    def task(self, question_type: str) -> TaskRule:
        try:
            return self.tasks[question_type]
        except KeyError:
            raise ConfigError(f"profile {self.name!r} has no question type {question_type!r}") from None
