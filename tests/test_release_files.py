"""What a built release is as files: readable by others, self-consistent, nothing left behind.

One real build of two tiny scans (a furnished synthetic room and a box room, ``scan2qa build``) under umask 022, with the
system temporary directory pointed at an empty folder and a staging folder of
a killed build lying in ``releases/``; the tests read what it left.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from scan2qa import main
from pipeline.release.atomic import _locked_staging, remove_abandoned_staging, write_release
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scene import generate_scene
from tests.real_scans import write_scan

KILLED_STAGING = ".staging-r-0123456789ab-deadbeef"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("release-files")
    scans, out = root / "scans", root / "out"
    write_scannet(generate_scene(0, 0, frames=3), scans)  # furnished: its questions include dummy videos
    write_scan(scans, "synth0001_00", objects=4, frames=3)
    killed = out / "releases" / KILLED_STAGING
    (killed / "tables").mkdir(parents=True)
    (killed / "tables" / "qa.parquet").write_bytes(b"half a table")
    system_tmp = root / "system-tmp"
    system_tmp.mkdir()
    saved = os.umask(0o022), tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = str(system_tmp), str(system_tmp)
    try:
        code = main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"])
    finally:
        os.umask(saved[0])
        tempfile.tempdir = saved[1]
        if saved[2] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[2]
    assert code == 0
    releases = out / "releases"
    release = releases / (releases / "LATEST").read_text().strip()
    return SimpleNamespace(root=root, out=out, releases=releases, release=release, system_tmp=system_tmp)


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.rglob("*")]}


def _wrong_modes(folder: Path, file_mode: int, dir_mode: int) -> dict[str, str]:
    return {
        name: oct(mode) for name, mode in _modes(folder).items()
        if mode != (dir_mode if (folder / name).is_dir() else file_mode)
    }


def test_build_leaves_nothing_in_the_system_temp_directory(built):
    assert sorted(p.name for p in built.system_tmp.iterdir()) == []


def test_a_killed_builds_staging_folder_is_removed_by_the_next_build(built):
    assert not (built.releases / KILLED_STAGING).exists()
    assert [p.name for p in built.releases.iterdir() if p.name.startswith(".")] == []


def test_release_files_are_0644_and_folders_0755(built):
    assert any(p.suffix == ".mp4" for p in built.release.rglob("*")), "the release ships no video to check"
    assert _wrong_modes(built.release, 0o644, 0o755) == {}
    videos = built.out / "videos"
    assert _wrong_modes(videos, 0o644, 0o755) == {}  # the hard links' sources are the same inodes


def test_export_files_are_0644_and_folders_0755(built, tmp_path):
    saved = os.umask(0o022)
    try:
        assert main(["export", "--format", "revsi", "--release", str(built.release), "--out", str(tmp_path / "x")]) == 0
    finally:
        os.umask(saved)
    assert any(p.suffix == ".mp4" for p in (tmp_path / "x").rglob("*"))
    assert _wrong_modes(tmp_path / "x", 0o644, 0o755) == {}


def _strings(value, where=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


def test_manifest_names_only_paths_inside_the_release(built):
    manifest = json.loads((built.release / "manifest.json").read_text())
    missing = [name for name in manifest["files"] if not (built.release / name).is_file()]
    assert missing == [], f"manifest files not in the release: {missing}"
    assert manifest["checks"]["data_docs"] == "data_docs/index.html"
    assert (built.release / manifest["checks"]["data_docs"]).is_file()
    # The run configuration names the scans and output roots it ran with; nothing else may name a path.
    outside = [
        (where, text) for where, text in _strings({k: v for k, v in manifest.items() if k != "config"})
        if text.startswith("/") or "/tmp" in text or "scan2qa-docs-" in text
    ]
    assert outside == [], f"manifest entries naming paths outside the release: {outside[:5]}"
    videos = json.loads((built.release / "videos_manifest.json").read_text())
    assert videos and all((built.release / v["path"]).is_file() for v in videos)
    # Each video carries its checksum, so a copied or downloaded release can be verified file by file.
    assert all(v["sha256"] == hashlib.sha256((built.release / v["path"]).read_bytes()).hexdigest() for v in videos)
    assert manifest["videos"] == len(videos)


def test_every_question_names_a_shipped_video(built):
    qa = pl.read_parquet(built.release / "tables" / "qa.parquet")
    named = sorted(set(qa["video"].drop_nulls().to_list()))
    assert named, "no question names a video"
    missing = [v for v in named if not (built.release / v).is_file()]
    assert missing == [], f"{len(missing)} of {len(named)} videos named by qa are not in the release: {missing[:3]}"


def test_every_dummy_video_row_names_a_shipped_video(built):
    """Rows of dummy_videos name mp4s; the release must ship each one (or not list it).

    How dummy videos are stored and released is parse13's change (issue 17 item 4); until it lands this fails
    with the count below, and only because of that part.
    """
    dummy = pl.read_parquet(built.release / "tables" / "dummy_videos.parquet")
    if dummy.height == 0:
        pytest.skip("this build made no dummy videos")
    named = sorted(set(dummy["path"].drop_nulls().to_list()))
    missing = [p for p in named if not (built.release / p).is_file()]
    assert missing == [], (
        f"{len(missing)} of {len(named)} dummy_videos rows name mp4s the release does not ship "
        f"(dummy-video storage: parse13), e.g. {missing[:2]}"
    )


def test_modes_follow_the_umask(tmp_path):
    from pipeline.frames.video import write_video
    from tests.test_release import _qa

    import numpy as np

    saved = os.umask(0o027)
    try:
        out = tmp_path / "out"
        write_video(str(out), "videos/all_frame/synthetic/s.mp4", [np.zeros((32, 32, 3), np.uint8)] * 2, 2.0, (32, 32))
        release = write_release(
            out / "releases", {"qa": _qa(2)}, config={}, checks={},
            videos={"videos/all_frame/synthetic/s.mp4": out / "videos/all_frame/synthetic/s.mp4"},
        )
    finally:
        os.umask(saved)
    assert _wrong_modes(release.path, 0o640, 0o750) == {}


def test_staging_of_a_live_build_is_left_alone(tmp_path):
    releases = tmp_path / "releases"
    releases.mkdir()
    dead = releases / ".staging-r-aaaaaaaaaaaa-00000000"
    dead.mkdir()
    with _locked_staging(releases, "r-bbbbbbbbbbbb") as live:
        (live / "tables").mkdir()
        assert remove_abandoned_staging(releases) == [dead.name]
        assert live.is_dir()
    # Left unrenamed and unlocked (as by a killed build): the next clean-up takes it.
    assert remove_abandoned_staging(releases) == [live.name]


def test_release_ships_the_answer_distribution_record_that_stats_reads(built, capsys):
    """The control's record travels with the release, so ``scan2qa stats`` on a release says what was dropped."""
    from scan2qa import main

    tables = built.release / "tables"
    assert (tables / "qa_distribution_drops.parquet").is_file()
    assert main(["stats", "--qa", str(tables / "qa.parquet"), "--json"]) == 0
    assert capsys.readouterr().out.strip()


def test_the_release_ships_each_scans_per_frame_visibility_and_answers_a_sampler_alone(built, tmp_path):
    """A release copied away from its output root still answers any frame sampler: it carries the per-frame
    visibility of each scan, byte for byte as built, hashed in the manifest and not listed as a video."""
    import shutil

    manifest = json.loads((built.release / "manifest.json").read_text())
    keys = sorted(pl.read_parquet(built.release / "tables" / "scans.parquet")["key"].to_list())
    for key in keys:
        rel = f"tables/visibility/{key}.parquet"
        shipped = (built.release / rel).read_bytes()
        assert shipped == (built.out / rel).read_bytes()
        assert manifest["files"][rel] == hashlib.sha256(shipped).hexdigest()
    videos = json.loads((built.release / "videos_manifest.json").read_text())
    assert all(entry["path"].startswith("videos/") for entry in videos) and manifest["videos"] == len(videos)

    alone = tmp_path / "copied-release"
    shutil.copytree(built.release, alone, symlinks=False)
    assert main(["answers", "--release", str(alone), "--sampler", "uniform:2", "--out", str(tmp_path / "ans"),
                 "--no-videos"]) == 0
    assert pl.read_parquet(tmp_path / "ans" / "tables" / "qa.parquet").height > 0
