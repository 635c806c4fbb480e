"""Reviewer verdicts: a CSV that excludes rejected questions from the next release.

Question ids are content hashes, so a verdict keeps pointing at the same
question across rebuilds; verdicts whose ids no longer exist are reported
rather than silently dropped.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from pipeline.errors import ConfigError

VERDICT_COLUMNS = ("qa_id", "verdict", "note", "reviewer")
VERDICTS = ("accept", "reject")


def empty_verdicts() -> pl.DataFrame:
    return pl.DataFrame({c: [] for c in VERDICT_COLUMNS}, schema={c: pl.String for c in VERDICT_COLUMNS})


def read_verdicts(path: str | Path | None) -> pl.DataFrame:
    """Read ``qa_id, verdict, note, reviewer``; a missing file means no verdicts yet."""
    if path is None or not Path(path).exists():
        return empty_verdicts()
    path = Path(path)
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("qa_id", "verdict") if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path}: missing columns {missing}; expected {', '.join(VERDICT_COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            verdict = (row.get("verdict") or "").strip().lower()
            if verdict not in VERDICTS:
                raise ConfigError(f"{path}:{line}: verdict {row.get('verdict')!r} is not accept or reject")
            qa_id = (row.get("qa_id") or "").strip()
            if not qa_id:
                raise ConfigError(f"{path}:{line}: empty qa_id")
            rows.append(
                {
                    "qa_id": qa_id,
                    "verdict": verdict,
                    "note": (row.get("note") or "").strip(),
                    "reviewer": (row.get("reviewer") or "").strip(),
                }
            )
    if not rows:
        return empty_verdicts()
    # The last verdict on a question wins, as a reviewer revising their call expects.
    return pl.DataFrame(rows).unique(subset="qa_id", keep="last", maintain_order=True).sort("qa_id")


def apply_verdicts(qa: pl.DataFrame, verdicts: pl.DataFrame) -> tuple[pl.DataFrame, list[str], list[str]]:
    """Drop rejected questions; return (kept, rejected ids present, verdict ids no longer in qa)."""
    ids = set(qa["id"].to_list())
    rejected = sorted(set(verdicts.filter(pl.col("verdict") == "reject")["qa_id"].to_list()))
    orphans = sorted(set(verdicts["qa_id"].to_list()) - ids)
    if rejected or qa["id"].null_count():
        kept = qa.filter(~pl.col("id").is_in(rejected))
    else:
        kept = qa  # nothing to drop: no copy of a million-row table
    return kept, [r for r in rejected if r in ids], orphans


ABSENT = "absent"  # the data version of a verdicts file that does not exist yet


def verdicts_version(path: str | None, storage_options: dict | None = None) -> tuple[str, int]:
    """(content hash, verdict rows) of the verdicts file, local or on an object store; ``ABSENT`` when missing.

    The hash is what Dagster records as the observed data version of ``reviewer_verdicts``: a changed file is a
    new version, and the release (which depends on it) follows.
    """
    import hashlib

    from pipeline import storage

    if not path:
        return ABSENT, 0
    target = storage.upath(path, storage_options)
    try:
        with storage.reaching(target):
            data = target.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return ABSENT, 0
    rows = max(0, len(data.decode("utf-8", errors="replace").splitlines()) - 1)
    return hashlib.sha256(data).hexdigest()[:16], rows
