"""The scene multi-asset on the real ScanNet fixture scene: four conformed tables, bad scans isolated."""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runs.build import build
from pipeline import schemas
from pipeline.config import load_config
from tests.real_scans import break_missing_aggregation, break_truncated_ply, break_unknown_segments

SCENE = "scene0000_00"
LABEL_MAP = "scannetv2-labels.combined.tsv"


def copy_scene(fixtures_dir: Path, root: Path, scene_id: str = SCENE) -> Path:
    """The fixture scene under a new scene id (file names carry the id), with the label map at the root."""
    source = fixtures_dir / "scannet" / SCENE
    target = root / scene_id
    target.mkdir(parents=True)
    for f in source.iterdir():
        shutil.copyfile(f, target / f.name.replace(SCENE, scene_id))
    if not (root / LABEL_MAP).exists():
        shutil.copyfile(fixtures_dir / "scannet" / LABEL_MAP, root / LABEL_MAP)
    return target


def break_nan_alignment_pose(folder: Path) -> None:
    meta = next(folder.glob("scene*_??.txt"))
    meta.write_text(meta.read_text() + "\naxisAlignment = " + " ".join(["nan"] + ["0"] * 15) + "\n")


BREAKERS = {
    "scene0001_00": (break_missing_aggregation, "aggregation"),
    "scene0002_00": (break_truncated_ply, "_vh_clean_2.ply"),
    "scene0003_00": (break_unknown_segments, "aggregation.json"),
    "scene0004_00": (break_nan_alignment_pose, "scene0004_00.txt"),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_dir):
    """One build of the good fixture scene next to four broken copies of it."""
    tmp = tmp_path_factory.mktemp("scene_build")
    root = tmp / "scans"
    copy_scene(fixtures_dir, root)
    for scene_id, (breaker, _) in BREAKERS.items():
        breaker(copy_scene(fixtures_dir, root, scene_id))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report = build(load_config(None, scans_root=str(root), output_root=str(tmp / "out")))
    return tmp, report, printed.getvalue()


def test_scene_assets_write_four_conformed_tables(built):
    tmp, report, _ = built
    assert report.ok == [f"scannet/{SCENE}"]
    tables = tmp / "out" / "tables"
    for table in ("scans", "objects", "rooms", "frames"):
        path = tables / table / "scannet" / f"{SCENE}.parquet"
        assert pq.read_schema(path).equals(schemas.schema(table), check_metadata=False), table
    scans = pq.read_table(tables / "scans" / "scannet" / f"{SCENE}.parquet").to_pylist()
    assert [row["key"] for row in scans] == [f"scannet/{SCENE}"]
    assert pq.read_metadata(tables / "objects" / "scannet" / f"{SCENE}.parquet").num_rows > 10
    # The fixture has no camera stream: an empty but conformed frames table.
    assert pq.read_metadata(tables / "frames" / "scannet" / f"{SCENE}.parquet").num_rows == 0


def test_bad_scans_fail_only_their_own_partition(built):
    tmp, report, printed = built
    assert sorted(report.failed) == [f"scannet/{s}" for s in BREAKERS]
    for scene_id, (_, file_hint) in BREAKERS.items():
        error = report.failed[f"scannet/{scene_id}"]
        assert "\n" not in error and error.startswith(f"scannet/{scene_id}: ") and file_hint in error, error
        assert f"scannet/{scene_id} ... FAILED: {error}" in printed
        assert not list((tmp / "out" / "tables").rglob(f"{scene_id}.parquet"))


def test_failed_rebuild_keeps_previous_tables(built, tmp_path):
    """A scan that built once and is then corrupted keeps its last good tables, and no stray files appear."""
    tmp, _, _ = built
    root = tmp_path / "scans"
    shutil.copytree(tmp / "scans" / SCENE, root / SCENE)
    shutil.copyfile(tmp / "scans" / LABEL_MAP, root / LABEL_MAP)
    shutil.copytree(tmp / "out", tmp_path / "out")
    before = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    written = {p.relative_to(tmp_path / "out").as_posix() for p in before}
    assert {f"tables/{table}/scannet/{SCENE}.parquet" for table in ("scans", "objects", "rooms", "frames")} <= written
    break_truncated_ply(root / SCENE)
    config = load_config(None, scans_root=str(root), output_root=str(tmp_path / "out"))
    assert list(build(config).failed) == [f"scannet/{SCENE}"]
    # Only the build's note of the folders it skipped is rewritten (the release's membership is Dagster's record).
    skipped = tmp_path / "out" / "skipped_folders.json"
    assert json.loads(skipped.read_text()) == {"skipped_folders": []}
    after = {p: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file() and p != skipped}
    assert after == {p: b for p, b in before.items() if p != skipped}
