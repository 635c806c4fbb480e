"""Scans are found once: steps read the folder discovery recorded and never list the scans root.

Steps will run on workers far from the scans (Celery, ``s3://``), where listing a
root of thousands of scans costs more than the step. "Never lists" is shown
without watching our own code: any listing of the roots below fails at the
operating-system call (``os.scandir``/``os.listdir`` refuse them), so a step that
listed the root would fail. Where the location comes from is shown by copies a listing or
a direct guess would pick instead, broken so that reading them fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import dagster as dg
import pytest

import assets.frames
import assets.scene
import assets.visibility
from runs.build import build
from runs.in_process import run_failure
from assets.partitions import SOURCE_TAG
from pipeline.config import load_config
from pipeline.scene.discovery import discover_scans
from pipeline.storage import read_table, upath
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import break_truncated_ply, scene_graph_only, write_scan
from tests.scannet_factory import V2_MAP, make_box_room

KEY = "synthetic/synth0000_00"


def unlistable(root: Path, monkeypatch) -> Path:
    """A root whose listing raises (any ``os.scandir``/``os.listdir`` of it; checked, so the proof cannot go stale).

    Discovery itself survives unlistable entries (a symlink loop is reported and skipped), so the listing
    is made to fail at the operating-system call every listing goes through.
    """
    root.mkdir(parents=True, exist_ok=True)
    real_scandir, real_listdir = os.scandir, os.listdir

    def refuse(real):
        def listing(path=".", *args):
            if not isinstance(path, int) and os.path.realpath(os.fspath(path)) == os.path.realpath(root):
                raise PermissionError(13, "listing the scans root is not allowed in this test", str(root))
            return real(path, *args)
        return listing

    monkeypatch.setattr(os, "scandir", refuse(real_scandir))
    monkeypatch.setattr(os, "listdir", refuse(real_listdir))
    with pytest.raises(OSError, match="not allowed"):
        os.listdir(root)
    return root


class Runs:
    """Per-scan runs of the real scene, video and visibility assets against one instance, as the daemon launches them."""

    def __init__(self, scans_root: str, out: Path, storage_options: dict | None = None):
        self.storage = StorageResource(
            scans_root=scans_root, output_root=str(out), storage_options=storage_options or {}
        )
        self.config = self.storage.config()
        self.instance = dg.DagsterInstance.ephemeral()

    def run(self, key: str, asset, tags: dict | None = None) -> tuple[bool, str]:
        if key not in self.instance.get_dynamic_partitions("scans"):
            self.instance.add_dynamic_partitions("scans", [key])
        result = dg.materialize(
            [assets.scene.scene, assets.frames.frame_samples, assets.frames.scan_videos, assets.visibility.visibility],
            selection=[asset],
            partition_key=key,
            tags=tags,
            resources=default_resources(self.storage),
            instance=self.instance,
            raise_on_error=False,
        )
        return result.success, "" if result.success else run_failure(result)

    def table(self, name: str, key: str = KEY):
        return read_table(upath(f"{self.config.tables_root}/{name}/{key}.parquet", self.config.storage_options), name)


def test_scannet_download_layout_is_discovered_and_built(tmp_path, monkeypatch):
    """ScanNet's download: scans/ and scans_test/ below the root, the label map at the root, keys scannet/<id>."""
    scene_graph_only(monkeypatch)
    root = tmp_path / "ScanNet"
    train = make_box_room(root / "scans", "scene0999_00")
    test = make_box_room(root / "scans_test", "scene0998_00")
    (root / "scans" / V2_MAP).rename(root / V2_MAP)
    (root / "scans_test" / V2_MAP).unlink()
    (root / "tasks" / "scannet_frames_25k").mkdir(parents=True)  # the download's other folders hold no scans
    assert discover_scans(str(root)) == [("scannet/scene0998_00", str(test)), ("scannet/scene0999_00", str(train))]

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report = build(load_config(None, scans_root=str(root), output_root=str(tmp_path / "out")))
    assert report.ok == ["scannet/scene0998_00", "scannet/scene0999_00"], report.failed
    runs = Runs(str(root), tmp_path / "out")
    assert runs.table("scans", "scannet/scene0999_00")["source_uri"].to_list() == [str(train)]
    objects = runs.table("objects", "scannet/scene0999_00")
    # Raw labels went through the label map kept at the top of the download.
    assert objects["label_mapped"].all() and objects["category"].to_list() == ["floor", "table", "book"]


def test_steps_read_the_recorded_folder_and_never_list_the_root(tmp_path, monkeypatch):
    root = unlistable(tmp_path / "scans", monkeypatch)
    good = write_scan(root / "zz", "synth0000_00", objects=4, frames=3)
    flat = write_scan(root, "synth0000_00", frames=3)  # where a direct guess looks first
    break_truncated_ply(flat)
    for image in (flat / "color").iterdir():
        image.write_bytes(b"not a jpeg")
    runs = Runs(str(root), tmp_path / "out")

    # The scene step of a run tagged by discovery reads the tagged folder.
    assert runs.run(KEY, assets.scene.scene, tags={SOURCE_TAG: str(good)}) == (True, "")
    assert runs.table("objects")["object_id"].to_list() == [0, 1, 2, 3]
    assert runs.table("scans")["source_uri"].to_list() == [str(good)]

    # Later steps launched without the tag (a rerun from the UI) read what the scene step stored (the mesh) and
    # the images in the folder the scans table recorded.
    assert runs.run(KEY, assets.visibility.visibility) == (True, "")
    assert runs.table("visibility").height > 0
    assert runs.run(KEY, assets.frames.frame_samples) == (True, "")
    assert runs.run(KEY, assets.frames.scan_videos) == (True, "")

    # With nothing recorded (a scene rerun without the tag), only the direct folders are tried: the broken flat copy.
    Path(runs.config.tables_root, "scans", f"{KEY}.parquet").unlink()
    ok, error = runs.run(KEY, assets.scene.scene)
    assert not ok and error.startswith(f"{KEY}: synth0000_00_vh_clean_2.ply: "), error
    shutil.rmtree(root / "synth0000_00")
    ok, error = runs.run(KEY, assets.scene.scene)
    assert not ok and "\n" not in error, error
    assert error == (
        f"{KEY}: {root}: no scan folder for this key; looked at data/synth0000_00, scans/synth0000_00, "
        "scans_test/synth0000_00, synth0000_00, synthetic/synth0000_00 under the root"
    )


def test_a_source_tag_outside_the_root_is_refused_and_one_inside_is_not_second_guessed(tmp_path):
    root = tmp_path / "scans"
    write_scan(root, "synth0000_00")
    runs = Runs(str(root), tmp_path / "out")
    for outside in (
        write_scan(tmp_path / "scans-old", "synth0000_00"),  # shares the root's name as a prefix
        f"{root}/../scans-old/synth0000_00",
        "s3://bucket/scans/synth0000_00",
    ):
        ok, error = runs.run(KEY, assets.scene.scene, tags={SOURCE_TAG: str(outside)})
        assert not ok
        assert error == f"{KEY}: {outside}: run tag {SOURCE_TAG} is outside the scans root {root}"
    assert not Path(runs.config.tables_root).exists()
    # A tag inside the root is taken as it is: a folder gone since discovery fails naming it, not searched for.
    ok, error = runs.run(KEY, assets.scene.scene, tags={SOURCE_TAG: f"{root}/gone/synth0000_00"})
    assert not ok and error == f"{KEY}: {root}/gone/synth0000_00: scene folder not found"


@pytest.fixture(params=["local", "s3"])
def scans_root(request, tmp_path):
    """(root URI, storage options, upload) for a local root and one on moto's S3 server."""
    if request.param == "local":
        root = tmp_path / "scans"

        def put(local: Path, rel: str) -> None:
            shutil.copytree(local, root / rel)

        return str(root), {}, put
    bucket = request.getfixturevalue("s3_bucket")
    return bucket.uri("scans"), bucket.options, lambda local, rel: bucket.upload(local, f"scans/{rel}")


def test_sensor_tags_runs_with_a_source_their_steps_accept(tmp_path, scans_root):
    """The scan_discovery sensor's tag, from a real tick, takes the step to a folder no direct guess names."""
    from assets.sensors import scan_discovery

    uri, options, put = scans_root
    write_scan(tmp_path / "local" / "group", "synth0000_00", objects=4)
    put(tmp_path / "local" / "group", "group")
    runs = Runs(uri, tmp_path / "out", options)
    context = dg.build_sensor_context(instance=runs.instance, resources=default_resources(runs.storage))
    [request] = scan_discovery(context).run_requests
    assert request.partition_key == KEY and request.tags[SOURCE_TAG] == f"{uri}/group/synth0000_00"
    assert runs.run(KEY, assets.scene.scene, tags=request.tags) == (True, "")
    assert runs.table("objects")["object_id"].to_list() == [0, 1, 2, 3]


def test_scannet_download_layout_on_s3_without_a_tag(tmp_path, s3_bucket):
    """A run launched by hand finds scans/<id> directly and the label map at the top of the download, on S3 too."""
    local = tmp_path / "ScanNet"
    make_box_room(local / "scans", "scene0999_00")
    (local / "scans" / V2_MAP).rename(local / V2_MAP)
    runs = Runs(s3_bucket.upload(local, "ScanNet"), tmp_path / "out", s3_bucket.options)
    assert runs.run("scannet/scene0999_00", assets.scene.scene) == (True, "")
    scans = runs.table("scans", "scannet/scene0999_00")
    assert scans["source_uri"].to_list() == [f"{s3_bucket.uri('ScanNet')}/scans/scene0999_00"]
    assert runs.table("objects", "scannet/scene0999_00")["label_mapped"].all()
