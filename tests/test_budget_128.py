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
    assert frame_budgets(FramesConfig()) == ("16", "32", "64", "all") == frame_budgets(Config())
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
    default = {r.name: r for s in build_suites(budgets=frame_budgets(Config())) for r in s.rules if s.table == "qa"}
    four = {r.name: r for s in build_suites(budgets=frame_budgets(FOUR)) for r in s.rules if s.table == "qa"}
    assert default["qa.budget_in_set"].kwargs["value_set"] == ["16", "32", "64", "all"]
    assert four["qa.budget_in_set"].kwargs["value_set"] == ["16", "32", "64", "128", "all"]


@pytest.mark.slow  # a 150-frame scan built end to end (ray cast, 5 videos, the gate): 158 s on 2 shared, busy cores
def test_a_fourth_budget_in_config_works_end_to_end(tmp_path, monkeypatch):
    from scan2qa import main
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


def test_budget_sampler_nests_from_the_runs_budgets_as_the_build_does():
    """``budget:32`` of a run with budgets 128, 64, 32, 16 takes the build's own 32 frames (issue 38, item 10).

    Nested from the default budgets (64, 32, 16) it would take other frames of a 150-frame video; the sampler
    recomputes the positions (it does not read the release's rows here), so it must nest from the run's chain.
    """
    from pipeline.frames.budgets import sample_frames
    from pipeline.sampling.answers import sampled_frame_samples
    from pipeline.sampling.spec import parse_sampler

    n = 150
    frames = pl.DataFrame({
        "key": ["synthetic/synth0000_00"] * n, "frame_index": list(range(n)),
        "timestamp": [i / 10 for i in range(n)], "valid": [True] * n, "in_all_frame": [True] * n,
    })
    built = sample_frames(frames, FOUR)
    own_32 = built.filter(pl.col("budget") == "32").sort("rank")["frame_index"].to_list()
    assert own_32 != budget_positions(n, FramesConfig().budgets)[32].tolist()  # the chains differ at this length

    sampler = parse_sampler("budget:32", frame_budgets(FOUR))
    assert sampler.positions(n, 10.0).tolist() == own_32
    without_own_rows = built.filter(pl.col("budget") != "32")
    scans = pl.DataFrame({"key": ["synthetic/synth0000_00"], "fps": [10.0]})
    sampled, _, _ = sampled_frame_samples(sampler, without_own_rows, scans)
    assert sampled.sort("rank")["frame_index"].to_list() == own_32
    with pytest.raises(Exception, match="or a budget \\(16, 32, 64, all\\)"):
        parse_sampler("budget:128", frame_budgets(Config()))  # a budget the run did not build is refused
