"""What a ``scan2qa synth`` keeps that is not a scan: beside the scans root, never inside it.

Discovery, the Dagster sensor and a user listing the root must only ever see
complete scans, so a run writes into ``<parent>/.<root name>.synth/``:

- ``lock``: flock'ed by the run writing (the kernel drops it when that run dies);
- ``unfinished.json``: what the run was asked for and each scene as it lands,
  replaced whole on every change; kept when the run is stopped (SIGINT, SIGTERM)
  or killed, so the next run (or ``scan2qa build``'s demo) finishes it;
- ``staging/``: one folder per scene being written; a scene reaches the root in
  one rename of its finished folder.

A finished run removes the whole folder; a stopped one removes its staging and
keeps the record; a killed one (SIGKILL) leaves staging, removed by the next
run, which holds the lock. Runs of older versions kept the record, the lock and
the staging inside the root (``.synth-unfinished.json``, ``.synth-*``): the
next run takes them over the same way and removes them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from pipeline.errors import ConfigError

RECORD_NAME = "unfinished.json"
LOCK_NAME = "lock"
STAGING_NAME = "staging"
LEGACY_RECORD = ".synth-unfinished.json"  # inside the scans root, before this module
LEGACY_LOCK = ".synth-unfinished.lock"
LEGACY_STAGING = re.compile(r"^\.synth-\d{4}-")


def work_folder(out: str | os.PathLike) -> Path:
    """``<parent>/.<name>.synth`` of the scans root ``out``."""
    root = Path(out).absolute()
    return root.parent / f".{root.name}.synth"


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


class Workspace:
    """The run's lock, record and staging for the scans root ``out`` (held from construction to ``close``)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.folder = work_folder(out)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.record_path, self.staging = self.folder / RECORD_NAME, self.folder / STAGING_NAME
        self.fh = self._lock(self.folder / LOCK_NAME)
        self.legacy_fh = None
        try:
            self.previous = self._read(self.record_path)
            if (self.out / LEGACY_LOCK).exists() or (self.out / LEGACY_RECORD).exists():
                self.legacy_fh = self._lock(self.out / LEGACY_LOCK)  # an older run may still be writing there
                self.previous = self.previous or self._read(self.out / LEGACY_RECORD)
        except BaseException:
            self.fh.close()
            raise
        self.content: dict = {}

    def _lock(self, path: Path):
        fh = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise ConfigError(f"{self.out}: another scan2qa synth is writing here ({path} is locked)") from None
        return fh

    @staticmethod
    def _read(path: Path) -> dict | None:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def remove_stale(self) -> tuple[int, int]:
        """Remove what dead runs left (staging here, and an older version's inside the root); (folders, bytes)."""
        count = size = 0
        stale = sorted(self.staging.iterdir()) if self.staging.is_dir() else []
        if self.out.is_dir():
            stale += [e for e in sorted(self.out.iterdir()) if LEGACY_STAGING.match(e.name) and e.is_dir()]
        for entry in stale:
            if entry.is_dir() and not entry.is_symlink():
                size += _folder_size(entry)
                shutil.rmtree(entry, ignore_errors=True)
                count += 1
        if self.legacy_fh is not None:  # the older run's record was read (and is carried on here): drop its files
            (self.out / LEGACY_RECORD).unlink(missing_ok=True)
            (self.out / LEGACY_LOCK).unlink(missing_ok=True)
            self.legacy_fh.close()
            self.legacy_fh = None
        return count, size

    def already_written(self, request: dict) -> dict[int, str]:
        """Scene index -> folder, for the scenes an interrupted run of the same request put in place."""
        previous = self.previous or {}
        if previous.get("request") != request:
            return {}
        written = previous.get("written") if isinstance(previous.get("written"), dict) else {}
        return {int(i): f for i, f in written.items() if str(i).isdigit() and (self.out / str(f)).is_dir()}

    def new_staging(self, index: int) -> Path:
        self.staging.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{index:04d}-", dir=self.staging))

    def start(self, request: dict, scenes: int, start: int, written: dict[int, str]) -> None:
        self.content = {"request": request, "scenes": scenes, "start": start,
                        "written": {str(i): f for i, f in sorted(written.items())}}
        self._save()

    def landed(self, index: int, folder: str) -> None:
        self.content["written"][str(index)] = folder
        self._save()

    def _save(self) -> None:
        tmp = self.record_path.with_name(self.record_path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.content, sort_keys=True))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.record_path)

    def close(self, finished: bool) -> None:
        """Finished: remove the folder (still locked: no other run can be using it). Else keep the record (and
        the lock file) for the next run."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if finished or not self.record_path.exists():  # nothing to resume: nothing is kept
            self.record_path.unlink(missing_ok=True)
            (self.folder / LOCK_NAME).unlink(missing_ok=True)
            try:
                self.folder.rmdir()
            except OSError:
                pass  # something else was put there: leave it
        if self.legacy_fh is not None:
            self.legacy_fh.close()
        self.fh.close()


def unfinished_record(out: str | os.PathLike) -> dict | None:
    """The record an interrupted run left for the scans root ``out`` (or an older version's, inside it), or None."""
    for path in (work_folder(out) / RECORD_NAME, Path(out) / LEGACY_RECORD):
        record = Workspace._read(path)
        if record is not None:
            return record
    return None
