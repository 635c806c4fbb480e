"""Answers for any sampler: a small synthetic release, re-answered under several samplers.

The release is built here from pipeline functions (scene tables, nested
budgets, ray-cast per-frame visibility, the budget rule, every candidate
question per budget) with an all-frame video whose frame ``i`` shows ``i`` in
binary stripes, so each frame of a sampled video names its position after re-encoding.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from pipeline import schemas, storage
from pipeline.frames.budgets import frame_budgets
from pipeline.config import Config
from pipeline.frames.budgets import ALL, sample_frames
from pipeline.frames.video import VideoFrameSource, write_video
from pipeline.frames.video_paths import budget_video_path
from pipeline.qa import finalize_qa, generate_candidates
from expectations.runner import decide_suites
from pipeline.sampling.command import build_sampled, outcome_counts
from pipeline.sampling.spec import parse_sampler
from pipeline.scene.tables import scene_tables
from pipeline.synth.scene import generate_scene
from pipeline.visibility.cast import compute_visibility, object_visibility

FRAMES = 60
PROFILES = ("revsi", "vsibench")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    config = Config()
    scene = generate_scene(config.seed, 1, FRAMES)
    parsed = scene.to_parsed_scan()
    tables = scene_tables(parsed, config)
    samples = sample_frames(tables["frames"], config)
    visibility = compute_visibility(parsed.key, tables["frames"], parsed.mesh, config)
    decided = object_visibility(parsed.key, visibility, samples, tables["objects"], None, config)
    qa = pl.concat([  # the dataset-wide step's filters, caps and balancing, as a release's qa went through them
        finalize_qa(pl.concat([
            generate_candidates(tables["objects"], tables["rooms"], decided, samples, None, key=parsed.key, budget=b,
                                profile=p, config=config)
            for b in frame_budgets(Config())
        ]), profile=p, seed=config.seed)
        for p in PROFILES
    ])
    out = {"scans": tables["scans"], "objects": tables["objects"], "rooms": tables["rooms"], "frame_samples": samples,
           "object_visibility": decided, "qa": qa, "visibility": visibility}
    for name, table in out.items():
        storage.write_table(storage.upath(root / "tables" / f"{name}.parquet"), name, table)
    n = samples.filter(pl.col("budget") == ALL).height
    frames = [_code_frame(i) for i in range(n)]
    write_video(str(root), budget_video_path(ALL, parsed.key), frames, 10.0, (128, 64))
    order = samples.filter(pl.col("budget") == ALL).sort("rank")["frame_index"].to_list()
    for budget in frame_budgets(Config())[:-1]:
        picked = samples.filter(pl.col("budget") == budget).sort("rank")["frame_index"].to_list()
        write_video(str(root), budget_video_path(budget, parsed.key), [frames[order.index(f)] for f in picked], 1.0,
                    (128, 64))
    return root, parsed.key, out


def _code_frame(position: int) -> np.ndarray:
    """A frame showing its position in binary: 8 columns of 16 pixels, white where the bit is set."""
    frame = np.zeros((64, 128, 3), dtype=np.uint8)
    for bit in range(8):
        if position >> bit & 1:
            frame[:, bit * 16:(bit + 1) * 16] = 255
    return frame


def _read_code(frame: np.ndarray) -> int:
    return sum(1 << bit for bit in range(8) if frame[8:-8, bit * 16 + 4:(bit + 1) * 16 - 4].mean() > 128)


def _answers(qa: pl.DataFrame) -> dict:
    return {(r["profile"], r["question_type"], r["question"]): (r["ground_truth"], sorted(r["used_obj_ids"]))
            for r in qa.iter_rows(named=True)}


def _letterless(qa: pl.DataFrame) -> dict:
    """Answer per question as text (the option's text for choices: letters are per row)."""
    out = {}
    for r in qa.iter_rows(named=True):
        gt = r["ground_truth"]
        if r["options"]:
            gt = next(o.partition(". ")[2] for o in r["options"] if o.partition(". ")[0] == gt)
        out[(r["profile"], r["question_type"], r["question"])] = gt
    return out


@pytest.mark.parametrize("budget", ["16", "32", "64"])
def test_uniform_answers_equal_the_budget_answers_where_frames_coincide(release, tmp_path, budget):
    root, key, tables = release
    budget_frames = tables["frame_samples"].filter(pl.col("budget") == budget).sort("rank")["frame_index"].to_list()
    for spec in (budget, f"uniform:{budget}"):
        bench, meta = build_sampled(root, spec, tmp_path / spec.replace(":", "_"), videos=False, rules=decide_suites)
        assert meta["checks"]["success"], meta["checks"]
        frames = bench.frame_samples.sort("rank")["frame_index"].to_list()
        if frames != budget_frames:
            assert spec != budget
            continue
        expected = _letterless(tables["qa"].filter(pl.col("budget") == budget))
        got = _letterless(bench.qa)
        shared = set(expected) & set(got)
        assert shared, spec
        assert {k: got[k] for k in shared} == {k: expected[k] for k in shared}, spec
        # every all-frame question the budget also asks is answered (not dropped) under the same frames
        all_frame = {(r["profile"], r["question_type"], r["question"]) for r in
                     tables["qa"].filter(pl.col("budget") == ALL).iter_rows(named=True)}
        assert (set(expected) & all_frame) <= set(got)
        # and the decision per object is the budget's own
        mine = bench.object_visibility.sort("object_id").select("object_id", "visible", "first_frame", "best_frame")
        theirs = tables["object_visibility"].filter(pl.col("budget") == budget).sort("object_id").select(mine.columns)
        assert mine.equals(theirs)


def test_every_frame_equals_the_all_frame_answers(release, tmp_path):
    root, key, tables = release
    n = tables["frame_samples"].filter(pl.col("budget") == ALL).height
    path = tmp_path / "every.json"
    path.write_text(json.dumps({key: list(range(n))}))
    bench, meta = build_sampled(root, f"indices:{path}", tmp_path / "every", videos=False, rules=decide_suites)
    all_frame = tables["qa"].filter(pl.col("budget") == ALL)
    assert bench.qa.height == all_frame.height
    assert bench.outcomes["outcome"].unique().to_list() == ["stays"]
    assert _answers(bench.qa) == _answers(all_frame)


@pytest.mark.parametrize("spec", ["uniform:8", "fps:1", "fps:2,max=32", "segments:16"])
def test_sampled_benchmark_tables_videos_and_validity(release, tmp_path, spec):
    root, key, tables = release
    out = tmp_path / "out"
    bench, meta = build_sampled(root, spec, out, rules=decide_suites)
    assert meta["checks"]["success"], meta["checks"]
    sampler = parse_sampler(spec, frame_budgets(Config()))
    n = tables["frame_samples"].filter(pl.col("budget") == ALL).height
    positions = sampler.positions(n, 10.0).tolist()
    assert meta["frames"][key] == len(positions)
    assert meta["declared_fps"][key] == pytest.approx(len(positions) * 10.0 / n)
    # the video holds exactly the sampled frames, in order
    with VideoFrameSource(out / budget_video_path(sampler.label, key)) as video:
        assert len(video) == len(positions)
        codes = [_read_code(video.read(i)) for i in range(len(positions))]
        assert video.fps == pytest.approx(len(positions) * 10.0 / n, rel=1e-3)
    assert codes == positions
    # every all-frame question is accounted for; dropped ones say why
    all_frame = tables["qa"].filter(pl.col("budget") == ALL)
    assert bench.outcomes.height == all_frame.height
    dropped = bench.outcomes.filter(pl.col("outcome") == "unanswerable")
    assert dropped["reason"].null_count() == 0
    assert bench.qa.height == bench.outcomes.height - dropped.height
    assert set(bench.qa["budget"].to_list()) <= {sampler.label}
    counts = outcome_counts(bench.outcomes)
    assert counts["questions"].sum() == all_frame.height
    assert pl.read_parquet(out / "tables" / "qa.parquet").height == bench.qa.height


def test_export_adds_a_sampler_config_the_task_folder_loads_and_eval_scores_it(release, tmp_path, capsys):
    from scan2qa import main
    from tests.test_lmms_eval_task import load_task, run_task

    root, key, tables = release
    out = tmp_path / "export"
    assert main(["export", "--format", "revsi", "--release", str(root), "--out", str(out), "--sampler", "uniform:8"]) == 0
    task = load_task(out / "lmms_eval_task" / "scan2qa_revsi_uniform_8_frame.yaml")
    docs = pl.read_parquet(task["dataset_kwargs"]["data_files"]["test"])
    assert docs.height > 0 and set(docs["num_frames"]) == {"uniform_8"}
    truth = dict(zip(docs["id"], docs["ground_truth"]))
    scores = run_task(task, lambda doc: truth[doc["id"]])
    assert scores["overall_acc"] == pytest.approx(1.0), scores
    group = (out / "lmms_eval_task" / "scan2qa_revsi_sampled.yaml").read_text()
    assert "scan2qa_revsi_uniform_8_frame" in group
    assert "uniform_8" not in (out / "lmms_eval_task" / "scan2qa_revsi.yaml").read_text()
    with VideoFrameSource(out / "uniform_8_frame" / f"{key.partition('/')[2]}.mp4") as video:
        assert len(video) == 8
    # VLMEvalKit gets a TSV for the sampler too
    assert main(["export", "--format", "vlmevalkit", "--release", str(root), "--out", str(tmp_path / "vlm"),
                 "--sampler", "uniform:8", "--sampled", str(out / "samplers" / "uniform_8")]) == 0
    assert (tmp_path / "vlm" / "revsi_uniform_8_frame.tsv").exists()
    # eval --sampler scores predictions against the sampler's ground truth
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text("".join(json.dumps({"id": i, "prediction": g}) + "\n" for i, g in truth.items()))
    capsys.readouterr()
    assert main(["eval", "--release", str(root), "--predictions", str(predictions), "--sampler", "uniform:8",
                 "--json", "--no-judge"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report, report


def test_bench_answers_reports_cpu_seconds(release):
    import argparse

    from benches.answers import format_result, run_answers_bench

    root, key, tables = release
    result = run_answers_bench(argparse.Namespace(release=str(root), sampler="uniform:8", baseline="16"))
    assert result["sampler_result"]["checks_passed"] and result["sampler_result"]["cpu_s"] > 0
    assert result["ratio"] is not None and "CPU-s" in format_result(result)


@pytest.mark.slow  # Dagster import and an in-process run: tens of seconds on a loaded 2-core machine
def test_sampled_benchmarks_asset_publishes_each_configured_sampler(release, tmp_path):
    import os

    import dagster as dg

    from assets.sampled import sampled_benchmarks, sampled_benchmarks_expectations
    from resources.storage import StorageResource

    root, key, tables = release
    out = tmp_path / "out"
    (out / "releases").mkdir(parents=True)
    os.symlink(root, out / "releases" / "latest")
    config_file = tmp_path / "scan2qa.yaml"
    config_file.write_text(f"output_root: {out}\nsamplers: ['uniform:8', 'segments:16']\n")
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(out), storage_options={},
                              config_file=str(config_file))
    result = dg.materialize([sampled_benchmarks, sampled_benchmarks_expectations], resources={"storage": storage})
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)
    for label in ("uniform_8", "segments_16"):
        meta = json.loads((out / "sampled" / label / "sampler.json").read_text())
        assert meta["checks"]["success"] and (out / "sampled" / label / "tables" / "qa.parquet").exists()
    assert not [p for p in (out / "sampled").iterdir() if p.name.startswith(".")]


def test_report_section_for_configured_samplers(release):
    from pipeline.sampling.validity import ALL_TYPES, report_section, validity_table

    root, key, tables = release
    html = report_section(tables, Config(samplers=("uniform:8", "16")))
    assert "Validity under frame samplers" in html and "<svg" in html and "uniform_8" in html
    assert report_section(tables, Config()) == ""
    from pipeline.sampling.answers import compute_answers

    outcomes = compute_answers(parse_sampler("all", frame_budgets(Config())), tables, Config()).outcomes
    totals = validity_table(outcomes).filter(pl.col("question_type") == ALL_TYPES)
    assert totals["valid"].to_list() == [1.0] * totals.height
