"""A scan whose folder left the scans root leaves the next release, on every path: the discovery sensor removes
its partition and observes the registered scans anew (so automation releases again), ``scan2qa build`` removes it
too; a listing that is cut short, unreadable or empty removes nothing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil

import dagster as dg
import pytest

from assets.partitions import REGISTERED_SCANS, gone_from_root, registered_scans_version
from assets.sensors import scan_discovery
from scan2qa import main
from resources.defaults import default_resources
from tests.real_scans import write_scan
from tests.test_discovery_sensor import LocalRoot, storage_for

KEYS = [f"synthetic/synth{i:04d}_00" for i in range(3)]


@contextlib.contextmanager
def unreadable_synthetic_folder(monkeypatch):
    """The ``synthetic`` dataset folder refuses listing, as a folder without permission or a stale NFS handle does.

    Tests run as root, which reads any folder, so the refusal is the operating system's error raised where the
    listing asks for it."""
    scandir = os.scandir

    def refusing(path):
        if os.fspath(path).rstrip("/").endswith("/synthetic"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    with monkeypatch.context() as patch:
        patch.setattr(os, "scandir", refusing)
        yield

def tick(instance, storage, cursor=None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=default_resources(storage))
    return scan_discovery(context)


def test_only_a_complete_listing_that_found_scans_removes_any():
    assert gone_from_root({"a/1", "a/2"}, ["a/1"], complete=True) == ["a/2"]
    assert gone_from_root({"a/1", "a/2"}, ["a/1"], complete=False) == []
    assert gone_from_root({"a/1", "a/2"}, [], complete=True) == []  # an unmounted share lists nothing


def test_sensor_removes_the_partition_of_a_scan_whose_folder_is_gone(tmp_path):
    root = LocalRoot(tmp_path)
    for i in range(3):
        write_scan(tmp_path / "local", f"synth{i:04d}_00", frames=3)
        root.add(tmp_path / "local" / f"synth{i:04d}_00", f"synth{i:04d}_00")
    storage = storage_for(tmp_path, root, max_scans=10)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("scans", KEYS)
        first = tick(instance, storage)
        assert not first.dynamic_partitions_requests and not first.asset_events

        shutil.rmtree(root.root / "synth0001_00")
        result = tick(instance, storage, first.cursor)
        [delete] = result.dynamic_partitions_requests
        assert isinstance(delete, dg.DeleteDynamicPartitionsRequest) and list(delete.partition_keys) == [KEYS[1]]
        [observed] = result.asset_events
        assert observed.asset_key == dg.AssetKey(REGISTERED_SCANS)
        assert observed.tags["dagster/data_version"] == registered_scans_version([KEYS[0], KEYS[2]])
        assert result.run_requests == []


def test_sensor_removes_nothing_when_a_folder_cannot_be_listed(tmp_path, monkeypatch):
    root = LocalRoot(tmp_path)
    write_scan(tmp_path / "local", "synth0000_00", frames=3)
    root.add(tmp_path / "local" / "synth0000_00", "synth0000_00")
    write_scan(tmp_path / "local", "synth0001_00", frames=3)
    root.add(tmp_path / "local" / "synth0001_00", "synthetic/synth0001_00")
    storage = storage_for(tmp_path, root, max_scans=10)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("scans", KEYS[:2])
        first = tick(instance, storage)
        with unreadable_synthetic_folder(monkeypatch):
            result = tick(instance, storage, first.cursor)
        assert not result.dynamic_partitions_requests and not result.asset_events
        assert "cannot be listed" in result.skip_reason.skip_message


def test_build_leaves_out_a_scan_removed_from_the_root_and_takes_it_back(tmp_path, monkeypatch, capsys):
    """On a persistent instance (``make demo``'s) a build releases what is under --scans now."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    scans, out = tmp_path / "scans", tmp_path / "out"
    assert main(["synth", "--out", str(scans), "--scenes", "2", "--frames", "8", "--seed", "0", "--workers", "1"]) == 0

    def released() -> list[str]:
        version = (out / "releases" / "LATEST").read_text().strip()
        import polars as pl

        return sorted(pl.read_parquet(out / "releases" / version / "tables" / "scans.parquet")["key"])

    build = ["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]
    assert main(build) == 0
    assert released() == KEYS[:2]
    first = (out / "releases" / "LATEST").read_text().strip()
    shutil.move(scans / "synth0001_00", tmp_path / "aside")
    capsys.readouterr()
    assert main(build) == 0
    printed = capsys.readouterr().out
    assert f"1 scan no longer under {scans}, left out of the release (their partitions removed): {KEYS[1]}" in printed
    assert released() == KEYS[:1]
    manifest = json.loads((out / "releases" / "latest" / "manifest.json").read_text())
    assert manifest["checks"]["excluded_scans"]["failed_scans"] == []  # removed, not failed
    shutil.move(tmp_path / "aside", scans / "synth0001_00")
    assert main(build) == 0
    assert "up to date: 2 of 2 scans" in capsys.readouterr().out  # its history came back with its partition
    # Its questions came back too (soft pins from the last release that held it, then the history-free choice
    # wherever that is as stable): the release is the first one again, byte for byte.
    assert released() == KEYS[:2] and (out / "releases" / "LATEST").read_text().strip() == first


def test_worker_processes_remove_no_partition(tmp_path, monkeypatch, capsys):
    """Worker processes register only the scans they build: a build that rebuilds two changed scans on two workers
    keeps the partition, and the release place, of the third, which was up to date."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    scans, out = tmp_path / "scans", tmp_path / "out"
    assert main(["synth", "--out", str(scans), "--scenes", "3", "--frames", "8", "--seed", "0", "--workers", "1"]) == 0
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0
    for scene in ("synth0000_00", "synth0001_00"):  # a pose file rewritten: discovery sees a changed scan
        pose = sorted((scans / scene / "pose").iterdir())[0]
        stat = pose.stat()
        os.utime(pose, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    capsys.readouterr()
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    assert "up to date: 1 of 3 scans" in printed and "building 2 scans on 2 worker processes" in printed, printed
    with dg.DagsterInstance.get() as instance:
        assert sorted(instance.get_dynamic_partitions("scans")) == KEYS
    import polars as pl

    version = (out / "releases" / "LATEST").read_text().strip()
    assert sorted(pl.read_parquet(out / "releases" / version / "tables" / "scans.parquet")["key"]) == KEYS


def test_a_build_whose_release_leaves_out_scans_it_built_fails(tmp_path, monkeypatch, capsys):
    """The release decides from the instance, not from the build's runs: when the worker processes load other code
    or config than the build did (here the deployment's config file changed between the two, as an edit on disk
    during a build does), the scans they built are stale to the release and left out. The build must say so and
    fail, not print "ok" over a partial release."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SCAN2QA_CONFIG", raising=False)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    scans, out = tmp_path / "scans", tmp_path / "out"
    assert main(["synth", "--out", str(scans), "--scenes", "3", "--frames", "8", "--seed", "0", "--workers", "1"]) == 0
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0
    for scene in ("synth0000_00", "synth0001_00"):
        pose = sorted((scans / scene / "pose").iterdir())[0]
        stat = pose.stat()
        os.utime(pose, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    changed = tmp_path / "changed.yaml"  # read by the workers' code versions only: this process has loaded its own
    changed.write_text("visibility:\n  fraction_threshold: 0.2\n")
    monkeypatch.setenv("SCAN2QA_CONFIG", str(changed))
    capsys.readouterr()
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "2"]) == 1
    printed = capsys.readouterr().out
    assert "summary: 3 ok, 0 failed, 2 built but left out of the release" in printed, printed
    for key in KEYS[:2]:
        assert f"  LEFT OUT {key} (stale: " in printed, printed


def test_a_build_discovery_with_an_unreadable_folder_is_incomplete(tmp_path, monkeypatch):
    """What ``scan2qa build`` passes to ``remove_gone_partitions``: a folder it could not list may hold scans."""
    from pipeline.scene.discovery import discover

    write_scan(tmp_path / "scans", "synth0000_00", frames=3)
    write_scan(tmp_path / "scans" / "synthetic", "synth0001_00", frames=3)
    assert discover(str(tmp_path / "scans")).complete
    with unreadable_synthetic_folder(monkeypatch):
        found = discover(str(tmp_path / "scans"))
    assert [key for key, _ in found.scans] == [KEYS[0]] and not found.complete
    assert any("cannot be listed" in line for line in found.skipped)
