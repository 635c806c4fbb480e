"""From the built tables to a gated release: verdicts, expectations, report, atomic write.

A release is only written when every expectation passes; otherwise
``ReleaseBlocked`` names the failing expectations and rows and the previous
release stays exactly as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline import storage
from pipeline.config import Config
from pipeline.release.atomic import RELEASED_TABLES, Release, publish, write_release
from pipeline.release.verdicts import apply_verdicts, read_verdicts
from pipeline.table_scan import read_tables

REPORT_TABLES = ("visibility",)  # read for the report's gallery, not released


class ReleaseBlocked(Exception):
    def __init__(self, summary: str, gate: dict):
        super().__init__(summary)
        self.gate = gate


@dataclass
class ReleaseOutcome:
    release: Release
    report: Path | str
    data_docs: Path | str
    rejected: list[str]
    orphan_verdicts: list[str]


def read_dataset_table(tables_root: str, name: str, storage_options: dict | None = None) -> pl.DataFrame | None:
    """A table as the IO manager lays it out: ``<name>.parquet`` or every ``<name>/<dataset>/<scene>.parquet``."""
    root = storage.upath(tables_root, storage_options)
    single = root / f"{name}.parquet"
    if single.exists():
        return storage.read_table(single, name)
    folder = root / name
    if not folder.exists():
        return None
    paths = sorted(p for p in folder.glob("*/*.parquet") if not p.name.startswith("."))
    return read_tables(paths, name)  # one dataset scan, not one read per scan


def collect_tables(config: Config, names=RELEASED_TABLES + REPORT_TABLES) -> dict[str, pl.DataFrame]:
    tables = {}
    for name in names:
        df = read_dataset_table(config.tables_root, name, config.storage_options)
        if df is not None:
            tables[name] = df
    return tables


def run_release_gate(tables: dict[str, pl.DataFrame], config: Config, docs_dir: str | None = None):
    from expectations.runner import run_gate

    released = {k: v for k, v in tables.items() if k in RELEASED_TABLES}
    return run_gate(
        released,
        docs_dir=docs_dir,
        frequency_ceiling=config.gate.frequency_ceiling,
        letter_tolerance=config.gate.letter_tolerance,
        min_questions_for_distribution=config.gate.min_questions_for_distribution,
    )


def build_release(config: Config, tables: dict[str, pl.DataFrame] | None = None, version: str | None = None) -> ReleaseOutcome:
    from pipeline.release.report import write_report

    tables = dict(tables if tables is not None else collect_tables(config))
    if "qa" not in tables:
        raise ReleaseBlocked("no qa table has been built yet: nothing to release", {"success": False, "results": []})
    verdicts = read_verdicts(config.verdicts_path)
    tables["qa"], rejected, orphans = apply_verdicts(tables["qa"], verdicts)
    out_root = storage.upath(config.output_root, config.storage_options)
    videos = _release_videos(tables, out_root)
    if "dummy_videos" in tables:  # every released row names a video the release ships (before the gate sees it)
        tables["dummy_videos"] = shipped_dummy_videos(tables["dummy_videos"], videos)
    with (
        tempfile.TemporaryDirectory(prefix="scan2qa-docs-") as docs_tmp,
        tempfile.TemporaryDirectory(prefix="scan2qa-gallery-") as gallery_tmp,
    ):
        gate = run_release_gate(tables, config, docs_dir=docs_tmp)
        gate_dict = gate.to_dict()
        if not gate.success:
            raise ReleaseBlocked(gate.summary(), gate_dict)
        released = {k: v for k, v in tables.items() if k in RELEASED_TABLES}
        local = storage.is_local(out_root)
        # The gallery reads frames with OpenCV: videos on an object store are fetched (only those it shows).
        video_file = storage.local_file_getter(out_root, gallery_tmp)

        def add_reports(staging: Path) -> None:
            shutil.copytree(docs_tmp, staging / "data_docs")
            write_report(
                staging / "report" / "index.html",
                tables=tables,
                video_file=video_file,
                title=f"scan2qa release review ({len(released['qa'])} questions)",
                gate=gate_dict,
                orphan_verdicts=orphans,
                rejected=rejected,
                seed=config.seed,
            )

        checks = gate_dict | {"rejected_by_reviewers": rejected, "orphan_verdicts": orphans}
        if local:
            release = write_release(
                Path(out_root.path) / "releases", released, config=config.to_dict(), checks=checks,
                videos={rel: Path(src.path) for rel, src in videos.items()}, version=version, extra_files=add_reports,
            )
            return ReleaseOutcome(
                release=release,
                report=release.path / "report" / "index.html",
                data_docs=release.path / "data_docs" / "index.html",
                rejected=rejected,
                orphan_verdicts=orphans,
            )
        with tempfile.TemporaryDirectory(prefix="scan2qa-release-") as staging_root:
            staged = write_release(
                Path(staging_root), released, config=config.to_dict(), checks=checks, videos=videos,
                version=version, extra_files=add_reports,
            )
            remote = publish(staged, storage.upath(config.releases_root, config.storage_options), videos)
    return ReleaseOutcome(
        release=Release(version=staged.version, path=remote, manifest=staged.manifest),
        report=f"{remote}/report/index.html",
        data_docs=f"{remote}/data_docs/index.html",
        rejected=rejected,
        orphan_verdicts=orphans,
    )


def shipped_dummy_videos(dummy_videos: pl.DataFrame, videos: dict[str, object]) -> pl.DataFrame:
    """The dummy-video rows whose mp4 the release ships: those a released question plays.

    Per scan, dummy videos are made for every object set a dummy question could ask about; the dataset-wide
    caps keep only some of those questions, and the release ships only the videos its questions play.
    """
    return dummy_videos.filter(pl.col("path").is_in(sorted(videos)))


def _release_videos(tables: dict[str, pl.DataFrame], out_root) -> dict[str, object]:
    """Every video a released question points at, by its path relative to the output root."""
    videos = {}
    for rel in sorted(set(tables["qa"]["video"].drop_nulls().to_list())):
        src = out_root / rel
        if src.exists():
            videos[rel] = src
    return videos
