"""``scan2qa build``: progress lines, output summary, exit codes, the synthetic demo default."""

import sys
import types

import polars as pl
import pytest

from pipeline.cli import main
from tests.dagster_fakes import install_fake_reader, use_scene_assets_only, write_fake_scan


@pytest.fixture
def fake_reader(monkeypatch):
    install_fake_reader(monkeypatch)
    use_scene_assets_only(monkeypatch)


def test_build_reports_progress_outputs_and_failures(tmp_path, fake_reader, capsys):
    scans = tmp_path / "scans"
    write_fake_scan(scans, "synth0000_00", objects=3)
    write_fake_scan(scans, "synth0001_00", problem="pose/7.txt: NaN in camera pose")
    write_fake_scan(scans, "synth0002_00", objects=1)
    out = tmp_path / "out"
    assert main(["build", "--scans", str(scans), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[1/3] synthetic/synth0000_00 ... ok (") and lines[0].endswith(" s)")
    assert lines[1] == "[2/3] synthetic/synth0001_00 ... FAILED: synthetic/synth0001_00: scan.json: pose/7.txt: NaN in camera pose"
    assert lines[2].startswith("[3/3] synthetic/synth0002_00 ... ok (")
    assert f"tables: {out}/tables" in lines
    for table in ("frames", "objects", "rooms", "scans"):
        assert f"  {table}/: 2 files" in lines
    assert "summary: 2 ok, 1 failed" in lines
    assert lines[-1] == "  FAILED synthetic/synth0001_00: synthetic/synth0001_00: scan.json: pose/7.txt: NaN in camera pose"
    objects = pl.read_parquet(out / "tables" / "objects" / "synthetic" / "synth0000_00.parquet")
    assert objects["object_id"].to_list() == [0, 1, 2]


def test_all_failed_or_nothing_found_exit_non_zero(tmp_path, fake_reader, capsys):
    scans = tmp_path / "scans"
    write_fake_scan(scans, "synth0000_00", problem="broken")
    (write_fake_scan(scans, "synth0001_00") / "scan.json").write_text("{not json")
    assert main(["build", "--scans", str(scans), "--out", str(tmp_path / "out")]) != 0
    printed = capsys.readouterr().out
    assert "summary: 0 ok, 2 failed" in printed
    # Errors other than ScanError are named by the step that raised them.
    assert "synthetic/synth0001_00 ... FAILED: scene: JSONDecodeError: Expecting property name" in printed
    assert main(["build", "--scans", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) != 0
    assert "no scans found under" in capsys.readouterr().out


def test_config_file_sets_locations(tmp_path, fake_reader, capsys):
    write_fake_scan(tmp_path / "elsewhere", "synth0000_00")
    config = tmp_path / "run.yaml"
    config.write_text(f"scans_root: {tmp_path / 'elsewhere'}\noutput_root: {tmp_path / 'results'}\n")
    assert main(["build", "--config", str(config)]) == 0
    assert (tmp_path / "results" / "tables" / "scans" / "synthetic" / "synth0000_00.parquet").exists()


def test_no_arguments_generates_the_synthetic_demo(tmp_path, fake_reader, monkeypatch, capsys):
    """With no arguments and no scans under data/scans, the synthetic generator fills it first."""
    calls = []

    def add_arguments(parser):
        for flag in ("--out", "--scenes", "--frames", "--seed"):
            parser.add_argument(flag)

    def run(args):
        calls.append(args)
        for i in range(int(args.scenes)):
            write_fake_scan(tmp_path / args.out, f"synth{i:04d}_00")
        return 0

    synth_command = types.ModuleType("pipeline.synth.command")
    synth_command.add_arguments, synth_command.run = add_arguments, run
    monkeypatch.setitem(sys.modules, "pipeline.synth.command", synth_command)
    monkeypatch.chdir(tmp_path)
    assert main(["build"]) == 0
    assert [(a.out, a.scenes, a.frames) for a in calls] == [("data/scans", "8", "300")]
    printed = capsys.readouterr().out
    assert "[8/8] synthetic/synth0007_00 ... ok" in printed and "summary: 8 ok, 0 failed" in printed
    assert len(list((tmp_path / "data" / "out" / "tables" / "objects").rglob("*.parquet"))) == 8
    # A second run finds the scans and does not generate again.
    assert main(["build"]) == 0
    assert len(calls) == 1


def test_dataset_wide_assets_run_after_partitions_from_those_that_exist(tmp_path, fake_reader, monkeypatch, capsys):
    import dagster as dg

    import assets.definitions
    from pipeline import schemas

    @dg.asset
    def qa(objects: pl.DataFrame) -> pl.DataFrame:
        counts = objects.group_by("key").len().sort("key")
        return schemas.from_rows("qa", [{"id": k, "key": k, "answer_value": float(n)} for k, n in counts.iter_rows()])

    monkeypatch.setattr(assets.definitions, "all_assets", [*assets.definitions.all_assets, qa])
    scans = tmp_path / "scans"
    write_fake_scan(scans, "synth0000_00", objects=3)
    write_fake_scan(scans, "synth0001_00", problem="broken")
    write_fake_scan(scans, "synth0002_00", objects=1)
    assert main(["build", "--scans", str(scans), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "dataset-wide (qa) ... ok (" in printed and "  qa.parquet" in printed.splitlines()
    table = pl.read_parquet(tmp_path / "out" / "tables" / "qa.parquet")
    assert table.select("key", "answer_value").rows() == [("synthetic/synth0000_00", 3.0), ("synthetic/synth0002_00", 1.0)]


def test_failed_dataset_wide_step_is_reported_but_partitions_count(tmp_path, fake_reader, monkeypatch, capsys):
    import dagster as dg

    import assets.definitions

    @dg.asset
    def qa(objects: pl.DataFrame) -> pl.DataFrame:
        raise RuntimeError("no questions survive the filters")

    monkeypatch.setattr(assets.definitions, "all_assets", [*assets.definitions.all_assets, qa])
    write_fake_scan(tmp_path / "scans", "synth0000_00")
    assert main(["build", "--scans", str(tmp_path / "scans"), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "summary: 1 ok, 0 failed, dataset-wide assets FAILED" in lines
    assert lines[-1] == "  FAILED dataset-wide: qa: RuntimeError: no questions survive the filters"
