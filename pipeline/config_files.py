"""Config files: a YAML mapping read with one-line errors, and nested config dataclasses built from it.

Shared by the run config (``pipeline.config``) and the PinpointQA thresholds
(``pipeline.pinpoint.config``) so that neither imports the other to load a file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import ConfigError


def build_dataclass(cls, values: dict[str, Any], where: str):
    """A (nested) config dataclass from a mapping; unknown keys are an error naming where they were."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
    kwargs = {}
    for name, value in values.items():
        default = getattr(cls(), name)
        if dataclasses.is_dataclass(default):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{name}: expected a mapping, got {type(value).__name__}")
            kwargs[name] = build_dataclass(type(default), value, f"{where}.{name}")
        elif isinstance(default, tuple):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; a missing or malformed file is a one-line ConfigError."""
    candidate = Path(path)
    if not candidate.exists():
        raise ConfigError(f"{candidate}: config file not found")
    try:
        values = yaml.safe_load(candidate.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{candidate}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(values, dict):
        raise ConfigError(f"{candidate}: expected a mapping at the top level")
    return values
