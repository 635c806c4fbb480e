"""Scan discovery: layouts, stable keys, fingerprints that change only with the files."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pipeline.scene.discovery import (
    DiscoveryState,
    discover_scans,
    discovery_tick,
    locate_scan,
    scan_fingerprint,
)
from pipeline.errors import ScanError
from pipeline.storage import within_root
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


def test_locate_scan_finds_the_direct_layouts(tmp_path):
    """Flat, dataset folder and the download folders (ScanNet's scans/ and scans_test/, ScanNet++'s data/)."""
    layouts = {
        "synth0001_00": tmp_path,
        "synth0002_00": tmp_path / "synthetic",
        "synth0003_00": tmp_path / "scans",
        "synth0004_00": tmp_path / "scans_test",
        "synth0005_00": tmp_path / "data",
    }
    for scene_id, parent in layouts.items():
        write_scan(parent, scene_id)
    for scene_id, parent in layouts.items():
        assert locate_scan(str(tmp_path), f"synthetic/{scene_id}") == str(parent / scene_id)
    assert sorted(discover_scans(str(tmp_path))) == sorted(
        (f"synthetic/{scene_id}", str(parent / scene_id)) for scene_id, parent in layouts.items()
    )


def test_locate_scan_never_walks_and_names_every_place_it_looked(tmp_path):
    """A scan in a folder of another name is found by discovery, and by a step only through what discovery recorded."""
    folder = write_scan(tmp_path / "group", "synth0003_00")
    assert discover_scans(str(tmp_path)) == [("synthetic/synth0003_00", str(folder))]
    with pytest.raises(ScanError) as caught:
        locate_scan(str(tmp_path), "synthetic/synth0003_00")
    message = str(caught.value)
    assert "\n" not in message and message == (
        f"synthetic/synth0003_00: {tmp_path}: no scan folder for this key; looked at "
        "data/synth0003_00, scans/synth0003_00, scans_test/synth0003_00, synth0003_00, synthetic/synth0003_00 "
        "under the root"
    )
    assert locate_scan(str(tmp_path), "synthetic/synth0003_00", recorded=str(folder)) == str(folder)
    # A recorded source is trusted only while it is inside the root and still holds that scan.
    outside = write_scan(tmp_path.parent / f"{tmp_path.name}-elsewhere", "synth0003_00")
    with pytest.raises(ScanError, match=f"looked at the recorded source {outside}; data/synth0003_00"):
        locate_scan(str(tmp_path), "synthetic/synth0003_00", recorded=str(outside))
    flat = write_scan(tmp_path, "synth0003_00")
    shutil.rmtree(folder)
    assert locate_scan(str(tmp_path), "synthetic/synth0003_00", recorded=str(folder)) == str(flat)
    # Another dataset's folder of the same name is not this scan.
    assert locate_scan(str(tmp_path), "synthetic/synth0003_00") == str(flat)
    with pytest.raises(ScanError, match="scannet/synth0003_00: "):
        locate_scan(str(tmp_path), "scannet/synth0003_00")


def test_locate_scan_picks_the_copy_discovery_picks(tmp_path):
    """Duplicated keys: the direct candidates are tried in the order discovery ranks folders."""
    for parent in (tmp_path, tmp_path / "synthetic", tmp_path / "scans"):
        write_scan(parent, "synth0001_00")
    [(key, uri)] = discover_scans(str(tmp_path))
    assert uri == str(tmp_path / "scans" / "synth0001_00")
    assert locate_scan(str(tmp_path), key) == uri


def test_within_root_compares_path_components():
    root = "/data/scans"
    assert within_root(root, "/data/scans") and within_root(root, "/data/scans/")
    assert within_root(root, "/data/scans/a/b")
    assert not within_root(root, "/data/scans-old/a")  # a sibling sharing the prefix
    assert not within_root(root, "/data/scans/../other/a") and not within_root(root, "/data")
    assert within_root("s3://bucket/scans", "s3://bucket/scans/scene0000_00")
    assert not within_root("s3://bucket/scans", "s3://other/scans/scene0000_00")
    assert not within_root("s3://bucket/scans", "/bucket/scans/scene0000_00")
    assert not within_root("/bucket/scans", "s3://bucket/scans/scene0000_00")


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
    readers = pytest.importorskip("pipeline.scene.readers")
    if not hasattr(readers, "detect_dataset"):
        pytest.skip("pipeline.scene.readers.detect_dataset is not available yet")
    shutil.copytree(fixtures_dir / "scannet" / "scene0000_00", tmp_path / "scene0000_00")
    assert discover_scans(str(tmp_path)) == [("scannet/scene0000_00", str(tmp_path / "scene0000_00"))]


# --- cheap fingerprints and bounded ticks -------------------------------------------------------------------------


def bump(path, seconds: float = 2.0) -> None:
    """Move a file's (or folder's) mtime forward, as a later touch or rewrite would."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + int(seconds * 1e9)))


def test_fingerprint_sees_poses_meshes_and_image_folders(tmp_path):
    folder = write_scan(tmp_path, "synth0000_00", frames=5)
    first = scan_fingerprint(str(folder))
    assert scan_fingerprint(str(folder)) == first
    bump(folder / "pose" / "3.txt")
    after_pose = scan_fingerprint(str(folder))
    assert after_pose != first
    bump(folder / "synth0000_00_vh_clean_2.ply")
    after_mesh = scan_fingerprint(str(folder))
    assert after_mesh not in (first, after_pose)
    (folder / "color" / "4.jpg").unlink()
    after_removal = scan_fingerprint(str(folder))
    assert after_removal != after_mesh
    # An image replaced by rename (rsync, aws s3 sync, atomic writers) updates its folder's mtime.
    color = folder / "color"
    bump(color, -60.0)
    settled = scan_fingerprint(str(folder))
    (color / "tmp.part").write_bytes((color / "0.jpg").read_bytes()[::-1])
    os.replace(color / "tmp.part", color / "0.jpg")
    assert scan_fingerprint(str(folder)) != settled


def test_fingerprint_does_not_stat_frame_images(tmp_path, monkeypatch):
    """Frame images cost one directory listing per folder, not one stat each; poses are stat-ed."""
    folder = write_scan(tmp_path, "synth0000_00", frames=6)
    stat_calls = []
    real_scandir = os.scandir

    class Entry:
        def __init__(self, entry):
            self._entry, self.name, self.path = entry, entry.name, entry.path

        def is_dir(self):
            return self._entry.is_dir()

        def stat(self):
            stat_calls.append(self.path)
            return self._entry.stat()

    class Listing:
        def __init__(self, path):
            self._it = real_scandir(path)

        def __enter__(self):
            return (Entry(e) for e in self._it)

        def __exit__(self, *exc):
            self._it.close()

    monkeypatch.setattr("pipeline.scene.discovery.os.scandir", Listing)
    scan_fingerprint(str(folder))
    stat_names = {os.path.relpath(p, folder) for p in stat_calls}
    assert {f"pose/{i}.txt" for i in range(6)} <= stat_names
    assert "synth0000_00_vh_clean_2.ply" in stat_names
    assert not [n for n in stat_names if n.startswith(("color/", "depth/"))]


def tick(root, state, max_scans=100, **kwargs):
    return discovery_tick(str(root), None, state, max_scans=max_scans, max_seconds=kwargs.pop("max_seconds", 60.0), **kwargs)


def test_tick_runs_new_and_changed_scans_only(tmp_path):
    root = tmp_path / "scans"
    write_scan(root, "synth0000_00", frames=3)
    write_scan(root / "synthetic", "synth0001_00", frames=3)
    first = tick(root, DiscoveryState())
    assert [key for key, _, _ in first.changed] == ["synthetic/synth0000_00", "synthetic/synth0001_00"]
    assert first.scans == [
        ("synthetic/synth0000_00", str(root / "synth0000_00")),
        ("synthetic/synth0001_00", str(root / "synthetic" / "synth0001_00")),
    ]
    state = DiscoveryState.from_cursor(first.state.to_cursor())
    unchanged = tick(root, state)
    assert unchanged.changed == [] and len(unchanged.checked) == 2
    bump(root / "synthetic" / "synth0001_00" / "pose" / "1.txt")
    changed = tick(root, unchanged.state)
    assert [key for key, _, _ in changed.changed] == ["synthetic/synth0001_00"]
    assert changed.changed[0][2] != first.changed[1][2]
    shutil.rmtree(root / "synth0000_00")
    gone = tick(root, changed.state)
    assert [key for key, _ in gone.scans] == ["synthetic/synth0001_00"] and gone.changed == []
    assert sorted(gone.state.scans) == ["synthetic/synth0001_00"]


def test_bounded_ticks_rotate_through_every_scan(tmp_path):
    root = tmp_path / "scans"
    keys = [f"synthetic/synth{i:04d}_00" for i in range(5)]
    for key in keys:
        write_scan(root, key.split("/")[1])
    state, checked, runs = DiscoveryState(), [], []
    for _ in range(6):
        result = tick(root, state, max_scans=2)
        assert [key for key, _ in result.scans] == keys  # every scan is discovered (and registered) at once
        checked.append([key[-7:-3] for key in result.checked])
        runs += [key for key, _, _ in result.changed]
        state = DiscoveryState.from_cursor(result.state.to_cursor())
    # New scans first, then the known ones in key order, resuming where the last tick stopped.
    assert checked == [["0000", "0001"], ["0002", "0003"], ["0004", "0000"], ["0001", "0002"], ["0003", "0004"],
                       ["0000", "0001"]]
    assert runs == keys  # each new scan ran once; unchanged scans never again
    assert "at most 2 scans" in result.summary() and "once every 3 ticks" in result.summary()
    # A change is picked up within one pass of the rotation, exactly once.
    bump(root / "synth0002_00" / "synth0002_00.txt")
    found = []
    for _ in range(3):
        result = tick(root, state, max_scans=2)
        found += [key for key, _, _ in result.changed]
        state = result.state
    assert found == ["synthetic/synth0002_00"]


def test_deadline_stops_after_at_least_one_scan_per_tick(tmp_path):
    root = tmp_path / "scans"
    for i in range(3):
        write_scan(root, f"synth{i:04d}_00")
    ticks = iter(range(10_000))
    state, runs = DiscoveryState(), []
    for _ in range(3):
        # Every clock reading is a second later, so the 0.5 s budget is spent before the second scan.
        result = tick(root, state, max_seconds=0.5, clock=lambda: float(next(ticks)))
        assert len(result.checked) == 1
        runs += [key for key, _, _ in result.changed]
        state = result.state
    assert runs == [f"synthetic/synth{i:04d}_00" for i in range(3)]


def test_known_folders_are_not_detected_again(tmp_path, monkeypatch):
    import pipeline.scene.discovery as discovery

    root = tmp_path / "scans"
    write_scan(root, "synth0000_00")
    write_scan(root / "synthetic", "synth0001_00")
    first = tick(root, DiscoveryState())
    calls = []
    real = discovery._detect
    monkeypatch.setattr(discovery, "_detect", lambda folder: calls.append(folder.name) or real(folder))
    again = tick(root, first.state)
    assert calls == [] and [key for key, _ in again.scans] == [key for key, _ in first.scans]
    write_scan(root, "synth0002_00")
    later = tick(root, again.state)
    assert calls == ["synth0002_00"] and [key for key, _, _ in later.changed] == ["synthetic/synth0002_00"]


def test_first_format_cursor_is_taken_over_without_reruns(tmp_path):
    root = tmp_path / "scans"
    write_scan(root, "synth0000_00")
    write_scan(root, "synth0001_00")
    old_cursor = json.dumps({"synthetic/synth0000_00": "0123456789abcdef"})
    first = tick(root, DiscoveryState.from_cursor(old_cursor))
    assert [key for key, _, _ in first.changed] == ["synthetic/synth0001_00"]  # only the scan the old cursor lacked
    bump(root / "synth0000_00" / "synth0000_00_vh_clean_2.ply")
    assert [key for key, _, _ in tick(root, first.state).changed] == ["synthetic/synth0000_00"]


# --- the output root inside the scans root (issue 27, item 6) -------------------------------------------------------


def test_folder_below_compares_resolved_paths_and_uris(tmp_path, monkeypatch):
    from pipeline.scene.discovery import folder_below

    root = tmp_path / "scans"
    root.mkdir()
    assert folder_below(str(root), str(root / "out")) == "out"
    assert folder_below(str(root), str(root / "a" / ".." / "b" / "out")) == "b/out"
    assert folder_below(str(root), str(root)) is None  # the root itself is not below it
    assert folder_below(str(root), str(tmp_path / "scans-out")) is None  # a sibling sharing the prefix
    assert folder_below(str(root), None) is None
    monkeypatch.chdir(tmp_path)
    assert folder_below("scans", "./scans/out") == "out"
    (tmp_path / "alias").symlink_to(root)
    assert folder_below(str(root), str(tmp_path / "alias" / "out")) == "out"
    assert folder_below("s3://bucket/scans", "s3://bucket/scans/build/out/") == "build/out"
    assert folder_below("s3://bucket/scans", "s3://other/scans/out") is None
    assert folder_below("s3://bucket/scans", str(root / "out")) is None


def test_an_output_root_below_the_scans_root_is_neither_a_scan_nor_skipped(tmp_path):
    from pipeline.scene.discovery import discover

    root = tmp_path / "scans"
    write_scan(root, "synth0000_00")
    for folder in ("out/tables/scans", "group/out2/videos", "group/junk"):
        (root / folder).mkdir(parents=True)
    plain = discover(str(root))
    assert sorted(line.split(":")[0] for line in plain.skipped) == ["group", "out"] and plain.excluded is None
    top = discover(str(root), exclude=str(root / "out"))
    assert [line.split(":")[0] for line in top.skipped] == ["group"] and top.excluded == "out"
    nested = discover(str(root), exclude=str(root / "group" / "out2"))
    # The folder holding the output is not reported for it; what else it holds still is.
    assert sorted(line.split(":")[0] for line in nested.skipped) == ["group/junk", "out"]
    assert nested.excluded == "group/out2"
    assert [key for key, _ in top.scans] == [key for key, _ in plain.scans] == ["synthetic/synth0000_00"]
    beside = discover(str(root), exclude=str(tmp_path / "out"))
    assert beside.skipped == plain.skipped and beside.excluded is None


def test_the_discovery_tick_leaves_the_output_root_out_too(tmp_path):
    root = tmp_path / "scans"
    write_scan(root, "synth0000_00")
    (root / "out" / "tables").mkdir(parents=True)
    assert [line.split(":")[0] for line in tick(root, DiscoveryState()).skipped] == ["out"]
    assert tick(root, DiscoveryState(), exclude=str(root / "out")).skipped == []
