"""Exports in each harness's layout: fields and types, videos that decode, round-trips, generated lmms-eval task."""

from __future__ import annotations

import ast
import csv
import importlib.util
import json
import os
import sys

import cv2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from scan2qa import main
from pipeline.exports.pinpointqa import export_pinpointqa
from pipeline.exports.revsi import export_revsi
from pipeline.exports.vlmevalkit import export_vlmevalkit
from pipeline.exports.vsibench import export_vsibench
from pipeline.errors import ScanError
from pipeline.scoring.evaluate import evaluate
from pipeline.scoring.release import load_release
from tests.test_scoring_support import pinpoint_rows, qa_frame, revsi_rows, write_release, write_video

REVSI_FIELDS = [
    ("id", pa.string()),
    ("dataset", pa.string()),
    ("scene_id", pa.string()),
    ("num_frames", pa.string()),
    ("question_type", pa.string()),
    ("question", pa.string()),
    ("options", pa.list_(pa.string())),
    ("ground_truth", pa.string()),
]


def _vsibench_rows():
    rows = []
    for r in revsi_rows(12, 9, budget="all")[:6]:
        qtype = "object_counting" if not r["options"] else "object_rel_distance"
        rows.append(dict(r, id="v" + r["id"], profile="vsibench", question_type=qtype))
    return rows


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    rows = revsi_rows(48, 0, "16") + revsi_rows(48, 1, "all") + pinpoint_rows(2) + _vsibench_rows()
    rows.append(
        dict(
            revsi_rows(1, 5, "16")[0],
            id="dummy1",
            video_kind="black",
            video="videos/dummy/black/d1.mp4",
            ground_truth="0",
            answer_value=0.0,
        )
    )
    write_release(root, rows)
    return load_release(root)


def _decodes(path) -> bool:
    cap = cv2.VideoCapture(str(path))
    ok, frame = cap.read()
    cap.release()
    return bool(ok) and frame is not None and frame.size > 0


def test_revsi_parquet_has_exactly_the_lmms_eval_fields(release, tmp_path):
    counts = export_revsi(release, tmp_path)
    assert counts == {"16_frame": 48, "all_frame": 48, "16_frame_black": 1}
    for config, budget in (("16_frame", "16"), ("all_frame", "all")):
        table = pq.read_table(tmp_path / config / "test-00000-of-00001.parquet")
        assert [(f.name, f.type) for f in table.schema] == REVSI_FIELDS
        rows = table.to_pylist()
        assert {r["num_frames"] for r in rows} == {budget}
        for r in rows:
            assert (r["options"] == []) == (r["question_type"].startswith(("object_counting", "object_size", "room", "object_abs")))
            video = tmp_path / f"{r['num_frames']}_frame" / f"{r['scene_id']}.mp4"
            assert video.exists() and _decodes(video)
    card = (tmp_path / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in front["configs"]] == ["16_frame", "all_frame", "16_frame_black"]
    assert front["dataset_info"][2]["features"][-1] == {"name": "video", "dtype": "string"}
    assert front["configs"][0]["data_files"] == [{"split": "test", "path": "16_frame/test-00000-of-00001.parquet"}]


def test_videos_are_hard_linked_unless_copy_is_asked(release, tmp_path):
    export_revsi(release, tmp_path / "linked")
    export_revsi(release, tmp_path / "copied", link=False)
    src = release.root / "videos" / "16_frame" / "synthetic" / "synth0000_00.mp4"
    assert os.path.samefile(src, tmp_path / "linked" / "16_frame" / "synth0000_00.mp4")
    assert not os.path.samefile(src, tmp_path / "copied" / "16_frame" / "synth0000_00.mp4")
    export_revsi(release, tmp_path / "linked")  # re-export over itself is fine


def _import_generated_utils(folder):
    spec = importlib.util.spec_from_file_location("scan2qa_generated_utils", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_lmms_eval_task_runs_on_its_own(release, tmp_path):
    export_revsi(release, tmp_path)
    folder = tmp_path / "lmms_eval_task"
    assert "lmms_eval" not in sys.modules
    utils = _import_generated_utils(folder)
    docs = pq.read_table(tmp_path / "16_frame" / "test-00000-of-00001.parquet").to_pylist()
    # yaml: parquet builder with this config's file, prompts per ReVSI Table 8
    task_text = (folder / "scan2qa_revsi_16_frame.yaml").read_text()
    task_yaml = yaml.safe_load(task_text.replace("!function ", ""))
    assert task_yaml["dataset_path"] == "parquet"
    # no path in the YAML: lmms-eval's !function tag reads it from utils.py, relative to the task folder
    assert task_yaml["dataset_kwargs"]["data_files"]["test"] == "utils.data_file_16_frame"
    assert utils.data_file_16_frame == str(tmp_path / "16_frame" / "test-00000-of-00001.parquet")
    template = (folder / "_default_template_yaml").read_text()
    assert "Answer the question using a single integer or decimal number." in template
    assert "utils.process_results" in template and "aggregate_overall_acc" in template
    group = yaml.safe_load((folder / "scan2qa_revsi.yaml").read_text())
    assert group["task"] == ["scan2qa_revsi_16_frame", "scan2qa_revsi_all_frame"]

    nq = next(d for d in docs if not d["options"])
    mcq = next(d for d in docs if d["options"])
    assert utils.doc_to_visual(nq) == [str(tmp_path / "16_frame" / f"{nq['scene_id']}.mp4")]
    text = utils.doc_to_text(mcq, {"pre_prompt": "These are frames of a video.",
                                   "mcq_post_prompt": "Answer with the option's letter from the given choices directly."})
    assert text.startswith("These are frames of a video.\n" + mcq["question"] + "\nOptions:\n" + mcq["options"][0])
    assert utils.process_results(nq, [nq["ground_truth"]])["overall_acc"]["acc"] == 1.0
    assert utils.process_results(nq, ["no"])["overall_acc"]["acc"] == 0.0
    assert utils.process_results(mcq, [mcq["ground_truth"].lower() + "."])["overall_acc"]["acc"] == 1.0

    # the generated task and scan2qa eval (harness mode) agree on every doc and on the aggregate
    replies = {d["id"]: ("A" if d["options"] else "3") for d in docs}
    entries = [utils.process_results(d, [replies[d["id"]]])["overall_acc"] for d in docs]
    qa16 = release.qa.filter((release.qa["budget"] == "16") & (release.qa["video_kind"] == "real"))
    ours = evaluate(qa16, replies, "harness")["groups"][0]
    assert utils.aggregate_overall_acc(entries) == pytest.approx(ours["overall"], abs=1e-12)
    assert utils.aggregate_object_counting_acc(entries) == pytest.approx(ours["tasks"]["object_counting"], abs=1e-12)

    # dummy-video config: same fields plus the video path, its own group, count 0 needs an exact 0
    dummy_table = pq.read_table(tmp_path / "16_frame_black" / "test-00000-of-00001.parquet")
    assert dummy_table.schema.names == [name for name, _ in REVSI_FIELDS] + ["video"]
    dummy = dummy_table.to_pylist()[0]
    assert utils.doc_to_visual(dummy) == [str(tmp_path / "16_frame_black" / "d1.mp4")]
    assert _decodes(utils.doc_to_visual(dummy)[0])
    assert utils.process_results(dummy, ["0"])["object_counting_exact_match"]["acc"] == 1.0
    assert utils.process_results(dummy, ["2"])["object_counting_exact_match"]["acc"] == 0.0
    dummy_group = yaml.safe_load((folder / "scan2qa_revsi_dummy.yaml").read_text())
    assert dummy_group["task"] == ["scan2qa_revsi_16_frame_black"]


def test_vsibench_layout(release, tmp_path):
    assert export_vsibench(release, tmp_path) == {"default": 6}
    table = pq.read_table(tmp_path / "test-00000-of-00001.parquet")
    assert table.schema.names == ["id", "dataset", "scene_name", "question_type", "question", "options", "ground_truth"]
    assert table.schema.field("options").type == pa.list_(pa.string())
    for r in table.to_pylist():
        assert _decodes(tmp_path / r["dataset"] / f"{r['scene_name']}.mp4")
    with pytest.raises(ScanError, match="budget '64'"):
        export_vsibench(release, tmp_path / "x", budget="64")


def test_vlmevalkit_tsv_round_trips_candidates(release, tmp_path):
    counts = export_vlmevalkit(release, tmp_path)
    assert counts == {"revsi_16_frame": 48, "revsi_all_frame": 48}
    qa = {r["id"]: r for r in release.qa.iter_rows(named=True)}
    with open(tmp_path / "revsi_16_frame.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    ids = json.loads((tmp_path / "revsi_16_frame.ids.json").read_text())
    assert list(rows[0]) == ["index", "video", "question", "question_type", "candidates", "answer"]
    for row in rows:
        source = qa[ids[row["index"]]]
        assert ast.literal_eval(row["candidates"]) == list(source["options"])
        assert row["answer"] == source["ground_truth"] and row["question"] == source["question"]
        assert _decodes(tmp_path / row["video"])


def test_pinpointqa_per_scene_json(release, tmp_path):
    counts = export_pinpointqa(release, tmp_path)
    assert counts == {"synth0000_00": 5, "synth0001_00": 5}
    data = json.loads((tmp_path / "qa" / "synth0000_00.json").read_text())
    pairs = data["qa_pairs"]
    assert {p["question_type"] for p in pairs} == {
        "presence", "reference_mcq", "free_form_localization", "structured_localization"
    }
    for p in pairs:
        assert {"id", "question_type", "question", "instruction", "ground_truth"} <= set(p)
        assert _decodes(tmp_path / p["video"])
    ssp = next(p for p in pairs if p["question_type"] == "structured_localization")
    assert json.loads(ssp["ground_truth"])["support_surface"] == "table"
    assert json.loads((tmp_path / "splits.json").read_text()) == {"test": ["synth0000_00", "synth0001_00"]}


def test_export_command_and_missing_video_error(tmp_path, capsys):
    root = write_release(tmp_path / "rel", revsi_rows(12, 0, "32"))
    out = tmp_path / "out"
    assert main(["export", "--format", "revsi", "--release", str(root), "--out", str(out)]) == 0
    assert (out / "32_frame" / "test-00000-of-00001.parquet").exists()
    assert main(["export", "--format", "vlmevalkit", "--release", str(root), "--out", str(tmp_path / "v"), "--copy"]) == 0
    (root / "videos" / "32_frame" / "synthetic" / "synth0001_00.mp4").unlink()
    assert main(["export", "--format", "revsi", "--release", str(root), "--out", str(tmp_path / "o2")]) == 1
    err = capsys.readouterr().err
    assert "synthetic/synth0001_00" in err and "synth0001_00.mp4" in err and "missing" in err
    assert main(["export", "--format", "pinpointqa", "--release", str(root), "--out", str(tmp_path / "p")]) == 1


def test_scans_sharing_a_scene_id_keep_their_own_videos_but_cannot_share_an_export(tmp_path, capsys):
    """One scene id in two datasets: the release keeps both videos (keyed by dataset); flat export layouts refuse."""
    rows = revsi_rows(6, 0, "16", scenes=1)
    twin = [dict(r, id="t" + r["id"], key="scannetpp/synth0000_00", dataset="scannetpp") for r in rows]
    twin = [dict(r, video=r["video"].replace("/synthetic/", "/scannetpp/")) for r in twin]
    root = write_release(tmp_path / "rel", rows + twin)
    assert (root / "videos" / "16_frame" / "synthetic" / "synth0000_00.mp4").exists()
    assert (root / "videos" / "16_frame" / "scannetpp" / "synth0000_00.mp4").exists()
    assert main(["export", "--format", "revsi", "--release", str(root), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "'synth0000_00' belongs to 2 scans (scannetpp/synth0000_00, synthetic/synth0000_00)" in err[0]
    for dataset in ("synthetic", "scannetpp"):
        out = tmp_path / dataset
        assert main(["export", "--format", "revsi", "--release", str(root), "--out", str(out), "--dataset", dataset]) == 0
        exported = pq.read_table(out / "16_frame" / "test-00000-of-00001.parquet")
        assert set(exported.column("dataset").to_pylist()) == {dataset} and exported.num_rows == 6
        assert (out / "16_frame" / "synth0000_00.mp4").exists()


def test_support_video_writer_makes_decodable_files(tmp_path):
    assert _decodes(write_video(tmp_path / "v.mp4"))


def test_export_is_deterministic(release, tmp_path):
    export_revsi(release, tmp_path / "a")
    export_revsi(release, tmp_path / "b")
    for config in ("16_frame", "all_frame"):
        a = (tmp_path / "a" / config / "test-00000-of-00001.parquet").read_bytes()
        b = (tmp_path / "b" / config / "test-00000-of-00001.parquet").read_bytes()
        assert a == b
    assert qa_frame([]).height == 0


def test_an_export_says_how_many_dummy_video_questions_it_left_out(release, tmp_path, capsys):
    assert main(["export", "--format", "vlmevalkit", "--release", str(release.root), "--out", str(tmp_path / "v")]) == 0
    err = capsys.readouterr().err
    assert "left out 1 revsi questions on dummy videos: the vlmevalkit layout holds real videos only" in err, err


def test_the_revsi_export_writes_its_dummy_video_questions_and_does_not_say_it_left_them_out(release, tmp_path,
                                                                                            capsys):
    out = tmp_path / "r"
    assert main(["export", "--format", "revsi", "--release", str(release.root), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "dummy videos" not in err, err
    dummies = [p for p in out.iterdir() if p.is_dir() and p.name.startswith("16_frame_")]
    assert dummies and all((p / "test-00000-of-00001.parquet").is_file() for p in dummies)
