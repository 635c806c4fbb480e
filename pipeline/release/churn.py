"""Release-to-release churn of question ids: what a reviewer has to look at again.

Question ids are content hashes (``pipeline.qa.ids``), so a question kept from
one release to the next keeps its id, and reviewers' verdicts stay attached.
Adding a scan should only add that scan's questions; the dataset-wide steps
(the answer-distribution control above all) can also swap questions of the
scans already released, which is churn a reviewer pays for. ``churn`` counts it
per profile and question type; ``gone_in_released_scans`` is the part of it
that belongs to scans still in the release (questions that vanished although
their scan did not).

The previous release's questions are soft pins of the next build's qa step
(``pipeline.qa.stability``), so what still churns has a cause, counted per
row: a gone question's scan was removed, or a reviewer rejected it, or its
scan changed (the ``scans`` table's checksum differs: the question may be no
candidate now), or else a bound forced it out (this build's control or
pruning dropped it, or its real-video counterpart); a new question's scan was
added, or its scan changed (a new candidate), or else it is back in a place a
bound freed. Without the checksums, a scan counts as changed for a question
neither control's record names.
"""

from __future__ import annotations

import json
from collections.abc import Collection

import polars as pl

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage

CHURN_COLUMNS = (
    "profile", "question_type", "previous", "current", "kept", "new", "new_in_previous_scans", "gone",
    "gone_in_released_scans",
)
# Every gone question has exactly one of the first four causes, every new one one of the last three.
CAUSE_COLUMNS = (
    "gone_scan_removed", "gone_scan_changed", "gone_bound", "gone_rejected",
    "new_scan_added", "new_candidate", "new_back_in",
)
CAUSES = {
    "gone_scan_removed": "scan removed", "gone_scan_changed": "scan changed", "gone_bound": "a bound forced it out",
    "gone_rejected": "rejected by a reviewer", "new_scan_added": "scan added",
    "new_candidate": "new candidate of a changed scan", "new_back_in": "back in a place a bound freed",
}


def _ids(frame: pl.DataFrame | None) -> pl.Series:
    return pl.Series("id", [], dtype=pl.String) if frame is None else frame["id"].cast(pl.String)


def churn(
    previous_qa: pl.DataFrame,
    qa: pl.DataFrame,
    *,
    drops: pl.DataFrame | None = None,
    previous_drops: pl.DataFrame | None = None,
    rejected: list[str] | tuple[str, ...] = (),
    changed_keys: list[str] | None = None,
) -> list[dict]:
    """Per (profile, question type): questions kept, new and gone between two releases' ``qa`` tables, by cause.

    ``new_in_previous_scans`` counts new questions of scans the previous release had already;
    ``gone_in_released_scans`` gone questions of scans this release still has. The causes
    (``CAUSE_COLUMNS``) read the ids a reviewer ``rejected`` and ``changed_keys`` (scans in both releases
    whose checksum differs: ``changed_scans``), or without them this build's ``drops`` and the previous
    release's ``previous_drops`` (``qa_distribution_drops`` frames, or None). Rows sorted by
    (profile, question type).
    """
    cols = ["id", "key", "profile", "question_type"]
    dropped_now = _ids(drops).implode()
    dropped_before = _ids(previous_drops).implode()
    rejected_ids = pl.Series("id", list(rejected), dtype=pl.String).implode()
    before = previous_qa.select(cols).unique(subset="id", keep="first").with_columns(pl.lit(True).alias("_before"))
    after = qa.select(cols).unique(subset="id", keep="first").with_columns(pl.lit(True).alias("_after"))
    keys_before = before["key"].unique()
    keys_after = after["key"].unique()
    both = before.join(after, on="id", how="full", coalesce=True, suffix="_now").select(
        "id",
        pl.coalesce("profile_now", "profile").alias("profile"),
        pl.coalesce("question_type_now", "question_type").alias("question_type"),
        pl.coalesce("key_now", "key").alias("key"),
        pl.col("_before").fill_null(False),
        pl.col("_after").fill_null(False),
    )
    gone = pl.col("_before") & ~pl.col("_after")
    new = ~pl.col("_before") & pl.col("_after")
    removed = ~pl.col("key").is_in(keys_after)
    rejected_now = pl.col("id").is_in(rejected_ids)
    added = ~pl.col("key").is_in(keys_before)
    if changed_keys is not None:
        changed = pl.col("key").is_in(pl.Series("key", list(changed_keys), dtype=pl.String).implode())
        bound, back = ~changed, ~changed
    else:
        bound, back = pl.col("id").is_in(dropped_now), pl.col("id").is_in(dropped_before)
    counted = (
        both.group_by("profile", "question_type")
        .agg(
            pl.col("_before").sum().alias("previous"),
            pl.col("_after").sum().alias("current"),
            (pl.col("_before") & pl.col("_after")).sum().alias("kept"),
            (~pl.col("_before") & pl.col("_after")).sum().alias("new"),
            (~pl.col("_before") & pl.col("_after") & pl.col("key").is_in(keys_before)).sum().alias("new_in_previous_scans"),
            (pl.col("_before") & ~pl.col("_after")).sum().alias("gone"),
            (pl.col("_before") & ~pl.col("_after") & pl.col("key").is_in(keys_after)).sum().alias("gone_in_released_scans"),
            (gone & removed).sum().alias("gone_scan_removed"),
            (gone & ~removed & ~rejected_now & ~bound).sum().alias("gone_scan_changed"),
            (gone & ~removed & ~rejected_now & bound).sum().alias("gone_bound"),
            (gone & ~removed & rejected_now).sum().alias("gone_rejected"),
            (new & added).sum().alias("new_scan_added"),
            (new & ~added & ~back).sum().alias("new_candidate"),
            (new & ~added & back).sum().alias("new_back_in"),
        )
        .sort("profile", "question_type")
    )
    return [{c: row[c] for c in CHURN_COLUMNS + CAUSE_COLUMNS} for row in counted.iter_rows(named=True)]


def churn_totals(rows: list[dict]) -> dict:
    """The churn rows summed over every profile and type (the causes too, where the rows have them)."""
    return {c: sum(int(r.get(c, 0)) for r in rows) for c in CHURN_COLUMNS[2:] + CAUSE_COLUMNS}


def cause_text(totals: dict, side: str) -> str:
    """``"scan added 1,120, new candidate 3"``: the non-zero causes of one side (``gone`` or ``new``)."""
    parts = [f"{CAUSES[c]} {totals[c]:,}" for c in CAUSE_COLUMNS if c.startswith(side + "_") and totals.get(c)]
    return ", ".join(parts) or "none"


def churn_line(totals: dict, previous_version: str | None) -> str:
    """One line for a person: what changed since the previous release, by cause."""
    return (
        f"since {previous_version or 'the previous release'}: {totals['kept']:,} of {totals['previous']:,} questions kept; "
        f"{totals['gone']:,} gone ({cause_text(totals, 'gone')}); {totals['new']:,} new ({cause_text(totals, 'new')})"
    )


def churn_record(rows: list[dict], previous_version: str | None) -> dict:
    """The manifest's ``checks.churn``: the release compared with, the totals by cause, the rows per type."""
    return {"previous_release": previous_version, "totals": churn_totals(rows), "by_type": rows}


CHURN_READS = ("id", "key", "profile", "question_type")  # all churn and the verdicts' scan lookup need


def previous_release_qa(releases_root: str, storage_options: dict | None = None) -> tuple[str, pl.DataFrame] | None:
    """(version, ``qa`` columns ``CHURN_READS``) of the release ``LATEST`` names, read before a new release
    moves it; None if there is none.

    A release whose qa table cannot be read is no comparison, not a failed release: None then too.
    """
    root = storage.upath(releases_root, storage_options)
    pointer = root / "LATEST"
    try:
        if not pointer.exists():
            return None
        version = pointer.read_text().strip()
        table = root / version / "tables" / "qa.parquet"
        if not version or not table.exists():
            return None
        with storage.reaching(table), table.open("rb") as fh:
            data = fh.read()  # bytes, never the file object: see storage.read_table
        return version, pl.from_arrow(pq.read_table(pa.BufferReader(data), columns=list(CHURN_READS)))
    except (OSError, ValueError, KeyError):  # pyarrow.ArrowInvalid is a ValueError
        return None


def released_table(
    releases_root: str, version: str, name: str, columns: list[str], storage_options: dict | None = None
) -> pl.DataFrame | None:
    """``columns`` of table ``name`` in release ``version``, or None when it cannot be read."""
    table = storage.upath(releases_root, storage_options) / version / "tables" / f"{name}.parquet"
    try:
        if not table.exists():
            return None
        with storage.reaching(table), table.open("rb") as fh:
            data = fh.read()
        return pl.from_arrow(pq.read_table(pa.BufferReader(data), columns=columns))
    except (OSError, ValueError, KeyError):
        return None


def previous_drops(releases_root: str, version: str, storage_options: dict | None = None) -> pl.DataFrame | None:
    """The ``qa_distribution_drops`` ids and scan keys of release ``version`` (what its control left out), or None."""
    return released_table(releases_root, version, "qa_distribution_drops", ["id", "key"], storage_options)


def changed_scans(previous_scans: pl.DataFrame | None, scans: pl.DataFrame | None) -> list[str] | None:
    """Keys in both ``scans`` tables whose checksum differs (sorted); None when either lacks checksums."""
    if previous_scans is None or scans is None or not {"key", "checksum"} <= set(scans.columns):
        return None
    both = previous_scans.select("key", "checksum").join(scans.select("key", "checksum"), on="key", suffix="_now")
    return sorted(both.filter(pl.col("checksum").ne_missing(pl.col("checksum_now")))["key"].to_list())


LOOKBACK_RELEASES = 16  # how far back a scan absent from LATEST is looked for (the churn chain of manifests)


def previous_release(releases_root: str, storage_options: dict | None = None, keys: Collection[str] = ()):
    """The soft pins of the next build's qa step (``pipeline.qa.stability.PreviousRelease``): the question ids the
    release ``LATEST`` names shipped and those its control dropped. None on a first build.

    A scan of ``keys`` that ``LATEST`` does not hold (moved aside and put back, a failed rerun now healed) takes its
    ids from the newest earlier release that held it, found along the manifests' churn chain
    (``checks.churn.previous_release``, at most ``LOOKBACK_RELEASES`` back): the reviewer's work on it comes back
    with it instead of counting as new.
    """
    from pipeline.qa.stability import of

    found = previous_release_qa(releases_root, storage_options)
    if found is None:
        return None
    version, qa = found
    dropped = previous_drops(releases_root, version, storage_options)
    released_ids, dropped_ids = qa["id"].to_list(), [] if dropped is None else dropped["id"].to_list()
    missing = set(keys) - set(qa["key"].to_list())
    for older in older_releases(releases_root, version, storage_options):
        if not missing:
            break
        held = released_table(releases_root, older, "qa", ["id", "key"], storage_options)
        if held is None:
            continue
        held = held.filter(pl.col("key").is_in(sorted(missing)))
        if held.is_empty():
            continue
        back = set(held["key"].to_list())
        released_ids += held["id"].to_list()
        old_drops = previous_drops(releases_root, older, storage_options)
        if old_drops is not None:
            dropped_ids += old_drops.filter(pl.col("key").is_in(sorted(back)))["id"].to_list()
        missing -= back
    return of(released_ids, dropped_ids)


def older_releases(releases_root: str, version: str, storage_options: dict | None = None) -> list[str]:
    """The releases before ``version``, newest first, as each manifest's churn record names its predecessor."""
    root = storage.upath(releases_root, storage_options)
    chain: list[str] = []
    while len(chain) < LOOKBACK_RELEASES:
        try:
            with storage.reaching(root / version / "manifest.json"):
                manifest = json.loads((root / version / "manifest.json").read_text())
        except (OSError, ValueError):
            break
        version = ((manifest.get("checks") or {}).get("churn") or {}).get("previous_release")
        if not version or version in chain:
            break
        chain.append(version)
    return chain
