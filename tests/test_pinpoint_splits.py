"""Scene-level splits: no leakage, ≈ 6:2:2, dataset and task proportions kept, stable under additions."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.pinpoint.splits import SPLITS, assign_splits, with_splits
from pipeline.pinpoint.templates import QUESTION_TYPES

DATASETS = ("scannet", "scannetpp", "synthetic")


def _counts(n_scenes: int, seed: int, prefix: str = "scene") -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_scenes):
        dataset = DATASETS[int(rng.choice(3, p=[0.3, 0.6, 0.1]))]
        key = f"{dataset}/{prefix}{i:04d}_00"
        targets = int(rng.integers(1, 6))
        per_task = {
            "presence": 2 * targets,
            "reference_mcq": int(rng.binomial(targets, 0.7)),
            "free_form_localization": int(rng.binomial(targets, 0.95)),
            "structured_localization": int(rng.binomial(targets, 0.95)),
        }
        for task, count in per_task.items():
            if count:
                rows.append({"key": key, "dataset": dataset, "question_type": task, "count": count})
    return pl.DataFrame(rows, schema={"key": pl.String, "dataset": pl.String, "question_type": pl.String, "count": pl.Int64})


def _proportions(counts: pl.DataFrame, mapping: dict[str, str]):
    frame = counts.with_columns(pl.col("key").replace_strict(mapping).alias("split"))
    total = frame["count"].sum()
    whole_task = {t: frame.filter(pl.col("question_type") == t)["count"].sum() / total for t in QUESTION_TYPES}
    whole_ds = {d: frame.filter(pl.col("dataset") == d)["count"].sum() / total for d in DATASETS}
    per_split = {}
    for s in SPLITS:
        part = frame.filter(pl.col("split") == s)
        n = part["count"].sum()
        per_split[s] = (
            n / total,
            {t: part.filter(pl.col("question_type") == t)["count"].sum() / n for t in QUESTION_TYPES},
            {d: part.filter(pl.col("dataset") == d)["count"].sum() / n for d in DATASETS},
        )
    return whole_task, whole_ds, per_split


def test_proportions_on_a_few_hundred_scenes():
    for seed in (0, 1, 2):
        counts = _counts(300, seed)
        mapping = assign_splits(counts)
        assert set(mapping) == set(counts["key"])  # one split per scene: nothing leaks
        whole_task, whole_ds, per_split = _proportions(counts, mapping)
        for split, target in zip(SPLITS, (0.6, 0.2, 0.2)):
            share, tasks, datasets = per_split[split]
            assert abs(share - target) <= 0.03, (seed, split, share)
            for t in QUESTION_TYPES:
                assert abs(tasks[t] - whole_task[t]) <= 0.03, (seed, split, t)
            for d in DATASETS:
                assert abs(datasets[d] - whole_ds[d]) <= 0.03, (seed, split, d)


def test_stable_across_rebuilds_and_other_datasets():
    counts = _counts(200, 5)
    first = assign_splits(counts)
    assert assign_splits(counts.sample(fraction=1.0, shuffle=True, seed=3)) == first
    extra = _counts(40, 6, prefix="extra").filter(pl.col("dataset") != "scannet")
    grown = assign_splits(pl.concat([counts, extra]))
    scannet = [k for k in first if k.startswith("scannet/")]
    assert all(grown[k] == first[k] for k in scannet)


def test_previous_assignment_is_frozen():
    counts = _counts(200, 8)
    first = assign_splits(counts)
    grown = assign_splits(pl.concat([counts, _counts(50, 9, prefix="new")]), previous=first)
    assert all(grown[k] == v for k, v in first.items())


def test_with_splits_fills_the_qa_column():
    from pipeline import schemas

    rows = [
        {"id": f"q{i}", "key": f"scannet/s{i % 7}", "dataset": "scannet", "question_type": QUESTION_TYPES[i % 4], "profile": "pinpointqa"}
        for i in range(40)
    ]
    qa = with_splits(schemas.from_rows("qa", rows))
    assert qa["split"].null_count() == 0
    assert qa.group_by("key").agg(pl.col("split").n_unique())["split"].max() == 1


def test_most_scenes_keep_their_split_when_scenes_are_added():
    counts = _counts(300, 0)
    first = assign_splits(counts)
    grown = assign_splits(pl.concat([counts, _counts(30, 99, prefix="add")]))
    moved = sum(first[k] != grown[k] for k in first)
    assert moved <= 0.25 * len(first)
