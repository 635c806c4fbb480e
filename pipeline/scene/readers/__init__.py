"""Dataset readers behind one entry point: ``read_scan(path_or_uri, config) -> ParsedScan``.

Each dataset registers a detector (does this folder look like one of my
scenes?) and a reader working on a local folder. Scenes on object storage are
first copied to a local temporary folder (with the label map of their scans
root), which lives as long as the returned ``ParsedScan`` because images are
loaded lazily from it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers import multiscan, rscan, scannet
from pipeline.scene.readers import arkitscenes, scannetpp
from pipeline.scene.readers.file_checks import check_scan_folder, scans_root_of, too_large
from pipeline.scene.readers.labels import MAX_LABEL_MAP_BYTES
from pipeline.frames.frame_checks import check_frames, frame_file_namer
from pipeline.scene.parsed import ParsedScan
from pipeline.storage import is_local, upath


@dataclass(frozen=True)
class DatasetReader:
    name: str
    detect: Callable[[object], str | None]  # folder (Path or UPath) -> dataset name or None
    read: Callable[..., tuple[ParsedScan, list[Path]]]  # (local folder, config, source_uri=) -> (scan, input files)


def _detect_scannet(folder) -> str | None:
    return scannet.dataset_of(folder) if scannet.is_scannet_scene(folder) else None


def _detect_scannetpp(folder) -> str | None:
    return scannetpp.DATASET if scannetpp.is_scannetpp_scene(folder) else None


def _detect_arkitscenes(folder) -> str | None:
    return arkitscenes.DATASET if arkitscenes.is_arkitscenes_scene(folder) else None


def _detect_rscan(folder) -> str | None:
    return rscan.DATASET if rscan.is_rscan_scan(folder) else None


def _detect_multiscan(folder) -> str | None:
    return multiscan.DATASET if multiscan.is_multiscan_scan(folder) else None


READERS: tuple[DatasetReader, ...] = (
    DatasetReader("scannet", _detect_scannet, scannet.read_scannet),
    DatasetReader("scannetpp", _detect_scannetpp, scannetpp.read_scannetpp),
    DatasetReader("arkitscenes", _detect_arkitscenes, arkitscenes.read_arkitscenes),
    DatasetReader("3rscan", _detect_rscan, rscan.read_rscan),
    DatasetReader("multiscan", _detect_multiscan, multiscan.read_multiscan),
)


def _reader_for(folder) -> tuple[DatasetReader, str] | None:
    for reader in READERS:
        dataset = reader.detect(folder)
        if dataset:
            return reader, dataset
    return None


def detect_dataset(path, storage_options: dict | None = None) -> str | None:
    """Dataset name of a scene folder (``"scannet"``, ``"synthetic"``, ...) or None when no reader knows it."""
    folder = upath(path, storage_options)
    try:
        found = _reader_for(folder)
    except OSError:
        return None
    return found[1] if found else None


def checksum(files: list[Path], root: Path) -> str:
    """sha256 over (relative name, size, bytes) of every input file, in sorted name order."""
    digest = hashlib.sha256()
    named = []
    for f in set(files):
        f = Path(f)
        try:
            name = f.relative_to(root).as_posix()
        except ValueError:
            name = f.name  # files outside the scene folder (the label map) by name only
        named.append((name, f))
    for name, f in sorted(named):
        digest.update(name.encode() + b"\0" + str(f.stat().st_size).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _get_label_map(fs, remote_path: str, local_path: str, key: str, name: str) -> None:
    """Copy a remote label map, refusing one over the bound before any of it is downloaded."""
    size = fs.size(remote_path)
    if size is not None and size > MAX_LABEL_MAP_BYTES:
        raise ScanError(key, name, too_large(size, MAX_LABEL_MAP_BYTES))
    fs.get(remote_path, local_path)


def _copy_to_local(remote, config: Config, key: str) -> tuple[Path, Config]:
    """Copy a remote scene folder (and the label maps next to it) into a fresh temporary folder.

    Returns the local folder and the config to read it with (a remote
    ``label_map`` replaced by its local copy). The local copies are then read
    with the same checks as a local scans root's (``scannet.load_label_map``).
    """
    tmp = Path(tempfile.mkdtemp(prefix="scan2qa_scan_"))
    local = tmp / remote.name
    fs = remote.fs
    try:
        fs.get(remote.path.rstrip("/") + "/", str(local) + "/", recursive=True)
        local.mkdir(exist_ok=True)
        # Scans-root files readers look for, copied next to the local scene where the readers look first.
        for candidate in [c for c in scannet.label_map_candidates(remote) if c.exists()][:1]:
            _get_label_map(fs, candidate.path, str(tmp / candidate.name), key, candidate.name)
        for candidate in [c for c in [remote.parent / arkitscenes.METADATA_NAME] if c.exists()]:
            fs.get(candidate.path, str(tmp / candidate.name))
        if config.label_map and "://" in str(config.label_map):
            label_map = upath(config.label_map, config.storage_options)
            local_map = tmp / "label_map" / label_map.name
            local_map.parent.mkdir()
            _get_label_map(label_map.fs, label_map.path, str(local_map), key, str(config.label_map))
            config = dataclasses.replace(config, label_map=str(local_map))
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return local, config


def read_scan(path_or_uri, config: Config) -> ParsedScan:
    """Parse one scene folder (local path or ``s3://`` URI) into the SPEC §1 world frame."""
    folder = upath(path_or_uri, config.storage_options)
    source_uri = str(path_or_uri) if "://" in str(path_or_uri) else str(folder.path)
    if not folder.exists():
        raise ScanError(f"?/{folder.name}", source_uri, "scene folder not found")
    found = _reader_for(folder)
    if found is None:
        problem = "no reader recognises this folder (e.g. no <scene>_vh_clean_2.ply)"
        raise ScanError(f"?/{folder.name}", source_uri, problem)
    reader, dataset = found
    if is_local(folder):
        local, tmp = Path(folder.path), None
        check_scan_folder(local, f"{dataset}/{folder.name}", scans_root_of(local, config), config.allow_links_outside_root)
    else:
        local, config = _copy_to_local(folder, config, f"{dataset}/{folder.name}")
        tmp = local.parent
    try:
        parsed, files = reader.read(local, config, source_uri=source_uri)
        check_frames(parsed, frame_file_namer(reader.name, local))
        parsed.checksum = checksum(files, local)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if tmp is not None:
        weakref.finalize(parsed, shutil.rmtree, str(tmp), True)
    return parsed

