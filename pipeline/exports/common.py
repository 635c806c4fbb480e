"""What every export does the same way: pick rows, place videos, write Parquet atomically.

Exports hard-link videos when the output is on the same filesystem (a released
benchmark is mostly video bytes; a second copy would double the disk use) and
copy otherwise.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.errors import ScanError
from pipeline.frames.budgets import budget_sort_key
from pipeline.scoring.release import Release

PARQUET_NAME = "test-00000-of-00001.parquet"


def config_name(budget: str) -> str:
    return f"{budget}_frame"


def budget_order(budget: str) -> tuple:
    return budget_sort_key(budget)


def select_rows(release: Release, profile: str, real_only: bool = True) -> pl.DataFrame:
    """Rows of one profile (real videos only by default), in a stable order."""
    qa = release.qa.filter(pl.col("profile") == profile)
    if real_only:
        qa = qa.filter(pl.col("video_kind").fill_null("real") == "real")
    if qa.height == 0:
        raise ScanError("release", str(release.root / "tables" / "qa.parquet"), f"no {profile!r} questions to export")
    shared = (
        qa.group_by("scene_id").agg(pl.col("key").unique().sort()).filter(pl.col("key").list.len() > 1).sort("scene_id")
    )
    if shared.height:
        scene_id, keys = shared.row(0)
        raise ScanError(
            "release",
            str(release.root / "tables" / "qa.parquet"),
            f"scene id {scene_id!r} belongs to {len(keys)} scans ({', '.join(keys)}); the export layouts name videos "
            f"by scene id alone, so export them separately (--dataset)",
        )
    return qa.sort(["budget", "scene_id", "question_type", "id"])


def place_video(src: Path, dst: Path, link: bool = True) -> None:
    """Hard-link (or copy) a video into the export; a stale file at dst is replaced."""
    if not src.exists():
        raise FileNotFoundError(f"video missing: {src}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        if dst.exists() and os.path.samefile(src, dst):
            storage.make_shareable(dst)
            return
        dst.unlink()
    linked = False
    if link:
        try:
            os.link(src, dst)
            linked = True
        except OSError:
            pass
    if not linked:
        shutil.copyfile(src, dst)
    storage.make_shareable(dst)  # an export is for others: a video written owner-only (older builds) is opened up


def require_video(release: Release, row: dict) -> Path:
    path = release.video_path(row)
    if not path.exists():
        raise ScanError(row["key"], str(path), f"video of question {row['id']} is missing")
    return path


def write_parquet(table: pa.Table, path: Path) -> None:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    storage.write_bytes_atomic(storage.upath(path), buf.getvalue())


def write_text(path: Path, text: str) -> None:
    storage.write_bytes_atomic(storage.upath(path), text.encode("utf-8"))
