"""The generated lmms-eval task folder, loaded and called the way lmms-eval does it, after the export is moved.

lmms-eval reads a task YAML with a loader whose ``!function a.b`` tag imports
``a.py`` from the YAML's own folder and returns its attribute ``b``; it merges
``include``d YAMLs, loads ``data_files`` with the ``parquet`` builder, calls
``process_results(doc, [reply])`` per document and then each metric's
``aggregation`` over that metric's values. This file does the same (without
lmms-eval installed) and checks that ``scan2qa eval`` reports the same numbers
under the same names on every dummy-video config and baseline.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.exports.revsi import export_revsi
from pipeline.scoring.baselines import baseline_predictions
from pipeline.scoring.evaluate import evaluate
from pipeline.scoring.release import load_release
from tests.test_scoring_support import revsi_rows, write_release


def _loader_for(yaml_path: Path):
    class Loader(yaml.FullLoader):
        pass

    def function(loader, node):
        module_name, _, attribute = loader.construct_scalar(node).rpartition(".")
        spec = importlib.util.spec_from_file_location(module_name, yaml_path.parent / f"{module_name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, attribute)

    Loader.add_constructor("!function", function)
    return Loader


def load_task(yaml_path: Path) -> dict:
    """lmms-eval's load_yaml_config: includes first (relative to the YAML), then the YAML's own keys."""
    config = yaml.load(yaml_path.read_text(), Loader=_loader_for(yaml_path))
    merged = {}
    for include in [config.pop("include")] if "include" in config else []:
        merged.update(load_task(yaml_path.parent / include))
    merged.update(config)
    return merged


def run_task(task: dict, reply) -> dict[str, float]:
    docs = pq.read_table(task["dataset_kwargs"]["data_files"]["test"]).to_pylist()
    per_metric: dict[str, list] = {m["metric"]: [] for m in task["metric_list"]}
    for doc in docs:
        assert os.path.exists(task["doc_to_visual"](doc)[0])
        results = task["process_results"](doc, [reply(doc)])
        for metric in per_metric:
            per_metric[metric].append(results[metric])
    return {m["metric"]: m["aggregation"](per_metric[m["metric"]]) for m in task["metric_list"]}


def _dummies(real: list[dict]) -> list[dict]:
    rows = []
    for r in real:
        if r["question_type"] == "object_counting_single":
            for kind in ("query_drop", "first_frame", "black"):
                rows.append(dict(r, id=f"{r['id']}_{kind}", video_kind=kind, ground_truth="0", answer_value=0.0,
                                 video=f"videos/dummy/{kind}/{r['id']}.mp4"))
        elif r["question_type"] == "object_size_estimation":
            rows.append(dict(r, id=f"{r['id']}_black", video_kind="black", video=f"videos/dummy/black/{r['id']}.mp4"))
    return rows


@pytest.fixture(scope="module")
def moved_export(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    real = revsi_rows(60, 3, "16")
    write_release(root, real + _dummies(real))
    release = load_release(root)
    first = tmp_path_factory.mktemp("export") / "revsi"
    export_revsi(release, first)
    moved = tmp_path_factory.mktemp("elsewhere") / "moved_revsi"
    shutil.move(str(first), str(moved))
    assert not first.exists()
    return release, moved


def test_no_task_yaml_holds_a_path(moved_export):
    _, export = moved_export
    for path in (export / "lmms_eval_task").glob("*yaml*"):
        assert "/" not in "".join(line for line in path.read_text().splitlines() if "!function" not in line), path


def test_moved_export_scores_ground_truth_one_on_every_dummy_counting_config(moved_export):
    release, export = moved_export
    folder = export / "lmms_eval_task"
    configs = sorted(p.stem for p in folder.glob("scan2qa_revsi_16_frame_*.yaml"))
    assert configs == ["scan2qa_revsi_16_frame_black", "scan2qa_revsi_16_frame_first_frame",
                       "scan2qa_revsi_16_frame_query_drop"]
    for name in configs:
        task = load_task(folder / f"{name}.yaml")
        assert str(export) in task["dataset_kwargs"]["data_files"]["test"]
        scores = run_task(task, lambda doc: doc["ground_truth"])
        assert scores["object_counting_exact_match"] == 1.0, name
        if name.endswith("black"):
            size = next(m for m in task["metric_list"] if m["metric"] == "object_size_estimation_mra")
            assert size["higher_is_better"] is False
            assert scores["object_size_estimation_mra"] == 1.0
        else:
            assert set(scores) == {"object_counting_exact_match"}
    group = yaml.safe_load((folder / "scan2qa_revsi_dummy.yaml").read_text())
    assert group["task"] == configs
    # the real-video config still runs from its new place
    real = run_task(load_task(folder / "scan2qa_revsi_16_frame.yaml"), lambda doc: doc["ground_truth"])
    assert real["overall_acc"] == 1.0


def test_environment_variable_names_the_export_root(moved_export, tmp_path, monkeypatch):
    _, export = moved_export
    monkeypatch.setenv("SCAN2QA_EXPORT_ROOT", str(export))
    copied = tmp_path / "task_only"
    shutil.copytree(export / "lmms_eval_task", copied)
    task = load_task(copied / "scan2qa_revsi_16_frame_query_drop.yaml")
    assert task["dataset_kwargs"]["data_files"]["test"].startswith(str(export))
    assert run_task(task, lambda doc: "0")["object_counting_exact_match"] == 1.0


@pytest.mark.parametrize("kind", ["truth", "random", "frequency", "black", "three"])
def test_scan2qa_eval_agrees_with_the_task_on_every_dummy_config(moved_export, kind):
    release, export = moved_export
    qa = release.qa
    if kind == "truth":
        predictions = dict(zip(qa["id"].to_list(), qa["ground_truth"].to_list()))
    elif kind == "three":
        predictions = {qid: "3" for qid in qa["id"].to_list()}
    else:
        predictions = baseline_predictions(qa, kind, seed=0)
    report = evaluate(qa, predictions, "harness")
    groups = {g["video_kind"]: g for g in report["groups"] if g["video_kind"] != "real"}
    folder = export / "lmms_eval_task"
    for video_kind, group in groups.items():
        task = load_task(folder / f"scan2qa_revsi_16_frame_{video_kind}.yaml")
        ours = run_task(task, lambda doc: predictions[doc["id"]])
        assert set(ours) == set(group["dummy_metrics"])
        for name, value in ours.items():
            assert value == pytest.approx(group["dummy_metrics"][name], abs=1e-12), (video_kind, name)
        if kind == "truth":
            assert group["dummy_metrics"]["object_counting_exact_match"] == 1.0
    assert set(groups) == {"query_drop", "first_frame", "black"}


def test_random_baseline_is_random_on_dummy_counting(moved_export):
    release, _ = moved_export
    qa = release.qa
    random = baseline_predictions(qa, "random", seed=0)
    real_counts = set(qa.filter((pl.col("video_kind") == "real") & (pl.col("question_type") == "object_counting_single"))["ground_truth"].to_list())
    dummy = qa.filter((pl.col("video_kind") != "real") & (pl.col("question_type") == "object_counting_single"))
    guesses = [random[i] for i in dummy["id"].to_list()]
    assert set(guesses) <= real_counts and "0" not in guesses
    report = evaluate(qa, random, "harness")
    for group in report["groups"]:
        if group["video_kind"] != "real":
            # chance of a draw from the real counts being 0 is 0, and that is what the report says
            assert group["baselines"]["random"]["dummy_metrics"]["object_counting_exact_match"] == 0.0
            assert group["dummy_metrics"]["object_counting_exact_match"] == 0.0
