from __future__ import annotations

import json

import numpy as np

from pipeline.bench import command as bench
from pipeline.cli import main


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
    from pipeline.bench.build import fit
    from pipeline.bench.command import BENCHES

    assert "build" in BENCHES
    assert fit([100, 300, 300], [3.0, 7.0, 7.0]) == {"a_cpu_s": 1.0, "b_cpu_ms_per_frame": 20.0}
    assert fit([100, 100], [1.0, 2.0]) is None
