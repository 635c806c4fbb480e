"""Settings a deployment gives through its environment, parsed one way: a bad value is one line naming it."""

from __future__ import annotations

import os


def env_seconds(variable: str, default: int) -> int:
    """A whole number of seconds, at least 1, from ``variable`` (``default`` when unset)."""
    value = os.environ.get(variable, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{variable}={value!r}: expected a whole number of seconds, at least 1")
    return int(value)
