"""One ``qa_candidates`` row of the ``pinpointqa`` profile: the fields every task fills the same way.

Shared by the per-scan questions and the dataset-wide presence draw, so a negative drawn for a scene is the
same kind of row, with the same id rule, as the questions generated inside it.
"""

from __future__ import annotations

import json

from pipeline.frames.video_paths import budget_video_path
from pipeline.pinpoint import templates as T
from pipeline.qa.ids import question_id

PROFILE = "pinpointqa"


def question_row(
    key: str, budget: str, qtype: str, template: str, question: str, ground_truth: str, used, **extra
) -> dict:
    used = sorted({int(i) for i in used})
    dataset, scene_id = key.split("/", 1)
    return {
        "id": question_id(key, budget, PROFILE, qtype, "real", question, used),
        "key": key,
        "dataset": dataset,
        "scene_id": scene_id,
        "profile": PROFILE,
        "budget": budget,
        "question_type": qtype,
        "template": template,
        "question": question,
        "options": extra.get("options", []),
        "ground_truth": ground_truth,
        "answer_value": None,
        "used_obj_ids": used,
        "video": budget_video_path(budget, key),
        "video_kind": "real",
        "distance_source": extra.get("distance_source"),
        "geometry": json.dumps(extra.get("geometry", {}), sort_keys=True),
        "instruction": T.INSTRUCTIONS[qtype],
        "split": None,
    }
