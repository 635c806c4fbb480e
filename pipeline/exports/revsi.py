"""ReVSI / lmms-eval layout (SPEC §7): one Hugging Face config per frame budget.

``<out>/<N>_frame/test-00000-of-00001.parquet`` holds exactly the fields the
lmms-eval ``revsi`` task reads, and ``<out>/<N>_frame/<scene_id>.mp4`` the
videos it resolves from ``num_frames`` and ``scene_id`` — the same relative
layout as ReVSI's Hub cache, so the folder can be used as that task's cache
directory unchanged. A dataset card and a ready-to-include lmms-eval task
folder go with it.

Dummy-video questions (SPEC §2) share their scene id with the real video,
which the ``revsi`` layout cannot tell apart, so they go to extra configs
``16_frame_<kind>`` (``query_drop``, ``first_frame``, ``black``) whose rows carry
the same fields plus ``video`` (the video path relative to the export); the
generated task evaluates them as the ``scan2qa_revsi_dummy`` group, and the
benchmark configs keep exactly the ``revsi`` fields.
``id`` is the qa table's stable string id (the harness never reads it, and
keeping it lets ``scan2qa eval`` score harness outputs directly); ``num_frames``
is a string because the all-frame budget is named ``all``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.exports.common import (
    PARQUET_NAME,
    budget_order,
    config_name,
    place_video,
    require_video,
    select_rows,
    write_parquet,
    write_text,
)
from pipeline.frames.budgets import budget_sort_key
from pipeline.exports.dataset_card import dataset_card
from pipeline.exports.lmms_eval_task import write_task_folder
from pipeline.scoring.release import Release

REVSI_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("dataset", pa.string()),
        ("scene_id", pa.string()),
        ("num_frames", pa.string()),
        ("question_type", pa.string()),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("ground_truth", pa.string()),
    ]
)
DUMMY_SCHEMA = REVSI_SCHEMA.append(pa.field("video", pa.string()))


def _record(row: dict, budget: str) -> dict:
    return {
        "id": row["id"],
        "dataset": row["dataset"],
        "scene_id": row["scene_id"],
        "num_frames": budget,
        "question_type": row["question_type"],
        "question": row["question"],
        "options": list(row["options"] or []),
        "ground_truth": str(row["ground_truth"]),
    }


def _export_dummies(release: Release, out: Path, profile: str, link: bool) -> list[tuple[str, Path, int, list[str]]]:
    qa = release.qa.filter(
        (pl.col("profile") == profile) & (pl.col("video_kind").fill_null("real") != "real")
    ).sort(["video_kind", "budget", "scene_id", "question_type", "id"])
    written = []
    for (kind, budget), part in qa.group_by(["video_kind", "budget"], maintain_order=True):
        name = f"{config_name(budget)}_{kind}"
        records = []
        for row in part.iter_rows(named=True):
            source = require_video(release, row)
            relative = f"{name}/{source.name}"
            place_video(source, out / relative, link)
            records.append({**_record(row, budget), "video": relative})
        parquet = out / name / PARQUET_NAME
        write_parquet(pa.Table.from_pylist(records, schema=DUMMY_SCHEMA), parquet)
        written.append((name, parquet, len(records), sorted(set(part["question_type"].to_list()))))
    return written


def export_revsi(release: Release, out: Path, profile: str = "revsi", link: bool = True) -> dict[str, int]:
    """Write the per-budget configs, videos, card and lmms-eval task; returns questions per config."""
    out = Path(out)
    rows = select_rows(release, profile)
    counts: dict[str, int] = {}
    card_configs, task_configs = [], []
    for budget in sorted(rows["budget"].unique().to_list(), key=budget_order):
        name = config_name(budget)
        part = rows.filter(rows["budget"] == budget)
        records = []
        for row in part.iter_rows(named=True):
            video = require_video(release, row)
            place_video(video, out / name / f"{row['scene_id']}.mp4", link)
            records.append(_record(row, budget))
        parquet = out / name / PARQUET_NAME
        write_parquet(pa.Table.from_pylist(records, schema=REVSI_SCHEMA), parquet)
        counts[name] = len(records)
        card_configs.append((name, f"{name}/{PARQUET_NAME}", len(records)))
        task_configs.append((name, parquet))
    dummies = _export_dummies(release, out, profile, link)
    for name, parquet, n, _ in dummies:
        counts[name] = n
        card_configs.append((name, f"{name}/{PARQUET_NAME}", n))
    write_text(
        out / "README.md",
        dataset_card(
            f"scan2qa {profile} benchmark",
            card_configs,
            REVSI_SCHEMA,
            "Video spatial-reasoning questions in the ReVSI layout: one config per frame budget, videos at "
            "`<N>_frame/<scene_id>.mp4`. Evaluate with lmms-eval: "
            "`--include_path lmms_eval_task --tasks scan2qa_revsi` (or the built-in `revsi` task with this folder "
            "as its cache directory). Configs `16_frame_<kind>` hold the dummy-video probes (query-dropped, "
            "first-frame-repeated and black videos; `--tasks scan2qa_revsi_dummy`, scored as ReVSI Tables 5-6: "
            "`object_counting_exact_match`, 0 being the only right count, and on black videos "
            "`object_size_estimation_mra`, lower is better) and add a `video` field. The task folder finds every "
            "file relative to itself (or under `$SCAN2QA_EXPORT_ROOT`), so the export can be moved.",
            config_schemas={name: DUMMY_SCHEMA for name, *_ in dummies},
        ),
    )
    # The release's own budgets are numbers or "all" (pipeline.frames.budgets.budget_sort_key); other names are samplers'.
    budget_configs = {config_name(b) for b in rows["budget"].unique().to_list() if budget_sort_key(b)[0] < 2}
    write_task_folder(
        out,
        [c for c in task_configs if c[0] in budget_configs],
        [(name, parquet) for name, parquet, _, _ in dummies],
        dummy_types={name: types for name, _, _, types in dummies},
        sampled_configs=[c for c in task_configs if c[0] not in budget_configs],
    )
    return counts
