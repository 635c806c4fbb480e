"""A released benchmark on disk: the dataset-wide qa table and its videos.

Eval, baselines and every export read a release the same way, so that
``--release data/out`` and ``--release data/out/releases/latest`` both work:
any folder holding ``tables/qa.parquet`` and ``videos/...`` is a release.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline import schemas, storage
from pipeline.errors import ScanError, TableError
from pipeline.frames.video_paths import budget_video_path


@dataclass
class Release:
    root: Path
    qa: pl.DataFrame

    def video_path(self, row: dict) -> Path:
        """Where a question's video lives: its recorded path, else the budget layout."""
        if row.get("video"):
            recorded = self.root / row["video"]
            if recorded.exists():
                return recorded
        if row.get("video_kind") not in (None, "real"):
            return self.root / "videos" / "dummy" / row["video_kind"] / f"{Path(row.get('video') or '').stem}.mp4"
        return self.root / budget_video_path(row["budget"], row["key"])


DEFAULT_RELEASE = "data/out/releases/latest"


def add_release_argument(parser, help_text: str = "release folder holding tables/qa.parquet and videos/") -> None:
    parser.add_argument("--release", default=DEFAULT_RELEASE, help=f"{help_text} (default: {DEFAULT_RELEASE})")


def load_release(root: str | Path) -> Release:
    root = Path(root)
    table = root / "tables" / "qa.parquet"
    if not table.exists():
        raise ScanError("release", str(table), "no qa table: a release folder holds tables/qa.parquet")
    try:
        qa = storage.read_table(storage.upath(table), "qa")
    except (ValueError, TableError) as exc:
        raise ScanError("release", str(table), f"not a qa table: {str(exc).splitlines()[0]}") from None
    return Release(root=root, qa=qa.sort("id"))


def write_qa(root: str | Path, qa: pl.DataFrame) -> Path:
    """Write a qa table as a release (used by tests and by tools that assemble releases)."""
    path = Path(root) / "tables" / "qa.parquet"
    storage.write_table(storage.upath(path), "qa", schemas.conform("qa", qa))
    return path
