"""Builders of small synthetic qa tables and videos for the scoring and export tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline import schemas
from pipeline.scoring import metrics
from pipeline.frames.video_paths import budget_video_path

LETTERS = "ABCD"
_NQ_RANGES = {
    "object_counting_single": (2, 9, True),
    "object_counting_multiple": (3, 12, True),
    "object_abs_distance": (1.0, 6.0, False),
    "object_size_estimation": (20, 250, True),
    "room_size_estimation_single": (8.0, 40.0, False),
    "room_size_estimation_multiple": (10.0, 80.0, False),
}
SSP_TRUTH = {
    "target": "mobile phone",
    "support_surface": "table",
    "references": [
        {"object": "laptop", "relation": "next_to", "distance_cm": 8.0},
        {"object": "cup", "relation": "near", "distance_cm": 25.0},
    ],
}


def _row(qid: str, scene: str, budget: str, qtype: str, profile: str = "revsi", **extra) -> dict:
    row = {
        "id": qid,
        "key": f"synthetic/{scene}",
        "dataset": "synthetic",
        "scene_id": scene,
        "profile": profile,
        "budget": budget,
        "question_type": qtype,
        "template": qtype,
        "question": f"Question {qid} of type {qtype}?",
        "options": [],
        "ground_truth": "",
        "answer_value": None,
        "used_obj_ids": [1, 2],
        "video": budget_video_path(budget, f"synthetic/{scene}"),
        "video_kind": "real",
        "distance_source": None,
        "geometry": "{}",
        "instruction": None,
        "split": "test",
    }
    row.update(extra)
    return row


def revsi_rows(n: int, seed: int = 0, budget: str = "16", scenes: int = 5) -> list[dict]:
    """n random ReVSI questions spread over every type."""
    gen = np.random.default_rng(seed)
    types = list(_NQ_RANGES) + [t for t in metrics.REVSI_MCQ_TYPES if t != "obj_appearance_order"]
    rows = []
    for i in range(n):
        qtype = types[i % len(types)]
        scene = f"synth{i % scenes:04d}_00"
        qid = f"q{budget}_{i:05d}"
        if qtype in _NQ_RANGES:
            low, high, integer = _NQ_RANGES[qtype]
            value = float(gen.integers(low, high + 1)) if integer else round(float(gen.uniform(low, high)), 1)
            truth = str(int(value)) if integer else f"{value:.1f}"
            rows.append(_row(qid, scene, budget, qtype, ground_truth=truth, answer_value=value))
        else:
            count = 3 if qtype.endswith("_easy") else 4
            options = [f"{LETTERS[k]}. option {k} for {qid}" for k in range(count)]
            rows.append(_row(qid, scene, budget, qtype, options=options, ground_truth=LETTERS[int(gen.integers(count))]))
    return rows


def pinpoint_rows(scenes: int = 3) -> list[dict]:
    rows = []
    for s in range(scenes):
        scene = f"synth{s:04d}_00"
        base = dict(profile="pinpointqa", budget="all")
        rows.append(_row(f"p{s}_tpv_yes", scene, qtype="presence", ground_truth="Yes", **base))
        rows.append(_row(f"p{s}_tpv_no", scene, qtype="presence", ground_truth="No", **base))
        rows.append(
            _row(
                f"p{s}_nri",
                scene,
                qtype="reference_mcq",
                options=["A. laptop", "B. cup", "C. lamp", "D. book"],
                ground_truth="A",
                **base,
            )
        )
        rows.append(
            _row(
                f"p{s}_ssp",
                scene,
                qtype="structured_localization",
                ground_truth=json.dumps(SSP_TRUTH),
                instruction="Answer with a JSON object.",
                **base,
            )
        )
        rows.append(
            _row(
                f"p{s}_fsd",
                scene,
                qtype="free_form_localization",
                ground_truth="The mobile phone is on the table, 8 cm to the side of the laptop.",
                instruction="Describe where the object is.",
                **base,
            )
        )
    return rows


def qa_frame(rows: list[dict]):
    return schemas.from_rows("qa", rows)


def write_video(path: Path, frames: int = 4, size: tuple[int, int] = (32, 24)) -> Path:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 4.0, size)
    for k in range(frames):
        writer.write(np.full((size[1], size[0], 3), 40 * k % 255, dtype=np.uint8))
    writer.release()
    return path


def write_release(root: Path, rows: list[dict], videos: bool = True) -> Path:
    from pipeline.scoring.release import write_qa

    write_qa(root, qa_frame(rows))
    if videos:
        for video in sorted({r["video"] for r in rows}):
            write_video(root / video)
    return root


def test_support_builds_valid_tables():
    qa = qa_frame(revsi_rows(30) + pinpoint_rows(1))
    assert qa.height == 35
    assert set(qa.columns) == set(schemas.schema("qa").names)
