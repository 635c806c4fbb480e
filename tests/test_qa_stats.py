"""``scan2qa stats``: counts, answer distributions and baselines."""

from __future__ import annotations

import json

import pytest

from pipeline import schemas
from scan2qa import main
from pipeline.qa.stats import compute_stats
from pipeline.storage import upath, write_table


def _row(i, qt, gt, options=(), budget="all"):
    return {
        "id": f"q{i}", "key": "scannet/scene0000_00", "dataset": "scannet", "scene_id": "scene0000_00",
        "profile": "revsi", "budget": budget, "question_type": qt, "template": f"revsi/{qt}", "question": f"q{i}?",
        "options": list(options), "ground_truth": gt, "answer_value": float(gt) if not options else None,
        "used_obj_ids": [], "video": "v.mp4", "video_kind": "real", "geometry": "{}",
    }


@pytest.fixture()
def qa():
    rows = [_row(i, "object_counting_single", gt) for i, gt in enumerate(["2", "2", "2", "4"])]
    rows += [
        _row(10, "object_rel_direction_forward_easy", "A", ["A. left", "B. right", "C. back"]),
        _row(11, "object_rel_direction_forward_easy", "B", ["A. right", "B. left", "C. back"]),
        _row(12, "object_rel_direction_forward_easy", "C", ["A. back", "B. right", "C. left"]),
    ]
    return schemas.from_rows("qa", rows)


def test_stats_baselines(qa):
    stats = compute_stats(qa)
    by_type = {e["question_type"]: e for e in stats["types"]}
    counting = by_type["object_counting_single"]
    assert counting["questions"] == 4
    assert counting["answers"]["values"] == {"2": 3, "4": 1}
    assert counting["frequency_answer"] == "2"
    # always "2": three exact hits, and 2 vs 4 is 50% off, which passes only theta=0.50
    assert counting["frequency_baseline"] == pytest.approx((3 * 1.0 + 0.1) / 4)
    direction = by_type["object_rel_direction_forward_easy"]
    assert direction["random_baseline"] == pytest.approx(1 / 3)
    assert direction["letters"] == {"A": 1, "B": 1, "C": 1}
    assert direction["text_mode"] == "left" and direction["text_mode_share"] == 1.0
    assert direction["max_letter_deviation_points"] == pytest.approx(0.0)
    tasks = {t["task"]: t for t in stats["tasks"]}
    assert tasks["object_counting"]["questions"] == 4


def test_stats_command_prints_text_and_json(qa, tmp_path, capsys):
    path = tmp_path / "qa.parquet"
    write_table(upath(path), "qa", qa)
    assert main(["stats", "--qa", str(path)]) == 0
    text = capsys.readouterr().out
    assert "object_counting_single" in text and "7 questions" in text
    assert main(["stats", "--json", "--qa", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["questions"] == 7 and len(data["types"]) == 2


def test_stats_missing_table_is_a_one_line_error(tmp_path, capsys):
    assert main(["stats", "--qa", str(tmp_path / "absent.parquet")]) == 1
    assert "no qa table" in capsys.readouterr().err


def test_baselines_alone_are_the_full_stats_baselines(qa):
    """The report's baseline table reads ``describe=False`` stats: the same baselines, without the distributions."""
    from pipeline.qa.stats import baseline_rows

    full = compute_stats(qa)["types"]
    alone = compute_stats(qa, describe=False)["types"]
    assert [{k: e[k] for k in a} for e, a in zip(full, alone)] == alone and len(full) == len(alone)
    assert all("answers" not in a and "letters" not in a for a in alone)
    assert all("random_baseline" in a for a in alone)  # the release's adversary check reads chance from it
    assert {"frequency_baseline", "content_frequency_baseline", "frequency_answer"} <= set(alone[0])
    assert [r["frequency"] for r in baseline_rows(qa)] == [e["frequency_baseline"] for e in full]
