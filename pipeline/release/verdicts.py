"""Reviewer verdicts: a CSV that rejects questions from, or pins them in, the next releases.

Question ids are content hashes, so a verdict keeps pointing at the same
question across rebuilds. The file is read through the storage layer, so a
verdicts file in a bucket (an ``s3://`` output root) counts like a local one.
A rejected question is left out of the release; an accepted one is pinned:
the dataset-wide ``qa`` step keeps it whatever the answer-distribution
control, subsampling or caps would draw (``pipeline.qa.finalize``). Every
verdict is accounted for in the report and the manifest: applied, or why not
(``verdict_outcomes``), never silently dropped.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable

import polars as pl

from pipeline import storage
from pipeline.errors import ConfigError, StorageUnreachable

VERDICT_COLUMNS = ("qa_id", "verdict", "note", "reviewer")
REQUIRED_COLUMNS = ("qa_id", "verdict")
VERDICTS = ("accept", "reject")

# Why a verdict could not be applied, in the order they are decided.
SCAN_NOT_RELEASED = "its scan is not in this release"
DROPPED_BY_CONTROL = "dropped by the answer-distribution control in this release"
NOT_GENERATED = "no longer generated (no question with this id in this build)"


def empty_verdicts() -> pl.DataFrame:
    return pl.DataFrame({c: [] for c in VERDICT_COLUMNS}, schema={c: pl.String for c in VERDICT_COLUMNS})


def read_verdicts(path: str | os.PathLike | None, storage_options: dict | None = None) -> pl.DataFrame:
    """Read ``qa_id, verdict, note, reviewer`` from a local path or a URI; a missing file means no verdicts yet.

    Bad input raises one ``ConfigError`` line naming the file (and the line, where there is one).
    """
    if path is None:
        return empty_verdicts()
    location = storage.upath(path, storage_options)
    try:
        with storage.reaching(location):
            if not location.exists():
                return empty_verdicts()
            data = location.read_bytes()
    except StorageUnreachable:
        raise
    except (OSError, ValueError) as exc:  # a folder, no permission, a broken object
        raise ConfigError(f"{location}: cannot read the verdicts file ({_first_line(exc)})") from None
    return parse_verdicts(data, str(location))


def verdicts_fingerprint(path: str | os.PathLike | None, storage_options: dict | None = None) -> dict:
    """``version`` (of the bytes; "absent" without a file), ``exists`` and ``rows``: what an observation records.

    Read through the storage layer like ``read_verdicts``, so a file in a bucket is seen (a local file test
    on an ``s3://`` URI always says absent).
    """
    import hashlib

    absent = {"version": "absent", "exists": False, "rows": 0}
    if path is None:
        return absent
    location = storage.upath(path, storage_options)
    with storage.reaching(location):
        if not location.exists():
            return absent
        data = location.read_bytes()
    return {"version": hashlib.sha256(data).hexdigest()[:16], "exists": True, "rows": max(0, len(data.splitlines()) - 1)}


def parse_verdicts(data: bytes, name: str) -> pl.DataFrame:
    """The verdicts in ``data`` (CSV bytes); ``name`` is the file the error lines name."""
    try:
        text = data.decode("utf-8-sig")  # a spreadsheet's byte-order mark is not part of the first column's name
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{name}:{line}: not UTF-8 text (byte {data[exc.start]:#04x})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = [f.strip() for f in reader.fieldnames or []]
        reader.fieldnames = fields
        missing = [c for c in REQUIRED_COLUMNS if c not in fields]
        if missing:
            found = ", ".join(fields) if fields else "an empty file"
            raise ConfigError(
                f"{name}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"(found {found}); expected {', '.join(VERDICT_COLUMNS)}"
            )
        rows = []
        for row in reader:
            line = reader.line_num
            if None in row:  # more cells than the header has names
                raise ConfigError(f"{name}:{line}: {len(fields) + len(row[None])} cells, the header names {len(fields)}")
            verdict = (row.get("verdict") or "").strip().lower()
            qa_id = (row.get("qa_id") or "").strip()
            if not qa_id and not verdict and not any((v or "").strip() for v in row.values()):
                continue  # a blank spreadsheet row
            if verdict not in VERDICTS:
                raise ConfigError(f"{name}:{line}: verdict {row.get('verdict')!r} is not accept or reject")
            if not qa_id:
                raise ConfigError(f"{name}:{line}: empty qa_id")
            rows.append(
                {
                    "qa_id": qa_id,
                    "verdict": verdict,
                    "note": (row.get("note") or "").strip(),
                    "reviewer": (row.get("reviewer") or "").strip(),
                }
            )
    except csv.Error as exc:
        raise ConfigError(f"{name}:{reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        return empty_verdicts()
    # The last verdict on a question wins, as a reviewer revising their call expects.
    return pl.DataFrame(rows, schema={c: pl.String for c in VERDICT_COLUMNS}).unique(
        subset="qa_id", keep="last", maintain_order=True
    ).sort("qa_id")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def accepted_ids(verdicts: pl.DataFrame) -> set[str]:
    """The questions reviewers accepted: what the ``qa`` step pins."""
    return set(verdicts.filter(pl.col("verdict") == "accept")["qa_id"].to_list())


def apply_verdicts(qa: pl.DataFrame, verdicts: pl.DataFrame) -> tuple[pl.DataFrame, list[str], list[str]]:
    """Drop rejected questions; return (kept, rejected ids present, verdict ids no longer in qa)."""
    # The verdicts are few and qa has millions of ids: the membership test is a join, never a Python set of qa.
    verdict_ids = verdicts["qa_id"].unique()
    ids = set(verdict_ids.filter(verdict_ids.is_in(qa["id"].unique().implode(), nulls_equal=True)).to_list())
    rejected = sorted(set(verdicts.filter(pl.col("verdict") == "reject")["qa_id"].to_list()))
    orphans = sorted(set(verdict_ids.to_list()) - ids)
    keep = rejection_filter(qa, verdicts)
    kept = qa if keep is None else qa.filter(keep)  # nothing to drop: no copy of a million-row table
    return kept, [r for r in rejected if r in ids], orphans


def rejection_filter(qa: pl.DataFrame, verdicts: pl.DataFrame) -> pl.Expr | None:
    """The rows ``apply_verdicts`` keeps, as a filter (None: every row), for a qa table streamed by row group.

    ``qa`` needs only its ``id`` column.
    """
    rejected = sorted(set(verdicts.filter(pl.col("verdict") == "reject")["qa_id"].to_list()))
    if rejected or qa["id"].null_count():
        return ~pl.col("id").is_in(rejected)
    return None


def verdict_outcomes(
    qa: pl.DataFrame,
    verdicts: pl.DataFrame,
    drops: pl.DataFrame | None = None,
    excluded_keys: Iterable[str] = (),
    *,
    known_keys: dict[str, str] | None = None,
    scan_keys: Iterable[str] | None = None,
) -> list[dict]:
    """What became of every verdict in this release, one dict per verdict, sorted by question id.

    ``qa`` is the question table as built, before the release leaves out the excluded scans' rows
    (``excluded_keys``) and before the verdicts; ``drops`` the ``qa_distribution_drops`` record of the
    same build. A question id is a hash (``pipeline.qa.ids``): it does not say which scan it belongs to,
    so a question found in no table here is matched to its scan through ``known_keys`` (id -> scan key,
    e.g. from the previous release) when given, else reported as no longer generated. ``scan_keys`` are
    the scans this build made (the ``scans`` table's keys; by default those ``qa`` and ``drops`` name).

    Each dict: ``qa_id, verdict, reviewer, note, applied`` and either ``key, question_type, question``
    (applied) or ``reason`` (not applied; ``key`` where known).
    """
    excluded = set(excluded_keys)
    if verdicts.is_empty():
        return []
    wanted = sorted(set(verdicts["qa_id"].to_list()))
    found = {
        row["id"]: row
        for row in qa.filter(pl.col("id").is_in(wanted)).select("id", "key", "question_type", "question").iter_rows(named=True)
    }
    dropped = {}
    if drops is not None and not drops.is_empty():
        dropped = {
            row["id"]: row
            for row in drops.filter(pl.col("id").is_in(wanted)).select("id", "key", "reason").iter_rows(named=True)
        }
    if scan_keys is None:
        scan_keys = set(qa["key"].unique().to_list())
        if drops is not None:
            scan_keys |= set(drops["key"].unique().to_list())
    released_keys = set(scan_keys) - excluded
    outcomes = []
    for verdict in verdicts.sort("qa_id").iter_rows(named=True):
        qa_id = verdict["qa_id"]
        out = {k: verdict[k] for k in ("qa_id", "verdict", "reviewer", "note")}
        question = found.get(qa_id)
        drop = dropped.get(qa_id)
        key = (question or drop or {}).get("key") or (known_keys or {}).get(qa_id)
        if question is not None and key in released_keys:
            out |= {"applied": True, "key": key, "question_type": question["question_type"],
                    "question": question["question"]}
        elif key is not None and key not in released_keys:
            out |= {"applied": False, "key": key, "reason": SCAN_NOT_RELEASED}
        elif drop is not None:
            out |= {"applied": False, "key": key, "reason": f"{DROPPED_BY_CONTROL} ({drop['reason']})"}
        else:
            out |= {"applied": False, "reason": NOT_GENERATED} | ({"key": key} if key is not None else {})
        outcomes.append(out)
    return outcomes


def outcome_checks(outcomes: list[dict]) -> dict:
    """The manifest's record of the verdicts: ``verdicts_applied`` and ``verdicts_not_applied`` (with reasons)."""
    applied = [{k: o[k] for k in ("qa_id", "verdict", "reviewer", "note")} for o in outcomes if o["applied"]]
    not_applied = [
        {k: o[k] for k in ("qa_id", "verdict", "reviewer", "note", "reason")} for o in outcomes if not o["applied"]
    ]
    return {"verdicts_applied": applied, "verdicts_not_applied": not_applied}


def release_verdict_outcomes(
    tables: dict[str, pl.DataFrame],
    verdicts: pl.DataFrame,
    excluded_keys: Iterable[str],
    previous_qa: pl.DataFrame | None = None,
) -> list[dict]:
    """``verdict_outcomes`` of a release's tables as built (before the excluded scans' rows are left out).

    The scans are those of the ``scans`` table when there is one; the previous release's ``qa``
    (when given) tells the scan of a question this build no longer has.
    """
    if verdicts.is_empty():
        return []
    known = None
    if previous_qa is not None and not previous_qa.is_empty():
        wanted = previous_qa.filter(pl.col("id").is_in(verdicts["qa_id"].implode())).select("id", "key")
        known = dict(zip(wanted["id"].to_list(), wanted["key"].to_list()))
    scans = tables.get("scans")
    scan_keys = None
    if scans is not None and "key" in scans.columns:
        scan_keys = set(scans["key"].to_list()) | set(tables["qa"]["key"].unique().to_list())
    return verdict_outcomes(
        tables["qa"], verdicts, tables.get("qa_distribution_drops"), excluded_keys, known_keys=known, scan_keys=scan_keys
    )
