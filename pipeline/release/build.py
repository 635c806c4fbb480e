"""From the built tables to a gated release: verdicts, expectations, report, atomic write.

A release is only written when every expectation passes; otherwise
``ReleaseBlocked`` names the failing expectations and rows and the previous
release stays exactly as it was. The Data Docs and the report are rendered
straight into the release's staging folder, so a build leaves nothing in the
system temporary directory, and ``manifest.json`` names only paths inside
the release.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline import schemas, storage
from pipeline.config import Config
from pipeline.frames.budgets import all_frame_fps, frame_budgets
from pipeline.qa.letter_key import build_key
from pipeline.release.atomic import (
    RELEASED_TABLES, Release, SerializedTable, code_revision, config_digest, publish, remove_abandoned_staging,
    write_release,
)
from pipeline.release.churn import changed_scans, churn, churn_record, previous_drops, previous_release_qa, released_table
from pipeline.release.membership import built_keys, excluded_scans, state_counts
from pipeline.release.verdicts import (
    apply_verdicts, outcome_checks, read_verdicts, rejection_filter, release_verdict_outcomes,
)
from pipeline.scene.scan_notes import read_skipped
from pipeline.storage import frames_bytes
from pipeline.table_scan import TableParts, existing, read_tables

REPORT_TABLES = ("visibility",)  # read for the report's gallery; shipped as the per-scan files, not one table
VISIBILITY_FOLDER = "tables/visibility"  # in the release as in the output root: <dataset>/<scene>.parquet
DATA_DOCS_INDEX = "data_docs/index.html"  # inside the release
REPORT_INDEX = "report/index.html"


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
    verdicts: list[dict] | None = None  # every verdict, applied or why not (verdicts.verdict_outcomes)


NARROW_QA_COLUMNS = [  # every qa column but the wide texts only the gate, the written table and the gallery read
    name for name in schemas.schema("qa").names if name not in ("template", "instruction", "geometry")
]


def qa_file(config: Config) -> TableParts | None:
    """The dataset-wide qa table as its file, unread (None when it is not one file, e.g. not built yet)."""
    path = storage.upath(config.tables_root, config.storage_options) / "qa.parquet"
    return TableParts("qa", (path,)) if path.exists() else None


def narrow_qa(path) -> pl.DataFrame:
    """``NARROW_QA_COLUMNS`` of the qa file, read by polars' own reader (the Arrow read of one whole-file batch
    held about three times the frame: 1.9 GB for 0.5 GB of columns at 2,000 scans), ``question`` categorical."""
    import io

    with storage.reaching(path), path.open("rb") as fh:
        data = fh.read()  # bytes, never the file object: see storage.read_table
    try:
        df = pl.read_parquet(io.BytesIO(data), columns=NARROW_QA_COLUMNS)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise storage.TableError(f"{path}: not a readable Parquet table ({str(exc).splitlines()[0]})") from None
    del data
    expected = schemas.empty("qa").select(NARROW_QA_COLUMNS).schema
    df = df if df.schema == expected else schemas.conform("qa", _with_wide_nulls(df)).select(NARROW_QA_COLUMNS)
    # A few thousand question texts repeat over millions of rows (a third of the narrow table as strings);
    # the release only groups and prints them.
    return df.with_columns(pl.col("question").cast(pl.Categorical))


def _with_wide_nulls(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in ("template", "instruction", "geometry"))


def _rows_of(qa: TableParts, ids: list[str]) -> pl.DataFrame:
    """The full rows of the questions ``ids``, one row group at a time (a few rows kept of each)."""
    wanted = pl.Series(sorted(set(ids)), dtype=pl.String).implode()
    found = [pl.from_arrow(piece.filter(pl.col("id").is_in(wanted)).to_arrow()) for piece in qa.slices()]
    return pl.concat(found) if found else schemas.empty("qa")


def read_dataset_table(
    tables_root: str, name: str, storage_options: dict | None = None, keys: list[str] | None = None
) -> pl.DataFrame | None:
    """A table as the IO manager lays it out: ``<name>.parquet``, or the per-scan files ``<name>/<key>.parquet``
    of the scans ``keys`` (every file there when ``keys`` is None)."""
    root = storage.upath(tables_root, storage_options)
    single = root / f"{name}.parquet"
    if single.exists():
        return storage.read_table(single, name)
    folder = root / name
    if keys is not None:
        return read_tables(existing([folder / f"{key}.parquet" for key in sorted(keys)]), name)
    if not folder.exists():
        return None
    paths = sorted(p for p in folder.glob("*/*.parquet") if not p.name.startswith("."))
    return read_tables(paths, name)  # one dataset scan, not one read per scan


def collect_tables(
    config: Config, names=RELEASED_TABLES + REPORT_TABLES, keys: list[str] | None = None
) -> dict[str, pl.DataFrame]:
    tables = {}
    for name in names:
        df = read_dataset_table(config.tables_root, name, config.storage_options, keys)
        if df is not None:
            tables[name] = df
    return tables


@dataclass(frozen=True)
class GateOutcome:
    """What the release needs of its gate: the verdict, the checks for the manifest and report (each rule with its
    meaning), and the Data Docs pages written into the staging folder."""

    success: bool
    summary: str
    checks: dict
    write_docs: Callable[[Path], None]


# The gate is passed in (``expectations.release_gate.release_gate``): expectations sits above pipeline.
ReleaseGate = Callable[[dict[str, pl.DataFrame], Config], GateOutcome]


def build_release(
    config: Config,
    tables: dict[str, pl.DataFrame] | None = None,
    version: str | None = None,
    membership: pl.DataFrame | None = None,
    *,
    gate: ReleaseGate,
) -> ReleaseOutcome:
    """The release of the scans ``membership`` (a ``scan_membership`` table) says were built, or of ``tables``.

    With a membership, per-scan tables are read for exactly its built scans (a failed or unregistered scan's
    files are never read) and every other registered scan is listed, with its state and error, in the
    manifest's ``checks.excluded_scans`` and the report.
    """
    from pipeline.release.report import write_report

    out_root = storage.upath(config.output_root, config.storage_options)
    local = storage.is_local(out_root)
    if local:  # a build killed while staging left its folder: the next build removes it, whatever it decides
        remove_abandoned_staging(Path(out_root.path) / "releases")
    keys = built_keys(membership) if membership is not None else None
    if membership is not None and not keys:  # a release of no scan would replace a good one with nothing
        states = ", ".join(f"{n} {state}" for state, n in state_counts(membership).items()) or "none registered"
        raise ReleaseBlocked(f"no scan may be released ({states}): nothing published, latest unchanged",
                             {"success": False, "results": []})
    # The qa table is gigabytes at 10,000 scans: unless samplers need it whole, only its narrow columns are held
    # (``narrow_qa``) and its full rows are streamed a row group at a time to the gate, the release and the report.
    streamed = qa_file(config) if tables is None and not config.samplers else None
    if tables is None:
        # The gallery reads visibility for the few scans it shows (``visibility_of``); only the samplers'
        # section needs every scan's.
        report_tables = REPORT_TABLES if config.samplers else ()
        names = [n for n in RELEASED_TABLES + report_tables if streamed is None or n != "qa"]
        tables = collect_tables(config, names=names, keys=keys)
        if streamed is not None:
            tables["qa"] = narrow_qa(streamed.paths[0])
            tables = {n: tables[n] for n in RELEASED_TABLES + REPORT_TABLES if n in tables}  # the order read whole
    tables = dict(tables)
    if "qa" not in tables:
        raise ReleaseBlocked("no qa table has been built yet: nothing to release", {"success": False, "results": []})
    verdicts = read_verdicts(config.verdicts_path, config.storage_options)
    skipped = read_skipped(config.output_root, config.storage_options)
    excluded = excluded_scans(membership if membership is not None else schemas.empty("scan_membership"), skipped)
    excluded_keys = {entry["key"] for entry in excluded["failed_scans"]}
    previous = previous_release_qa(config.releases_root, config.storage_options)  # LATEST before this release
    outcomes = release_verdict_outcomes(tables, verdicts, excluded_keys, previous[1] if previous else None)
    full_qa = streamed.where(rejection_filter(tables["qa"], verdicts)) if streamed is not None else None
    tables["qa"], rejected, orphans = apply_verdicts(tables["qa"], verdicts)
    # Counted now, from the qa rows this release ships (the gate does not change them): the previous release's
    # ids (millions at 10,000 scans) need not stay through the gate and the report.
    churn_rows = churn(
        previous[1], tables["qa"], drops=tables.get("qa_distribution_drops"), rejected=rejected,
        previous_drops=previous_drops(config.releases_root, previous[0], config.storage_options),
        changed_keys=changed_scans(
            released_table(config.releases_root, previous[0], "scans", ["key", "checksum"], config.storage_options),
            tables.get("scans"),
        ),
    ) if previous else None
    previous_version = previous[0] if previous else None
    del previous
    storage.release_freed_memory()  # the previous release's file was read whole, as bytes
    if full_qa is not None:  # the gate's reads of narrow columns take the rows held here, not a second read
        full_qa = full_qa.holding(tables["qa"])
    videos = _release_videos(tables, out_root)  # what the released questions play; the gate does not change qa
    if "dummy_videos" in tables:  # every released row names a video the release ships (before the gate sees it)
        tables["dummy_videos"] = shipped_dummy_videos(tables["dummy_videos"], videos)
    shipped = videos | _visibility_files(tables, out_root)
    gated = tables if full_qa is None else tables | {"qa": full_qa}
    verdict = gate({k: v for k, v in gated.items() if k in RELEASED_TABLES}, config)
    gate_dict = verdict.checks
    if not verdict.success:
        raise ReleaseBlocked(verdict.summary, gate_dict)
    gate_dict["data_docs"] = DATA_DOCS_INDEX  # a path inside the release, never a temporary folder
    released = {k: v for k, v in tables.items() if k in RELEASED_TABLES}
    if full_qa is not None:  # row group by row group, each its own chunk: the bytes of the table read whole
        released["qa"] = SerializedTable(*frames_bytes("qa", full_qa.slices(), combine=False))
    # The gallery reads frames with OpenCV: videos on an object store are fetched (only those it shows), into a
    # temporary folder removed on the way out; local videos are read where they are.
    with tempfile.TemporaryDirectory(prefix="scan2qa-gallery-") if not local else _no_folder() as gallery_tmp:
        video_file = storage.local_file_getter(out_root, gallery_tmp)

        baselines = released_baselines(tables)  # the manifest's and the report's table: computed once

        def add_reports(staging: Path, release_version: str) -> None:
            verdict.write_docs(staging / "data_docs")
            write_report(
                staging / REPORT_INDEX,
                tables=tables,
                video_file=video_file,
                title=f"scan2qa release review ({tables['qa'].height} questions)",
                gate=gate_dict,
                orphan_verdicts=orphans,
                rejected=rejected,
                seed=config.seed,
                budgets=frame_budgets(config),
                excluded_scans=excluded,
                verdicts=outcomes,
                churn_rows=churn_rows,
                previous_version=previous_version,
                release=release_facts(release_version, config),
                frames_of=lambda keys: read_dataset_table(config.tables_root, "frames", config.storage_options, keys),
                visibility_of=lambda keys: read_dataset_table(config.tables_root, "visibility", config.storage_options, keys),
                sampler_validity=_sampler_validity(tables, config),
                question_rows=None if full_qa is None else lambda ids: _rows_of(full_qa, ids),
                baselines=baselines,
            )

        checks = gate_dict | {"rejected_by_reviewers": rejected, "orphan_verdicts": orphans, "excluded_scans": excluded}
        checks["baselines"] = baselines
        checks["all_frame_cap"] = all_frame_cap(released.get("scans"), config)
        checks |= outcome_checks(outcomes)
        if churn_rows is not None:
            checks["churn"] = churn_record(churn_rows, previous_version)
        key_id = build_key(config.output_root, config.storage_options).fingerprint  # the key itself stays out
        if local:
            release = write_release(
                Path(out_root.path) / "releases", released, config=config.to_dict(), checks=checks,
                videos={rel: Path(src.path) for rel, src in shipped.items()}, version=version, extra_files=add_reports,
                letter_key_id=key_id,
            )
            return ReleaseOutcome(
                release=release,
                report=release.path / REPORT_INDEX,
                data_docs=release.path / DATA_DOCS_INDEX,
                rejected=rejected,
                orphan_verdicts=orphans,
                verdicts=outcomes,
            )
        with tempfile.TemporaryDirectory(prefix="scan2qa-release-") as staging_root:
            staged = write_release(
                Path(staging_root), released, config=config.to_dict(), checks=checks, videos=shipped,
                version=version, extra_files=add_reports, letter_key_id=key_id,
            )
            remote = publish(staged, storage.upath(config.releases_root, config.storage_options), shipped)
    return ReleaseOutcome(
        release=remote,
        report=f"{remote.path}/{REPORT_INDEX}",
        data_docs=f"{remote.path}/{DATA_DOCS_INDEX}",
        rejected=rejected,
        orphan_verdicts=orphans,
        verdicts=outcomes,
    )


def release_facts(version: str, config: Config) -> dict:
    """What the report's stamp names: the release, the code and config it was built with, when, and its files."""
    return {
        "version": version,
        "code_revision": code_revision(),
        "config_digest": config_digest(config.to_dict()),
        "built_at": build_date(),
        "data_docs": "../" + DATA_DOCS_INDEX,  # relative to report/index.html
        "manifest": "../manifest.json",
    }


def build_date() -> str:
    """UTC time of the build, to the minute; ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention) fixes it."""
    from datetime import datetime, timezone

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    moment = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch.isdigit() else datetime.now(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def all_frame_cap(scans: pl.DataFrame | None, config: Config) -> dict:
    """``frames.max_all_frames`` as this release applied it: the cap, and every released scan whose all-frame
    sequence it thinned (frames kept, the rate they were resampled at and the stride: 1 frame in ``stride`` of
    the ``frames.fps`` sequence), read from ``scans.fps`` below the configured rate."""
    capped = []
    for row in (scans.sort("key").to_dicts() if scans is not None and scans.height else []):
        full_rate = all_frame_fps(row["dataset"], config.frames)
        if row["fps"] and row["fps"] < full_rate * (1 - 1e-9):
            capped.append({"key": row["key"], "frames": int(row["frame_count"]), "fps": float(row["fps"]),
                           "stride": int(round(full_rate / row["fps"]))})
    return {"max_all_frames": config.frames.max_all_frames, "capped_scans": capped}


def released_baselines(tables: dict) -> list[dict]:
    """Per (profile, budget, real-video type): frequency, best constant, blind, counts and interval, for the manifest."""
    from pipeline.qa.stats import baseline_rows

    qa = tables.get("qa")
    if qa is None or qa.is_empty():
        return []
    # The real-video rows, selected group by group: a filtered copy of the qa rows held would be gigabytes.
    return baseline_rows(qa, tables.get("qa_distribution_drops"), where=pl.col("video_kind").fill_null("real") == "real")


@contextmanager
def _no_folder():
    yield ""  # local output: the gallery never needs a download folder


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


def _visibility_files(tables: dict[str, pl.DataFrame], out_root) -> dict[str, object]:
    """Each released scan's per-frame visibility file, by its path in the release.

    Shipped so that a release alone answers for any frame sampler (``scan2qa answers --release``): the
    budgets' ``object_visibility`` decides only the frames of the budgets. The files are linked or copied
    byte for byte, never read into one table, so their size costs the release step no memory.
    """
    if "scans" not in tables:
        return {}
    files = {}
    for key in sorted(set(tables["scans"]["key"].to_list())):
        rel = f"{VISIBILITY_FOLDER}/{key}.parquet"
        src = out_root / rel
        if src.exists():
            files[rel] = src
    return files


def _sampler_validity(tables: dict, config: Config) -> str:
    """The report's frame-sampler section (empty without ``config.samplers``)."""
    if not config.samplers:
        return ""
    from pipeline.sampling.validity import report_section

    return report_section(tables, config)
