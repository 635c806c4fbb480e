"""Scene-level train/val/test splits (≈ 6:2:2) that keep dataset and task proportions.

All questions of a scene share its split, so no scene leaks across splits.

Method (deterministic, no state needed):

1. Strata are datasets: a scene is only ever compared with scenes of its own
   dataset, so the dataset proportions of every split follow the targets and
   adding scenes of one dataset never moves a scene of another.
2. Within a dataset, scenes are visited in the order of a salted hash of their
   key (``sha256(salt, key)``), an order that no scene property and no
   other scene can change.
3. Each scene goes to the split that minimises the squared deviation of every
   split's per-task question counts from its target share of the running
   per-task totals (ties: train, val, test). This greedy balancing keeps both
   the 6:2:2 ratio (in questions) and the task mix of every split close to
   the whole.

Stability: a rebuild over the same scenes gives the same splits; adding a
scene of another dataset changes nothing; adding a scene of the same dataset
can only move scenes visited after it. To freeze a released split, pass it as
``previous``: those scenes keep their split (they still count in the running
totals) and only new scenes are placed.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.pinpoint.config import PinpointConfig
from pipeline.pinpoint.templates import QUESTION_TYPES
from pipeline.seeding import stable_int

SPLITS: tuple[str, ...] = ("train", "val", "test")


def scene_task_counts(qa: pl.DataFrame) -> pl.DataFrame:
    """(key, dataset, question_type, count) of a qa table."""
    return qa.group_by(["key", "dataset", "question_type"]).agg(pl.len().alias("count")).sort(["key", "question_type"])


def assign_splits(
    counts: pl.DataFrame,
    config: PinpointConfig | None = None,
    previous: dict[str, str] | None = None,
) -> dict[str, str]:
    """Scene key -> split, from per-scene task counts (``scene_task_counts``)."""
    cfg = config or PinpointConfig()
    fractions = np.asarray(cfg.splits.fractions, dtype=float)
    fractions = fractions / fractions.sum()
    previous = previous or {}
    tasks = sorted(set(counts["question_type"].to_list()) | set(QUESTION_TYPES))
    task_index = {t: i for i, t in enumerate(tasks)}
    per_scene: dict[tuple[str, str], np.ndarray] = {}
    for r in counts.iter_rows(named=True):
        vec = per_scene.setdefault((r["dataset"], r["key"]), np.zeros(len(tasks)))
        vec[task_index[r["question_type"]]] += r["count"]
    result: dict[str, str] = {}
    for dataset in sorted({d for d, _ in per_scene}):
        scenes = sorted(
            (k for d, k in per_scene if d == dataset), key=lambda k: (stable_int(cfg.splits.salt, k), k)
        )
        split_counts = np.zeros((len(SPLITS), len(tasks)))
        totals = np.zeros(len(tasks))
        for key in scenes:
            q = per_scene[(dataset, key)]
            totals += q
            if previous.get(key) in SPLITS:
                choice = SPLITS.index(previous[key])
            else:
                target = fractions[:, None] * totals[None, :]
                costs = []
                for s in range(len(SPLITS)):
                    trial = split_counts.copy()
                    trial[s] += q
                    costs.append(float(np.sum((trial - target) ** 2)))
                choice = int(np.argmin(costs))
            split_counts[choice] += q
            result[key] = SPLITS[choice]
    return result


def with_splits(
    qa: pl.DataFrame, config: PinpointConfig | None = None, previous: dict[str, str] | None = None
) -> pl.DataFrame:
    """The qa table with its ``split`` column filled by scene."""
    mapping = assign_splits(scene_task_counts(qa), config, previous)
    split = pl.Series("split", [mapping[k] for k in qa["key"].to_list()], dtype=pl.String)
    return qa.with_columns(split)
