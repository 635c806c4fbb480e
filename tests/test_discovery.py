"""Scan discovery: layouts, stable keys, fingerprints that change only with the files."""

from __future__ import annotations

import os
import shutil

import pytest

from pipeline.discovery import discover_scans, locate_scan, scan_fingerprint
from tests.real_scans import write_scan


def test_discovers_flat_and_grouped_layouts_sorted(tmp_path):
    write_scan(tmp_path, "synth0001_00")
    write_scan(tmp_path / "more", "synth0000_00")
    (tmp_path / ".hidden").mkdir()
    write_scan(tmp_path / ".hidden", "synth0009_00")
    (tmp_path / "labels.tsv").write_text("x")
    found = discover_scans(str(tmp_path))
    assert found == [
        ("synthetic/synth0000_00", str(tmp_path / "more" / "synth0000_00")),
        ("synthetic/synth0001_00", str(tmp_path / "synth0001_00")),
    ]


def test_missing_root_has_no_scans(tmp_path):
    assert discover_scans(str(tmp_path / "absent")) == []


def test_root_that_is_a_scan_is_discovered(tmp_path):
    folder = write_scan(tmp_path, "synth0004_00")
    assert discover_scans(str(folder)) == [("synthetic/synth0004_00", str(folder))]
    assert locate_scan(str(folder), "synthetic/synth0004_00") == str(folder)


def test_locate_scan_finds_both_layouts(tmp_path):
    write_scan(tmp_path, "synth0001_00")
    write_scan(tmp_path / "synthetic", "synth0002_00")
    write_scan(tmp_path / "group", "synth0003_00")
    assert locate_scan(str(tmp_path), "synthetic/synth0001_00") == str(tmp_path / "synth0001_00")
    assert locate_scan(str(tmp_path), "synthetic/synth0002_00") == str(tmp_path / "synthetic" / "synth0002_00")
    assert locate_scan(str(tmp_path), "synthetic/synth0003_00") == str(tmp_path / "group" / "synth0003_00")
    with pytest.raises(FileNotFoundError, match="synthetic/nothing"):
        locate_scan(str(tmp_path), "synthetic/nothing")


def test_fingerprint_changes_with_files_only(tmp_path):
    folder = write_scan(tmp_path, "synth0000_00")
    first = scan_fingerprint(str(folder))
    assert scan_fingerprint(str(folder)) == first
    # Same content elsewhere: fingerprints do not depend on where the root is mounted.
    copy = tmp_path / "copy" / "synth0000_00"
    shutil.copytree(folder, copy)
    for f in folder.iterdir():
        stat = f.stat()
        os.utime(copy / f.name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert scan_fingerprint(str(copy)) == first
    meta = folder / "synth0000_00.txt"
    stat = meta.stat()
    meta.write_text(meta.read_text().replace("sceneType = Office", "sceneType = Lounge"))
    os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = scan_fingerprint(str(folder))
    assert changed != first
    (folder / "extra.txt").write_text("x")
    assert scan_fingerprint(str(folder)) != changed


def test_real_scannet_scene_is_discovered(tmp_path, fixtures_dir):
    readers = pytest.importorskip("pipeline.readers")
    if not hasattr(readers, "detect_dataset"):
        pytest.skip("pipeline.readers.detect_dataset is not available yet")
    shutil.copytree(fixtures_dir / "scannet" / "scene0000_00", tmp_path / "scene0000_00")
    assert discover_scans(str(tmp_path)) == [("scannet/scene0000_00", str(tmp_path / "scene0000_00"))]
