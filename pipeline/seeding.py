"""Seeded random generators derived from stable names.

Every random choice takes its generator from (config seed, scan key, purpose),
so adding a scan or a question type never reshuffles the others, and the same
inputs give byte-identical tables.
"""

from __future__ import annotations

import hashlib

import numpy as np


def stable_int(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def rng(seed: int, *parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_int(seed, *parts))


def stable_id(*parts: object, length: int = 16) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:length]
