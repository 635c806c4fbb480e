from __future__ import annotations

import json

import numpy as np

from pipeline.bench import command as bench
from scan2qa import main


def test_synthetic_room_reaches_triangle_target_with_many_objects():
    mesh = bench.synthetic_room(triangles=20_000, objects=30)
    assert len(mesh.triangles) >= 20_000
    assert len(mesh.triangle_object_ids) == len(mesh.triangles)
    assert len(np.unique(mesh.triangle_object_ids)) == 36  # 6 structural + 30 boxes


def test_bench_command_prints_one_json_object(capsys):
    assert main(["bench", "visibility", "--json", "--triangles", "2000", "--frames", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    for field in ("frames_per_s", "raw_frames_per_s", "ratio", "triangles", "frames",
                  "reduced_speedup", "reduced_max_fraction_error_pp"):
        assert field in out
    assert out["frames"] == 4 and out["triangles"] >= 2000 and out["visibility_rows"] > 0


def test_discovery_bench_compares_old_and_new_ticks_and_sees_a_touched_pose(capsys):
    assert main(["bench", "discovery", "--json", "--scans", "4", "--frames", "3", "--max-scans", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for field in ("old_scans_per_s", "new_scans_per_s", "ratio", "first_tick_seconds", "bounded_seconds"):
        assert field in out
    assert out["scans"] == 4 and out["files"] == 4 * (6 + 3 * 3)
    assert out["bounded_checked"] == 2 and out["ticks_per_pass"] == 2
    assert out["change_touched"] == "scannet/scene0002_00: pose/0.txt"
    assert out["change_rerun"] == ["scannet/scene0002_00"]


def test_discovery_bench_times_an_existing_root(tmp_path, capsys):
    from pipeline.bench.discovery import write_scans_root

    write_scans_root(tmp_path / "scans", 3, 2)
    assert main(["bench", "discovery", "--root", str(tmp_path / "scans")]) == 0
    text = capsys.readouterr().out
    assert "3 scans, root" in text and "old tick" in text and "touched" not in text
    assert sorted(p.name for p in (tmp_path / "scans").iterdir()) == ["scene0000_00", "scene0001_00", "scene0002_00"]


def test_build_bench_is_registered_and_fits_cost_per_frame():
    from benches.build import fit
    from benches.command import BENCHES

    assert "build" in BENCHES
    assert fit([100, 300, 300], [3.0, 7.0, 7.0]) == {"a_cpu_s": 1.0, "b_cpu_ms_per_frame": 20.0}
    assert fit([100, 100], [1.0, 2.0]) is None


def test_build_bench_splits_cpu_per_step_and_compares_every_file(tmp_path):
    from types import SimpleNamespace

    from benches.build import StepTimer, compare_files, format_result, summarize

    timer = StepTimer()

    def event(kind, step):
        return SimpleNamespace(dagster_event=SimpleNamespace(event_type_value=kind, step_key=step))

    timer(event("STEP_START", "scene"))
    sum(i * i for i in range(200_000))  # spend a little CPU inside the step
    timer(event("STEP_SUCCESS", "scene"))
    timer(SimpleNamespace(dagster_event=None))  # log messages are ignored
    split = timer.split(total=timer.seconds["scene"] + 0.5)
    assert split["scene"] > 0 and abs(split["(run overhead)"] - 0.5) < 1e-3

    for root, video in ((tmp_path / "a", b"v1"), (tmp_path / "b", b"v2")):
        (root / "tables" / "qa").mkdir(parents=True)
        (root / "tables" / "qa" / "x.parquet").write_bytes(b"same")
        (root / "videos").mkdir()
        (root / "videos" / "s.mp4").write_bytes(video)
        release = root / "releases" / f"r-{root.name}"
        release.mkdir(parents=True)
        (release / "manifest.json").write_text(root.name)  # dated: reported, not a failure
        (release / "report.html").write_text("page")
    compared = compare_files(tmp_path / "a", tmp_path / "b")
    assert compared["files_compared"] == 3 and compared["parquet_compared"] == 1 and compared["mp4_compared"] == 1
    assert not compared["identical"] and compared["differing"] == ["videos/s.mp4"]
    assert compared["release_pages_differing"] == ["releases/<version>/manifest.json"]

    build = {"per_scan": [{"key": "s", "cpu_s": 3.0, "visibility_cpu_s": 1.0, "steps": {"scene": 1.0}}],
             "dataset_wide_cpu_s": 2.0, "startup_cpu_s": 1.0, "dataset_wide_steps": {"release": 1.5}}
    summary = summarize([10], [build])
    assert summary["steps"]["scene"]["mean_cpu_s"] == 1.0 and summary["dataset_wide_steps"] == {"release": [1.5]}
    text = format_result({"groups": [{"frames": 10, "scans": 1, "builds": {"full": build}, "compare_baseline": compared}],
                          "summary": {"full": summary}, "identical": False, "baseline": None, "casts": ["full"]})
    assert "per step" in text and "scene" in text and "release" in text and "byte-identical=False" in text
