from __future__ import annotations

import json

import numpy as np

from pipeline import bench
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
