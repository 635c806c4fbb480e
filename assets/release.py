"""The release: reviewer verdicts (observed) and the gated ``release`` asset.

The release step is the one gate per release: it applies reviewer verdicts,
validates exactly the tables it releases with every expectation suite once
(Great Expectations, imported only here), builds the Data Docs site once and
writes the release atomically (``pipeline.release.build``); a failing
expectation raises ``ReleaseBlocked`` and the previous release stays. Each
table's suite is also an asset check on that table's own asset
(``assets.table_checks``, decided in polars, no Great Expectations), so a
broken table shows on its own catalog page and stops before the release.
"""

import dagster as dg

from assets.catalog import file_asset, path_value
from resources.storage import StorageResource


@dg.observable_source_asset(
    group_name="release",
    description="reviewer verdicts CSV (qa_id, verdict, note, reviewer); observed by scan2qa build before each release",
    kinds={"csv"},
    owners=["team:scan2qa"],
    tags={"stage": "release"},
)
def reviewer_verdicts(storage: StorageResource) -> dg.ObserveResult:
    """Versioned by the file's content, so a new verdict marks the release stale."""
    import hashlib
    from pathlib import Path

    path = Path(storage.config().verdicts_path)
    exists = path.exists()
    version = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if exists else "absent"
    rows = max(0, len(path.read_text().splitlines()) - 1) if exists else 0
    return dg.ObserveResult(
        data_version=dg.DataVersion(version),
        metadata={"path": path_value(path), "exists": exists, "dagster/row_count": rows},
    )


@dg.asset(
    deps=["qa", "qa_distribution_drops", reviewer_verdicts],
    group_name="release",
    description="gated, atomic release with manifest, reviewer report and Data Docs (the one Great Expectations gate)",
    **file_asset(__name__, {"great_expectations", "html"}),
)
def release(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    from pipeline.release.build import build_release

    outcome = build_release(storage.config())
    manifest = outcome.release.manifest
    context.log.info(f"release {outcome.release.version} written to {outcome.release.path}")
    counts = manifest["row_counts"]
    return dg.MaterializeResult(
        metadata={
            "version": outcome.release.version,
            "path": path_value(outcome.release.path),
            "report": path_value(outcome.report),
            "data_docs": path_value(outcome.data_docs),
            "dagster/row_count": dg.MetadataValue.int(int(counts.get("qa", 0))),
            "tables": dg.MetadataValue.md(
                "| table | rows |\n|---|---|\n" + "\n".join(f"| {name} | {n:,} |" for name, n in sorted(counts.items()))
            ),
            "rejected_by_reviewers": len(outcome.rejected),
            "orphan_verdicts": len(outcome.orphan_verdicts),
        }
    )
