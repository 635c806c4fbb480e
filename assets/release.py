"""The release: blocking expectation checks on ``qa`` and the gated ``release`` asset.

Every suite of ``expectations.suites`` is one blocking asset check on the
dataset-wide ``qa`` asset, so a failing expectation shows in the Dagster UI
by name, with its failing rows, and ``release`` downstream does not run.
The release asset validates again after applying reviewer verdicts (the
tables it writes are the ones it checked) and writes the release atomically.
"""


import dagster as dg

from expectations.suites import build_suites
from resources.storage import StorageResource

CHECKED_TABLES = [suite.table for suite in build_suites()]


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(name=f"{table}_expectations", asset="qa", blocking=True, description=f"expectation suite of {table}")
        for table in CHECKED_TABLES
    ],
    can_subset=False,
)
def release_expectations(context: dg.AssetCheckExecutionContext, storage: StorageResource):
    from pipeline.release.atomic import RELEASED_TABLES
    from pipeline.release.build import collect_tables, run_release_gate

    config = storage.config()
    # Only what the gate validates: the report's extra tables (per-frame visibility) are read by the release.
    gate = run_release_gate(collect_tables(config, RELEASED_TABLES), config)
    for table in CHECKED_TABLES:
        results = gate.for_table(table)
        failures = [r for r in results if not r.success]
        yield dg.AssetCheckResult(
            check_name=f"{table}_expectations",
            asset_key="qa",
            passed=not failures,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "expectations": len(results),
                "failed": dg.MetadataValue.md(
                    "\n".join(f"- `{r.name}` ({r.guards}): {r.unexpected_count} rows, e.g. {', '.join(r.failing_rows[:5])}" for r in failures)
                    or "none"
                ),
            },
        )


@dg.observable_source_asset(group_name="release", description="reviewer verdicts CSV (qa_id, verdict, note, reviewer)")
def reviewer_verdicts(storage: StorageResource) -> dg.DataVersion:
    """Versioned by the file's content, so a new verdict marks the release stale."""
    import hashlib
    from pathlib import Path

    path = Path(storage.config().verdicts_path)
    return dg.DataVersion(hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "absent")


@dg.asset(deps=["qa", reviewer_verdicts], group_name="release", description="gated, atomic release with manifest, reviewer report and Data Docs")
def release(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    from pipeline.release.build import build_release

    outcome = build_release(storage.config())
    manifest = outcome.release.manifest
    context.log.info(f"release {outcome.release.version} written to {outcome.release.path}")
    return dg.MaterializeResult(
        metadata={
            "version": outcome.release.version,
            "path": str(outcome.release.path),
            "report": str(outcome.report),
            "data_docs": str(outcome.data_docs),
            "rows": dg.MetadataValue.json(manifest["row_counts"]),
            "rejected_by_reviewers": len(outcome.rejected),
            "orphan_verdicts": len(outcome.orphan_verdicts),
        }
    )
