"""Evaluator, baselines and the eval/baseline commands end to end."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from scan2qa import main
from pipeline.scoring import metrics
from pipeline.scoring.baselines import baseline_predictions
from pipeline.scoring.evaluate import evaluate, evaluate_release, load_predictions, write_predictions
from pipeline.errors import ScanError
from tests.test_scoring_support import pinpoint_rows, qa_frame, revsi_rows, write_release


def _truths(qa: pl.DataFrame) -> dict[str, str]:
    return {r["id"]: r["ground_truth"] for r in qa.iter_rows(named=True)}


def test_mra_matches_the_harness_definition():
    assert len(metrics.MRA_THRESHOLDS) == 10
    assert metrics.mean_relative_accuracy(10.0, 10.0) == 1.0
    assert metrics.mean_relative_accuracy(15.0, 10.0) == pytest.approx(0.1)  # only theta=0.5 (<= keeps the edge)
    # 1 - 0.8 is 0.19999999999999996 in floating point, so an error of exactly 20% misses theta=0.8 in the
    # harnesses too: 0.6, not 0.7
    assert metrics.mean_relative_accuracy(12.0, 10.0) == 0.6
    assert metrics.mean_relative_accuracy(None, 10.0) == 0.0
    assert metrics.mean_relative_accuracy(float("nan"), 10.0) == 0.0
    assert metrics.mean_relative_accuracy(0.0, 0.0) == 1.0 and metrics.mean_relative_accuracy(1.0, 0.0) == 0.0


def test_composites_and_overall():
    tasks = metrics.task_scores(
        {
            "object_counting_single": 1.0,
            "object_counting_multiple": 0.0,
            "object_rel_direction_forward_easy": 1.0,
            "object_rel_direction_backward_easy": 1.0,
            "object_rel_direction_forward_hard": 0.0,
            "object_rel_direction_backward_hard": 0.0,
            "route_planning": 0.25,
        }
    )
    assert tasks == {"object_counting": 0.5, "object_rel_direction": 0.5, "route_planning": 0.25}
    assert metrics.overall_score(tasks) == pytest.approx(1.25 / 3)


def test_ground_truth_scores_one_everywhere():
    qa = qa_frame(revsi_rows(300, 3) + revsi_rows(60, 4, budget="64") + pinpoint_rows(2))
    report = evaluate(qa, _truths(qa), "harness")
    assert report["overall"] == 1.0 and report["parse_failures"] == 0
    for group in report["groups"]:
        for qtype, entry in group["types"].items():
            if qtype != "free_form_localization":
                assert entry["score"] == 1.0, (group["name"], qtype)
    robust = evaluate(qa, _truths(qa), "robust")
    assert robust["overall"] == 1.0


def test_frequency_predictions_reproduce_the_reported_frequency_baseline():
    qa = qa_frame(revsi_rows(500, 5) + revsi_rows(200, 6, budget="32"))
    preds = baseline_predictions(qa, "frequency")
    report = evaluate(qa, preds, "harness")
    for group in report["groups"]:
        assert group["overall"] == pytest.approx(group["baselines"]["frequency"]["overall"], abs=1e-12)
        for entry in group["types"].values():
            assert entry["score"] == pytest.approx(entry["frequency"], abs=1e-12)
    table = metrics.frequency_baseline(qa)
    assert {"profile", "budget", "video_kind", "question_type", "answer", "score", "questions"} <= set(table.columns)
    assert table["questions"].sum() == qa.height


def test_frequency_baseline_tie_break_and_nq_mode():
    qa = qa_frame(
        [
            dict(r, ground_truth=gt, question_type="object_counting_single", options=[])
            for r, gt in zip(revsi_rows(5, 0), ["2", "3", "3", "2", "7"])
        ]
    )
    table = metrics.frequency_baseline(qa)
    assert table["answer"].to_list() == ["2"]  # 2 and 3 tie; the smaller wins
    expected = np.mean([metrics.mean_relative_accuracy(2.0, float(t)) for t in ["2", "3", "3", "2", "7"]])
    assert table["score"][0] == pytest.approx(expected)


def test_random_predictions_land_near_chance_on_2000_questions():
    qa = qa_frame(revsi_rows(2000, 11))
    report = evaluate(qa, baseline_predictions(qa, "random", seed=3), "harness")
    group = report["groups"][0]
    chance = group["baselines"]["random"]["overall"]
    assert abs(group["overall"] - chance) <= 0.03
    assert 0.2 < chance < 0.45


def test_missing_predictions_count_as_wrong_and_are_counted():
    qa = qa_frame(revsi_rows(40, 1))
    preds = _truths(qa)
    dropped = sorted(preds)[:10]
    for qid in dropped:
        del preds[qid]
    preds["not-a-question"] = "A"
    report = evaluate(qa, preds, "harness")
    assert report["missing"] == 10 and report["unmatched_predictions"] == 1
    assert report["overall"] < 1.0
    assert sum(e["missing"] for e in report["groups"][0]["types"].values()) == 10


def test_pinpoint_micro_and_macro():
    qa = qa_frame(pinpoint_rows(3))
    preds = _truths(qa)
    preds["p0_tpv_yes"] = "No"  # scene 0 presence: 1 of 2 right
    report = evaluate(qa, preds, "harness")
    group = report["groups"][0]
    assert group["micro"]["presence"] == pytest.approx(5 / 6)
    assert group["macro"]["presence"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert group["avg_micro"] == pytest.approx((5 / 6 + 1 + 1) / 3)


def test_black_baseline_answers():
    qa = qa_frame(revsi_rows(20, 0) + pinpoint_rows(1))
    preds = baseline_predictions(qa, "black")
    by_type = {r["question_type"]: preds[r["id"]] for r in qa.iter_rows(named=True)}
    assert by_type["object_counting_single"] == "0" and by_type["object_size_estimation"] == "0"
    assert by_type["route_planning"] == "A" and by_type["reference_mcq"] == "A"
    assert by_type["presence"] == "No"


def test_eval_and_baseline_commands(tmp_path, capsys):
    release = write_release(tmp_path / "rel", revsi_rows(60, 2) + pinpoint_rows(2), videos=False)
    preds = tmp_path / "freq.jsonl"
    assert main(["baseline", "--kind", "frequency", "--release", str(release), "--out", str(preds)]) == 0
    assert len(load_predictions(preds)) == 70
    capsys.readouterr()
    out = tmp_path / "scores"
    assert main(["eval", "--release", str(release), "--predictions", str(preds), "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert 0.0 <= printed["overall"] <= 1.0
    assert printed["overall"] == pytest.approx(printed["baselines"]["frequency"])
    assert json.loads((out / "scores.json").read_text())["overall"] == printed["overall"]
    markdown = (out / "scores.md").read_text()
    assert "| object_counting |" in markdown and "not scored" in markdown
    page = (out / "scores.html").read_text()
    assert page.count("<svg") == 2 and "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    ) and "https://" not in page
    assert main(["eval", "--release", str(release), "--predictions", str(preds), "--mode", "robust"]) == 0
    assert "# scan2qa evaluation" in capsys.readouterr().out


def test_bad_predictions_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "prediction": "A"}\nnot json\n')
    with pytest.raises(ScanError, match="bad.jsonl: line 2"):
        load_predictions(path)
    write_predictions(tmp_path / "ok.jsonl", {"b": "1", "a": "2"})
    assert (tmp_path / "ok.jsonl").read_text().splitlines()[0] == '{"id": "a", "prediction": "2"}'


def test_release_path_without_qa_table_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(ScanError, match="qa.parquet"):
        evaluate_release(tmp_path, tmp_path / "x.jsonl")
    assert main(["eval", "--release", str(tmp_path), "--predictions", str(tmp_path / "x.jsonl")]) == 1
    assert "qa.parquet" in capsys.readouterr().err


def test_dummy_video_questions_form_their_own_groups_outside_overall():
    real = revsi_rows(30, 1)
    dummy = [
        dict(r, id="d" + r["id"], video_kind="black", ground_truth="0", video="videos/dummy/black/x.mp4")
        for r in revsi_rows(7, 2)
        if r["question_type"].startswith("object_counting")
    ]
    qa = qa_frame(real + dummy)
    preds = _truths(qa_frame(real))
    preds.update({r["id"]: "3" for r in dummy})  # hallucinated counts on black videos
    report = evaluate(qa, preds, "harness")
    names = [g["name"] for g in report["groups"]]
    assert names == ["revsi/16_frame", "revsi/16_frame/black"]
    assert report["overall"] == 1.0
    assert report["groups"][1]["tasks"]["object_counting"] == 0.0
    black = baseline_predictions(qa, "black")
    assert evaluate(qa, black, "harness")["groups"][1]["overall"] == 1.0  # "0" on a black video is right


def test_non_numeric_ground_truth_names_the_scan_and_question():
    rows = revsi_rows(1, 0)
    rows[0]["ground_truth"] = "many"
    with pytest.raises(ScanError, match="synthetic/synth0000_00: tables/qa.parquet: question q16_00000"):
        evaluate(qa_frame(rows), {}, "harness")


def test_lmms_eval_sample_logs_are_read_as_predictions(tmp_path):
    path = tmp_path / "samples.jsonl"
    lines = [
        {"doc_id": 0, "doc": {"id": "q1", "question": "?"}, "resps": [["B. table"]], "filtered_resps": ["B. table"]},
        {"doc_id": 1, "doc": {"id": "q2"}, "resps": [["3"]]},
        {"id": "q3", "prediction": None},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert load_predictions(path) == {"q1": "B. table", "q2": "3", "q3": ""}


def test_eval_out_prints_a_summary_and_writes_the_full_report(tmp_path, capsys):
    release = write_release(tmp_path / "rel", revsi_rows(60, 2), videos=False)
    preds = tmp_path / "freq.jsonl"
    assert main(["baseline", "--kind", "frequency", "--release", str(release), "--out", str(preds)]) == 0
    capsys.readouterr()
    out = tmp_path / "scores"
    assert main(["eval", "--release", str(release), "--predictions", str(preds), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert 1 < len(lines) <= 5 and lines[0].startswith("overall ") and "|" not in captured.out
    assert "scores.md" in captured.err
    assert "| object_counting |" in (out / "scores.md").read_text()


def test_help_is_plain_text(capsys):
    assert main(["--help"]) == 0
    assert "`" not in capsys.readouterr().out


def test_a_repeated_prediction_id_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text('{"id": "q1", "prediction": "A"}\n{"id": "q2", "prediction": "B"}\n{"id": "q1", "prediction": "C"}\n')
    with pytest.raises(ScanError, match=r"line 3: id q1 already predicted on line 1"):
        load_predictions(path)
