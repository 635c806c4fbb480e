"""``scan2qa build`` on real tiny scans: progress lines, output summary, exit codes, the synthetic demo default."""

import re

import numpy as np
import polars as pl
import pytest
from plyfile import PlyData

from scan2qa import main
from tests.real_scans import BREAKERS, break_nan_alignment, scene_graph_only, write_scan

NAN_ALIGNMENT = "synth0001_00.txt: axisAlignment has 16 values, expected 16 finite numbers"


@pytest.fixture
def scene_graph(monkeypatch):
    scene_graph_only(monkeypatch)


PROGRESS = re.compile(r"^(\[\d+/\d+\] \S+|  ([^\s/]+/[^\s/]+|dataset-wide): .+)$")  # "[i/n] <key>" as a scan starts, "  <key>: <step ...>"


def outcome_lines(lines: list[str]) -> list[str]:
    """The printout without the progress lines printed while scans build."""
    return [line for line in lines if not PROGRESS.match(line) or " ... " in line]


def test_build_reports_progress_outputs_and_failures(tmp_path, scene_graph, capsys):
    scans = tmp_path / "scans"
    write_scan(scans, "synth0000_00", objects=3)
    break_nan_alignment(write_scan(scans, "synth0001_00"))
    write_scan(scans, "synth0002_00", objects=4)
    out = tmp_path / "out"
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # While a scan builds, the step running is printed under it.
    assert printed[:2] == ["[1/3] synthetic/synth0000_00", "  synthetic/synth0000_00: scene"]
    lines = outcome_lines(printed)
    assert lines[0].startswith("[1/3] synthetic/synth0000_00 ... ok (") and lines[0].endswith(" s)")
    assert lines[1] == f"[2/3] synthetic/synth0001_00 ... FAILED: synthetic/synth0001_00: {NAN_ALIGNMENT}"
    assert lines[2].startswith("[3/3] synthetic/synth0002_00 ... ok (")
    assert f"tables: {out}/tables" in lines
    for table in ("frames", "objects", "rooms", "scans"):
        assert f"  {table}/: 2 files" in lines
    assert "summary: 2 ok, 1 failed" in lines
    assert lines[-1] == f"  FAILED synthetic/synth0001_00: synthetic/synth0001_00: {NAN_ALIGNMENT}"
    objects = pl.read_parquet(out / "tables" / "objects" / "synthetic" / "synth0000_00.parquet")
    assert objects["object_id"].to_list() == [0, 1, 2]


def test_each_broken_file_fails_only_its_own_partition(tmp_path, scene_graph, capsys):
    scans = tmp_path / "scans"
    write_scan(scans, "synth0000_00")
    broken = {}
    for index, (breaker, file_hint) in enumerate(BREAKERS.items(), start=1):
        scene_id = f"synth{index:04d}_00"
        breaker(write_scan(scans, scene_id))
        broken[f"synthetic/{scene_id}"] = (scene_id, file_hint)
    out = tmp_path / "out"
    assert main(["build", "--scans", str(scans), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"summary: 1 ok, {len(broken)} failed" in lines
    assert (out / "tables" / "objects" / "synthetic" / "synth0000_00.parquet").exists()
    for key, (scene_id, file_hint) in broken.items():
        [failure] = [line for line in lines if line.startswith(f"  FAILED {key}: ")]
        error = failure.removeprefix(f"  FAILED {key}: ")
        assert error.startswith(f"{key}: {scene_id}") and file_hint in error.split(": ")[1], error
        assert not list((out / "tables").rglob(f"{scene_id}.parquet"))


def write_nan_vertices(folder):
    """A mesh whose vertex coordinates are all NaN (the PLY itself parses)."""
    path = folder / f"{folder.name}_vh_clean_2.ply"
    ply = PlyData.read(str(path), mmap=False)
    for axis in "xyz":
        ply["vertex"].data[axis][:] = np.nan
    ply.write(str(path))


def test_all_failed_or_nothing_found_exit_non_zero(tmp_path, scene_graph, capsys):
    scans = tmp_path / "scans"
    break_nan_alignment(write_scan(scans, "synth0000_00"))
    write_nan_vertices(write_scan(scans, "synth0001_00"))
    assert main(["build", "--scans", str(scans), "--out", str(tmp_path / "out")]) != 0
    printed = capsys.readouterr().out
    assert "summary: 0 ok, 2 failed" in printed
    # A mesh that parses but holds NaN coordinates is bad input like any other: one line naming scan and file.
    assert re.search(
        r"synthetic/synth0001_00 \.\.\. FAILED: synthetic/synth0001_00: synth0001_00_vh_clean_2\.ply: "
        r"\d+ vertices have NaN or inf coordinates",
        printed,
    )
    (tmp_path / "empty").mkdir()
    assert main(["build", "--scans", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) != 0
    assert "no scans found under" in capsys.readouterr().out


def test_config_file_sets_locations(tmp_path, scene_graph, capsys):
    write_scan(tmp_path / "elsewhere", "synth0000_00")
    config = tmp_path / "run.yaml"
    config.write_text(f"scans_root: {tmp_path / 'elsewhere'}\noutput_root: {tmp_path / 'results'}\n")
    assert main(["build", "--config", str(config)]) == 0
    assert (tmp_path / "results" / "tables" / "scans" / "synthetic" / "synth0000_00.parquet").exists()


def test_no_arguments_generates_the_synthetic_demo(tmp_path, scene_graph, monkeypatch, capsys):
    """With no arguments and no scans under data/scans, the real synthetic generator fills it first.

    The shipped demo is 8 scenes of 300 rendered frames (minutes); here it is 1 scene of 3 frames, and the
    generator's command is only watched (its arguments recorded), never replaced.
    """
    import runs.build
    from pipeline.synth import command as synth_command

    assert (runs.build.DEMO_SCENES, runs.build.DEMO_FRAMES) == (8, 300)
    monkeypatch.setattr(runs.build, "DEMO_SCENES", 1)
    monkeypatch.setattr(runs.build, "DEMO_FRAMES", 3)
    calls = []
    real_run = synth_command.run

    def watched_run(args):
        calls.append(args)
        return real_run(args)

    monkeypatch.setattr(synth_command, "run", watched_run)
    monkeypatch.chdir(tmp_path)
    assert main(["build"]) == 0
    assert [(a.out, a.scenes, a.frames) for a in calls] == [("data/scans", 1, 3)]
    printed = capsys.readouterr().out
    assert "[1/1] synthetic/synth0000_00 ... ok" in printed and "summary: 1 ok, 0 failed" in printed
    assert len(list((tmp_path / "data" / "out" / "tables" / "objects").rglob("*.parquet"))) == 1
    # A second run finds the scans and does not generate again.
    assert main(["build"]) == 0
    assert len(calls) == 1


def test_dataset_wide_assets_run_after_partitions_from_those_that_exist(tmp_path, capsys):
    """The whole graph (frames, visibility, qa, pinpoint, release) on two good scans and a broken one."""
    scans = tmp_path / "scans"
    write_scan(scans, "synth0000_00", objects=3, frames=3)
    break_nan_alignment(write_scan(scans, "synth0001_00", frames=3))
    write_scan(scans, "synth0002_00", objects=4, frames=3)
    out = tmp_path / "out"
    assert main(["build", "--scans", str(scans), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    [dataset_wide] = [line for line in lines if line.startswith("dataset-wide (") and " ... " in line]
    assert "qa" in dataset_wide.split(")")[0].split("(")[1].split(", ") and " ... ok (" in dataset_wide
    assert "  qa.parquet" in lines and "summary: 2 ok, 1 failed" in lines
    table = pl.read_parquet(out / "tables" / "qa.parquet")
    assert sorted(table["key"].unique().to_list()) == ["synthetic/synth0000_00", "synthetic/synth0002_00"]
    assert any(line.startswith(f"release: {out}/releases/") for line in lines)


def test_failed_dataset_wide_step_is_reported_but_partitions_count(tmp_path, scene_graph, monkeypatch, capsys):
    import dagster as dg

    import assets.definitions

    @dg.asset
    def qa(objects: pl.DataFrame) -> pl.DataFrame:
        raise RuntimeError("no questions survive the filters")

    monkeypatch.setattr(assets.definitions, "all_assets", [*assets.definitions.all_assets, qa])
    write_scan(tmp_path / "scans", "synth0000_00")
    # The partitions built, but no dataset-wide tables means no release: the build exits non-zero.
    assert main(["build", "--scans", str(tmp_path / "scans"), "--out", str(tmp_path / "out")]) != 0
    lines = outcome_lines(capsys.readouterr().out.splitlines())
    assert "[1/1] synthetic/synth0000_00 ... ok (" in lines[0]
    assert "summary: 1 ok, 0 failed, dataset-wide assets FAILED" in lines
    assert lines[-1] == "  FAILED dataset-wide: qa: RuntimeError: no questions survive the filters"


@pytest.mark.slow
def test_synthetic_scans_build_to_a_gated_release(tmp_path, capsys):
    """Full synthetic scans (furnished rooms, rendered frames) through every asset to a published release."""
    import json

    from pipeline.synth.scannet_writer import write_scannet
    from pipeline.synth.scene import generate_scene
    from tests.real_scans import break_truncated_ply

    scans = tmp_path / "scans"
    for index in range(3):
        write_scannet(generate_scene(0, index, frames=3), scans)
    break_truncated_ply(scans / "synth0001_00")
    out = tmp_path / "out"
    assert main(["build", "--scans", str(scans), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "summary: 2 ok, 1 failed" in lines
    [failure] = [line for line in lines if line.startswith("  FAILED synthetic/synth0001_00: ")]
    assert "synth0001_00_vh_clean_2.ply" in failure
    qa = pl.read_parquet(out / "tables" / "qa.parquet")
    assert sorted(qa["key"].unique().to_list()) == ["synthetic/synth0000_00", "synthetic/synth0002_00"]
    version = (out / "releases" / "LATEST").read_text().strip()
    manifest = json.loads((out / "releases" / version / "manifest.json").read_text())
    assert manifest["version"] == version and "tables/qa.parquet" in manifest["files"]
