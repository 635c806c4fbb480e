"""Question profiles: which question types a benchmark asks, with which templates and thresholds.

A profile is configuration, not code: ``profiles/<name>.yaml`` lists every
question type with its generator family, template, exclusion list, keep
probabilities, caps and family parameters. ``revsi`` and ``vsibench`` run the
same generators with different YAML, so the two benchmarks differ only where
their rules differ. A path to a YAML file works wherever a profile name does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import ConfigError
from pipeline.qa.families import FAMILIES
from pipeline.qa.rules import Profile, TaskRule

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"

_TASK_KEYS = frozenset(
    {"family", "template", "exclude", "skip_budgets", "keep", "cap_per_scene", "max_candidates", "params", "balance"}
)


def _task(name: str, question_type: str, spec: Any) -> TaskRule:
    where = f"profile {name!r}, task {question_type!r}"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(spec) - _TASK_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; known: {sorted(_TASK_KEYS)}")
    family = spec.get("family")
    if family not in FAMILIES:
        raise ConfigError(f"{where}: unknown family {family!r}; known: {sorted(FAMILIES)}")
    template = spec.get("template")
    if not isinstance(template, str) or not template:
        raise ConfigError(f"{where}: missing template")
    return TaskRule(
        question_type=question_type,
        family=family,
        template=template,
        template_id=f"{name}/{question_type}",
        exclude=frozenset(str(n).lower() for n in spec.get("exclude") or ()),
        skip_budgets=tuple(str(b) for b in spec.get("skip_budgets") or ()),
        keep=dict(spec.get("keep") or {}),
        cap_per_scene=spec.get("cap_per_scene"),
        max_candidates=spec.get("max_candidates"),
        params=dict(spec.get("params") or {}),
        balance=_balance(where, spec.get("balance")),
    )


_BALANCE_KEYS = frozenset({"bin_width", "max_share", "max_frequency", "ceiling_on", "dedupe", "blind", "blind_margin",
                           "adversary", "adversary_margin"})


def _balance(where: str, spec: Any) -> dict[str, Any]:
    if not spec:
        return {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: balance must be a mapping")
    unknown = sorted(set(spec) - _BALANCE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown balance keys {unknown}; known: {sorted(_BALANCE_KEYS)}")
    for key in ("max_share", "max_frequency"):
        if key in spec and not 0.0 < float(spec[key]) <= 1.0:
            raise ConfigError(f"{where}: balance.{key} must be in (0, 1]")
    return dict(spec)


@functools.lru_cache(maxsize=16)
def load_profile(name_or_path: str) -> Profile:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
        raise ConfigError(f"{path}: no question profile {name_or_path!r}; known: {known}")
    try:
        raw = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: same data, 8x less CPU
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), dict):
        raise ConfigError(f"{path}: expected a mapping with a 'tasks' mapping")
    name = str(raw.get("name") or path.stem)
    tasks = {str(qt): _task(name, str(qt), spec) for qt, spec in raw["tasks"].items()}
    return Profile(
        name=name,
        tasks=tasks,
        letters=tuple(raw.get("letters") or "ABCDEF"),
        dummy=dict(raw.get("dummy") or {}),
    )
