"""Release-to-release churn of question ids: what a reviewer has to look at again.

Question ids are content hashes (``pipeline.qa.ids``), so a question kept from
one release to the next keeps its id, and reviewers' verdicts stay attached.
Adding a scan should only add that scan's questions; the dataset-wide steps
(the answer-distribution control above all) can also swap questions of the
scans already released, which is churn a reviewer pays for. ``churn`` counts it
per profile and question type; ``gone_in_released_scans`` is the part of it
that belongs to scans still in the release (questions that vanished although
their scan did not).
"""

from __future__ import annotations

import polars as pl

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage

CHURN_COLUMNS = (
    "profile", "question_type", "previous", "current", "kept", "new", "new_in_previous_scans", "gone",
    "gone_in_released_scans",
)


def churn(previous_qa: pl.DataFrame, qa: pl.DataFrame) -> list[dict]:
    """Per (profile, question type): questions kept, new and gone between two releases' ``qa`` tables.

    ``new_in_previous_scans`` counts new questions of scans the previous release had already;
    ``gone_in_released_scans`` gone questions of scans this release still has. Rows sorted by
    (profile, question type).
    """
    cols = ["id", "key", "profile", "question_type"]
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
        )
        .sort("profile", "question_type")
    )
    return [{c: row[c] for c in CHURN_COLUMNS} for row in counted.iter_rows(named=True)]


def churn_totals(rows: list[dict]) -> dict:
    """The churn rows summed over every profile and type."""
    return {c: sum(int(r[c]) for r in rows) for c in CHURN_COLUMNS[2:]}


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
