"""ARKitScenes' ``metadata.csv`` sits at the scans root and every scan reads it: it is refused like the label map
(a link out of the root, a FIFO, an oversized file), one line naming it, never a hang or a read outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers.arkitscenes import METADATA_NAME, read_arkitscenes, read_sky_directions
from pipeline.synth.arkitscenes_writer import write_arkitscenes
from pipeline.synth.scene import generate_scene


@pytest.fixture(scope="module")
def scan_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("arkit") / "scans"
    write_arkitscenes(generate_scene(0, 0, frames=3), root)
    return root


def _scene(root: Path) -> Path:
    return next(p for p in root.rglob("*") if p.is_dir() and (p / f"{p.name}_3dod_mesh.ply").exists())


def _with_metadata(tmp_path: Path, scan_root: Path, make) -> tuple[Path, Config]:
    import shutil

    root = tmp_path / "scans"
    shutil.copytree(scan_root, root, symlinks=True)
    metadata = next(root.rglob(METADATA_NAME))
    metadata.unlink()
    make(metadata)
    return _scene(root), Config(scans_root=str(root))


def test_the_synthetic_scan_reads_its_metadata(scan_root):
    folder = _scene(scan_root)
    scan, _ = read_arkitscenes(folder, Config(scans_root=str(scan_root)))
    assert scan.scene_id == folder.name


def test_a_fifo_metadata_is_refused_without_blocking(tmp_path, scan_root):
    folder, config = _with_metadata(tmp_path, scan_root, lambda p: os.mkfifo(p))
    with pytest.raises(ScanError, match="FIFO"):
        read_arkitscenes(folder, config)


def test_a_metadata_linked_out_of_the_root_is_refused_unread(tmp_path, scan_root):
    outside = tmp_path / "secret.csv"
    outside.write_text("video_id,sky_direction\nsecret-first-line,Up\n")
    folder, config = _with_metadata(tmp_path, scan_root, lambda p: p.symlink_to(outside))
    with pytest.raises(ScanError) as caught:
        read_arkitscenes(folder, config)
    assert "secret-first-line" not in str(caught.value)


def test_a_metadata_over_the_bound_is_refused_before_reading(tmp_path, monkeypatch):
    import pipeline.scene.readers.arkitscenes as arkitscenes

    path = tmp_path / METADATA_NAME
    path.write_text("video_id,sky_direction\n" + "1,Up\n" * 100)
    monkeypatch.setattr(arkitscenes, "MAX_METADATA_BYTES", 64)
    with pytest.raises(ScanError, match="refused before reading"):
        read_sky_directions(path, "arkitscenes/1")
