"""PinpointQA layout (SPEC §7): one JSON per scene, ``{"qa_pairs": [...]}``, plus the scene videos and splits.

Task names are PinpointQA's: ``presence`` (TPV), ``reference_mcq`` (NRI),
``free_form_localization`` (FSD) and ``structured_localization`` (SSP). The SSP
ground truth stays the JSON string the model is asked to produce. Files:
``qa/<scene_id>.json``, ``videos/<scene_id>.mp4`` and ``splits.json`` (scene
ids per split).
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline import question_types
from pipeline.exports.common import place_video, require_video, select_rows, write_text
from pipeline.scoring.release import Release

TASK_NAMES: tuple[str, ...] = question_types.names("pinpointqa")


def export_pinpointqa(release: Release, out: Path, profile: str = "pinpointqa", link: bool = True) -> dict[str, int]:
    out = Path(out)
    rows = select_rows(release, profile)
    unknown = sorted(set(rows["question_type"].to_list()) - set(TASK_NAMES))
    if unknown:
        raise ValueError(f"pinpointqa export: question types {unknown} are not PinpointQA task names {TASK_NAMES}")
    counts: dict[str, int] = {}
    splits: dict[str, set[str]] = {}
    for (scene_id,), scene_rows in rows.sort(["scene_id", "question_type", "id"]).group_by(
        ["scene_id"], maintain_order=True
    ):
        pairs = []
        for row in scene_rows.iter_rows(named=True):
            video = f"videos/{scene_id}.mp4"
            place_video(require_video(release, row), out / video, link)
            pair = {
                "id": row["id"],
                "question_type": row["question_type"],
                "question": row["question"],
                "instruction": row["instruction"],
                "ground_truth": row["ground_truth"],
                "dataset": row["dataset"],
                "scene_id": scene_id,
                "video": video,
                "budget": row["budget"],
                "split": row["split"],
            }
            if row["options"]:
                pair["options"] = list(row["options"])
            pairs.append(pair)
            splits.setdefault(row["split"] or "unsplit", set()).add(scene_id)
        write_text(out / "qa" / f"{scene_id}.json", json.dumps({"qa_pairs": pairs}, indent=2, ensure_ascii=False) + "\n")
        counts[scene_id] = len(pairs)
    write_text(out / "splits.json", json.dumps({k: sorted(v) for k, v in sorted(splits.items())}, indent=2) + "\n")
    return counts
