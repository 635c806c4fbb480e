"""Find scan folders under a scans root, local or ``s3://``, and fingerprint them.

A scans root holds scan folders either directly (``<root>/scene0000_00``) or one
level down by dataset (``<root>/scannet/scene0000_00``), or is one scan folder. Which dataset a folder
belongs to is the readers' decision (``pipeline.readers.detect_dataset``), so a
new reader makes its scans discoverable without touching this module. Each scan
is keyed ``"<dataset>/<scene_id>"`` (the folder name is the scene id), which is
also its Dagster partition key.

The fingerprint of a scan summarises its file listing (names, sizes,
modification times or ETags), not its bytes: it is cheap on object storage and
changes whenever a file is added, removed or rewritten, which is what the
discovery sensor needs to re-request only new or changed scans.
"""

from __future__ import annotations

import hashlib
from typing import Any

from upath import UPath

from pipeline.storage import upath

# How deep below the root scan folders may sit: root/<scan> or root/<group>/<scan>.
MAX_DEPTH = 2


def _detect(folder: UPath) -> str | None:
    from pipeline.readers import detect_dataset

    return detect_dataset(folder)


def _subfolders(folder: UPath) -> list[UPath]:
    try:
        children = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    folders = [c for c in children if not c.name.startswith(".") and c.is_dir()]
    return sorted(folders, key=lambda p: p.name)


def _walk(folder: UPath, depth: int, found: dict[str, str]) -> None:
    for child in _subfolders(folder):
        dataset = _detect(child)
        if dataset:
            # First folder in sorted order wins a duplicated key, so the choice is stable.
            found.setdefault(f"{dataset}/{child.name}", str(child))
        elif depth < MAX_DEPTH:
            _walk(child, depth + 1, found)


def discover_scans(root: str, storage_options: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """``(key, uri)`` of every scan folder under ``root``, sorted by key; empty when the root is absent.

    A root that is itself a scan folder yields just that scan.
    """
    base = upath(root, storage_options)
    if base.is_dir():
        dataset = _detect(base)
        if dataset:
            return [(f"{dataset}/{base.name}", str(base))]
    found: dict[str, str] = {}
    _walk(base, 1, found)
    return sorted(found.items())


def locate_scan(root: str, key: str, storage_options: dict[str, Any] | None = None) -> str:
    """URI of the scan folder for ``key``; tries the two layouts before a full discovery."""
    dataset, _, scene_id = key.partition("/")
    base = upath(root, storage_options)
    for candidate in (base / scene_id, base / dataset / scene_id):
        if candidate.is_dir() and _detect(candidate) == dataset:
            return str(candidate)
    for found_key, uri in discover_scans(root, storage_options):
        if found_key == key:
            return uri
    raise FileNotFoundError(f"{key}: no scan folder for this key under {root}")


def scan_fingerprint(uri: str, storage_options: dict[str, Any] | None = None) -> str:
    """Short hash of the scan folder's recursive file listing (names, sizes, mtimes/ETags)."""
    folder = upath(uri, storage_options)
    fs = folder.fs
    base = folder.path.rstrip("/")
    listing = fs.find(base, detail=True)
    digest = hashlib.sha256()
    for name in sorted(listing):
        info = listing[name]
        stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created") or ""
        relative = name[len(base) :].lstrip("/") if name.startswith(base) else name
        digest.update(f"{relative}\x1f{info.get('size')}\x1f{stamp}\n".encode())
    return digest.hexdigest()[:16]
