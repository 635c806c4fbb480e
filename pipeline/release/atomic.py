"""Atomic releases: a version directory appears whole or not at all, and ``latest`` moves last.

A release is written into a hidden staging directory, renamed to
``releases/<version>`` in one step, and only then is the ``latest`` pointer
replaced (a symlink swapped with ``os.replace`` plus a ``LATEST`` text file
for readers that cannot follow links). A failure anywhere before the rename
leaves no directory under the version's name and ``latest`` where it was.

Object stores have no rename: there the release is staged on local disk,
uploaded with ``manifest.json`` as its last object, and only then is the
``LATEST`` object rewritten, so a reader that follows ``LATEST`` (or checks
for the manifest) never sees a partial release.

A build killed while staging leaves its ``.staging-*`` folder behind; the
next build removes it. A writer holds an exclusive ``flock`` on its staging
folder from before the folder gets its ``.staging-`` name until the rename,
so a folder whose lock can be taken has no live writer (the kernel drops the
lock of a killed process) and a concurrent build's folder is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline import storage

try:
    import fcntl
except ImportError:  # not on POSIX: abandoned staging folders are recognised by age alone
    fcntl = None

STAGING_PREFIX = ".staging-"
NEW_PREFIX = ".new-"  # a staging folder before it is locked and named
POINTER_PREFIXES = (".latest-", ".LATEST-")  # the pointers' temporary names, replaced at once
ABANDONED_AFTER_S = 600  # unlockable leftovers (pointers, unnamed folders) older than this are a killed build's

RELEASED_TABLES = (
    "scans",
    "objects",
    "rooms",
    "frame_samples",
    "object_visibility",
    "dummy_videos",
    "qa",
    "qa_distribution_drops",  # what the answer-distribution control left out, and why (scan2qa stats reads it)
    "pinpoint_targets",
    "pinpoint_neighbors",
)


@dataclass
class Release:
    version: str
    path: Path | str  # a local directory, or the URI of a published remote release
    manifest: dict


def content_version(tables: dict[str, pl.DataFrame]) -> str:
    """A version named by content: the same tables give the same version."""
    return _version_of({name: storage.parquet_bytes(name, df) for name, df in tables.items()})


@dataclass(frozen=True)
class SerializedTable:
    """A released table already written to Parquet bytes (the qa table, streamed by row group), with its rows."""

    data: bytes
    height: int


def _version_of(table_bytes: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(table_bytes):
        digest.update(name.encode())
        digest.update(table_bytes[name])
    return "r-" + digest.hexdigest()[:12]


def code_revision(repo: Path | None = None) -> str:
    repo = repo or Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import version

        return f"scan2qa {version('scan2qa')}"


def config_digest(config: dict) -> str:
    """sha256 of the config as the manifest records it (canonical JSON), to name the config in one short string."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256(path) -> str:
    """Of a local file, or of an object-store path (anything with ``open``), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with (open(path, "rb") if isinstance(path, (str, Path)) else path.open("rb")) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def latest_release(releases_dir: Path) -> str | None:
    pointer = releases_dir / "LATEST"
    return pointer.read_text().strip() if pointer.exists() else None


def write_release(
    releases_dir: Path,
    tables: dict[str, pl.DataFrame],
    *,
    config: dict,
    checks: dict,
    videos: dict[str, object] | None = None,
    version: str | None = None,
    extra_files: Callable[[Path, str], None] | None = None,
    letter_key_id: str | None = None,
) -> Release:
    """Write ``releases_dir/<version>`` atomically and then point ``latest`` at it.

    ``videos`` maps release-relative paths to source files shipped as they are: the videos and the per-scan
    visibility tables (hard-linked when possible; remote ones are only listed, ``publish`` copies them);
    ``videos_manifest.json`` lists those under ``videos/``, the manifest's ``files`` the others;
    ``extra_files(staging_dir, version)`` may add reports before the rename. ``letter_key_id`` (the letter
    key's fingerprint, never the key) tells a key holder which key placed the letters.
    """
    releases_dir = Path(releases_dir)
    releases_dir.mkdir(parents=True, exist_ok=True)
    remove_abandoned_staging(releases_dir)
    # Serialised once: the same bytes name the version and are written (a million-row qa takes seconds).
    table_bytes = {
        name: tables[name].data if isinstance(tables[name], SerializedTable) else storage.parquet_bytes(name, tables[name])
        for name in sorted(tables)
    }
    version = version or _version_of(table_bytes)
    final = releases_dir / version
    with _locked_staging(releases_dir, version) as staging:
        _stage_and_rename(staging, final, version, tables, table_bytes, config, checks, videos, extra_files, letter_key_id)
    _point_latest(releases_dir, version)
    manifest = json.loads((final / "manifest.json").read_text())
    return Release(version=version, path=final, manifest=manifest)


@contextmanager
def _locked_staging(releases_dir: Path, version: str) -> Iterator[Path]:
    """A fresh staging folder, exclusively locked before it is named ``.staging-*``; removed on any failure."""
    token = uuid.uuid4().hex[:8]
    unnamed = releases_dir / f"{NEW_PREFIX}{token}"
    unnamed.mkdir()
    fd = os.open(unnamed, os.O_RDONLY)
    staging = releases_dir / f"{STAGING_PREFIX}{version}-{token}"
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(unnamed, staging)
        yield staging
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(unnamed, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno is not None and exc.filename is None:
            # A full disk's write() names no file: name the release that could not be written.
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(releases_dir / version)) from None
        raise
    finally:
        os.close(fd)  # drops the lock; after a successful rename the folder is the release itself


def remove_abandoned_staging(releases_dir: Path) -> list[str]:
    """Remove what killed builds left in ``releases_dir``: unlocked staging folders, stale temporary names.

    Returns the names removed. A staging folder whose lock is held belongs to
    a build still running and is left alone.
    """
    releases_dir = Path(releases_dir)
    removed = []
    try:
        entries = sorted(releases_dir.iterdir())
    except FileNotFoundError:
        return removed
    now = time.time()
    for entry in entries:
        name = entry.name
        try:
            age = now - entry.lstat().st_mtime
        except FileNotFoundError:
            continue
        if name.startswith(STAGING_PREFIX) and entry.is_dir() and not entry.is_symlink():
            if _remove_if_unlocked(entry, age):
                removed.append(name)
        elif (name.startswith(NEW_PREFIX) or name.startswith(POINTER_PREFIXES)) and age > ABANDONED_AFTER_S:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(name)
    return removed


def _remove_if_unlocked(folder: Path, age: float) -> bool:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        if fcntl is None:
            if age <= ABANDONED_AFTER_S:
                return False
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a live build is staging here
        shutil.rmtree(folder, ignore_errors=True)
        return not folder.exists()
    finally:
        os.close(fd)


def _stage_and_rename(
    staging, final, version, tables, table_bytes, config, checks, videos, extra_files, letter_key_id=None
) -> None:
    """Write tables, videos, reports and the manifest into ``staging``, then rename it to ``final``."""
    (staging / "tables").mkdir(parents=True)
    for name, data in table_bytes.items():
        storage.write_bytes_atomic(storage.upath(staging / "tables" / f"{name}.parquet"), data)
    video_entries = []
    remote_files = {}
    for rel, src in sorted((videos or {}).items()):
        if not isinstance(src, Path):  # on an object store: copied store-side by ``publish``
            if rel.startswith("videos/"):
                video_entries.append({"path": rel, "bytes": src.stat().st_size, "sha256": _sha256(src)})
            else:
                remote_files[rel] = _sha256(src)
            continue
        dst = staging / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        storage.make_shareable(dst)  # the link shares the source's inode: a 0600 video of an older build
        if rel.startswith("videos/"):
            video_entries.append({"path": rel, "bytes": dst.stat().st_size, "sha256": _sha256(dst)})
    (staging / "videos_manifest.json").write_text(json.dumps(video_entries, indent=1))
    if extra_files:
        extra_files(staging, version)
    files = {
        str(p.relative_to(staging)): _sha256(p)
        for p in sorted(staging.rglob("*"))
        if p.is_file() and not str(p.relative_to(staging)).startswith("videos/")
    } | remote_files
    files = dict(sorted(files.items()))
    manifest = {
        "version": version,
        "code_revision": code_revision(),
        "config": config,
        "config_digest": config_digest(config),
        "row_counts": {name: tables[name].height for name in sorted(tables)},
        "files": files,
        "videos": len(video_entries),
        "checks": checks,
    }
    if letter_key_id:
        manifest["letter_key_id"] = letter_key_id
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
    if final.exists():
        # Same content, same version: the earlier release stays as it is.
        shutil.rmtree(staging)
    else:
        os.rename(staging, final)


def publish(local_release: Release, releases_uri, videos: dict[str, object] | None = None) -> Release:
    """Upload a locally staged release to an object store; ``LATEST`` is written last.

    ``videos`` maps release-relative paths to remote source paths, copied
    store-side. A version whose manifest is already there is complete (the
    manifest is uploaded last) and holds the same tables: its objects stay as
    they are, only ``LATEST`` moves to it. Rewriting them would change the
    manifest under readers (its reports differ from build to build) and fail
    their reads (S3 GETs are pinned to the ETag they started with). Returns the
    remote release, with the manifest it actually holds.
    """
    target = releases_uri / local_release.version
    manifest_path = target / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
    else:
        files = sorted(p for p in local_release.path.rglob("*") if p.is_file() and p.name != "manifest.json")
        for path in files:
            (target / str(path.relative_to(local_release.path))).write_bytes(path.read_bytes())
        for rel, src in sorted((videos or {}).items()):
            src.fs.copy(src.path, (target / rel).path)
        manifest_path.write_bytes((local_release.path / "manifest.json").read_bytes())
        manifest = local_release.manifest
    (releases_uri / "LATEST").write_text(local_release.version + "\n")
    return Release(version=local_release.version, path=str(target), manifest=manifest)


def _point_latest(releases_dir: Path, version: str) -> None:
    tmp_link = releases_dir / f".latest-{uuid.uuid4().hex[:8]}"
    os.symlink(version, tmp_link)
    os.replace(tmp_link, releases_dir / "latest")
    tmp_file = releases_dir / f".LATEST-{uuid.uuid4().hex[:8]}"
    tmp_file.write_text(version + "\n")
    os.replace(tmp_file, releases_dir / "LATEST")
