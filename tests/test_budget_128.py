"""A fourth frame budget set in config (128) reaches every step: frames, visibility, questions, PinpointQA, checks,
videos, the gate, the report and the exports. The budget list has one source, ``frame_budgets``."""

import json

import polars as pl
import pytest

from expectations.suites import build_suites
from pipeline.config import Config, FramesConfig
from pipeline.exports.common import budget_order
from pipeline.frames.budgets import budget_positions, budget_sort_key, frame_budgets

FOUR = FramesConfig(budgets=(128, 64, 32, 16))


def test_frame_budgets_is_the_one_list_smallest_first_then_all():
    assert frame_budgets() == ("16", "32", "64", "all") == frame_budgets(Config())
    assert frame_budgets(FOUR) == ("16", "32", "64", "128", "all")
    assert sorted(["all", "128", "16", "64", "32"], key=budget_sort_key) == list(frame_budgets(FOUR))
    assert sorted(["128", "all", "16"], key=budget_order) == ["16", "128", "all"]
    with pytest.raises(ValueError, match="positive"):
        frame_budgets(FramesConfig(budgets=(0, 16)))


def test_budget_128_nests_the_smaller_budgets():
    positions = budget_positions(150, FOUR.budgets)
    assert [len(positions[b]) for b in (128, 64, 32, 16)] == [128, 64, 32, 16]
    for big, small in ((128, 64), (64, 32), (32, 16)):
        assert set(positions[small]) <= set(positions[big])


def test_suites_accept_exactly_the_configured_budgets():
    default = {r.name: r for s in build_suites() for r in s.rules if s.table == "qa"}
    four = {r.name: r for s in build_suites(budgets=frame_budgets(FOUR)) for r in s.rules if s.table == "qa"}
    assert default["qa.budget_in_set"].kwargs["value_set"] == ["16", "32", "64", "all"]
    assert four["qa.budget_in_set"].kwargs["value_set"] == ["16", "32", "64", "128", "all"]


@pytest.mark.slow  # a 150-frame scan built end to end (ray cast, 5 videos, the gate): 158 s on 2 shared, busy cores
def test_a_fourth_budget_in_config_works_end_to_end(tmp_path, monkeypatch):
    from pipeline.cli import main
    from tests.scannet_factory import make_box_room

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    scans = tmp_path / "scans"
    make_box_room(scans, "synth0000_00", frames="sens", n_frames=150, timestamps_us=[i * 100_000 for i in range(150)])
    config = tmp_path / "four.yaml"
    config.write_text("frames:\n  budgets: [128, 64, 32, 16]\n")
    out = tmp_path / "out"
    assert main(["build", "--config", str(config), "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0

    release = out / "releases" / (out / "releases" / "LATEST").read_text().strip()  # written only if the gate passed
    samples = pl.read_parquet(release / "tables" / "frame_samples.parquet")
    assert samples.group_by("budget").len().sort("budget").rows() == [
        ("128", 128), ("16", 16), ("32", 32), ("64", 64), ("all", 150)
    ]
    visibility = pl.read_parquet(release / "tables" / "object_visibility.parquet")
    assert "128" in set(visibility["budget"])
    qa = pl.read_parquet(release / "tables" / "qa.parquet")
    assert {"16", "32", "64", "128", "all"} >= set(qa["budget"]) and "128" in set(qa["budget"])
    assert (out / "videos" / "128_frame").is_dir()
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["config"]["frames"]["budgets"] == [128, 64, 32, 16]
    report = (release / "report" / "index.html").read_text()
    assert '<th class="">128</th>' in report

    export = tmp_path / "revsi"
    assert main(["export", "--format", "revsi", "--release", str(release), "--out", str(export)]) == 0
    assert (export / "128_frame" / "test-00000-of-00001.parquet").is_file()
    assert "128_frame" in (export / "lmms_eval_task" / "scan2qa_revsi_128_frame.yaml").read_text()
    vlm = tmp_path / "vlm"
    assert main(["export", "--format", "vlmevalkit", "--release", str(release), "--out", str(vlm)]) == 0
    assert (vlm / "revsi_128_frame.tsv").is_file()
