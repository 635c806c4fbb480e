"""Each table's expectation suite as a blocking asset check on that table's own asset.

The suites of ``expectations.suites`` are decided here in polars
(``expectations.runner.decide_suites``), never with Great Expectations:

- per-scan tables are checked per scan partition, right after the step that
  wrote them (``scans``, ``objects``, ``rooms``, ``frames`` inside the
  ``scene`` step, ``pinpoint_targets`` / ``pinpoint_neighbors`` inside theirs,
  ``frame_samples``, ``object_visibility`` and ``dummy_videos`` as checks of their own), so a
  scan whose tables break a rule stops at its own partition: the check fails
  with ERROR severity and nothing downstream of it runs for that scan;
- the dataset-wide ``qa`` carries the ``qa`` and ``qa_distribution`` suites, and ``qa_distribution_drops``
  (the other output of the same step) its own.

The release's gate (``pipeline.release.build``) is the one place Great
Expectations runs: once per release, over exactly the tables it releases
(after reviewer verdicts), building the Data Docs once. ``frames`` is not
released; its small suite (``FRAMES_SUITE``) is checked per scan only.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg
import polars as pl

from assets.partitions import scan_partitions
from assets.scan_batches import in_range, only_scan, record_check_results
from expectations.suites import Rule, Suite, _columns, _not_null, _unique
from pipeline.config import Config
from pipeline.frames.budgets import frame_budgets
from pipeline.table_scan import TableParts
from resources.run_config import RunConfigResource
from resources.storage import StorageResource

FRAMES_SUITE = Suite(
    "frames",
    "frame_index",
    [
        _columns("frames"),
        *_not_null("frames", "key", "frame_index", "width", "height"),
        _unique("frames", ["key", "frame_index"], "a source frame listed twice"),
        Rule("frames.size_range", "ExpectColumnValuesToBeBetween", {"column": "width", "min_value": 1, "max_value": None},
             "a frame with no pixels"),
    ],
)
SCENE_SUITES = ("scans", "objects", "rooms", "frames")
PINPOINT_SUITES = ("pinpoint_targets", "pinpoint_neighbors")
QA_SUITES = ("qa", "qa_distribution")
QA_INPUTS = ("scans", "objects", "object_visibility")  # the tables the qa view's cross-table columns need
DECIDED_BY = (
    "decided in polars over this {scope}; the release step validates the released tables again with "
    "Great Expectations (Data Docs)"
)


def check_name(table: str) -> str:
    return f"{table}_expectations"


def check_spec(
    table: str, asset: str | None = None, additional_deps: tuple[str, ...] = (), per_scan: bool = False
) -> dg.AssetCheckSpec:
    """``per_scan``: the check is partitioned like its scan asset, so the UI shows its result per partition (one
    failed scan does not show the whole asset's check as failed)."""
    return dg.AssetCheckSpec(
        name=check_name(table),
        asset=asset or table,
        partitions_def=scan_partitions if per_scan else None,
        blocking=True,
        additional_deps=list(additional_deps) or None,
        description=f"expectation suite of {table} (expectations/suites.py), every rule must pass",
    )


def _gate_settings(config: Config) -> dict:
    gate = config.gate
    return {
        "frequency_ceiling": gate.frequency_ceiling,
        "letter_tolerance": gate.letter_tolerance,
        "min_questions_for_distribution": gate.min_questions_for_distribution,
        "budgets": frame_budgets(config),
    }


def suite_results(
    tables: dict[str, pl.DataFrame], suite_tables: Iterable[str], config: Config, scope: str,
    asset: str | None = None,
) -> list[dg.AssetCheckResult]:
    """One ``AssetCheckResult`` per suite in ``suite_tables``, decided over views of ``tables``."""
    from expectations.runner import decide_suites

    suite_tables = tuple(suite_tables)
    report = decide_suites(tables, suite_tables, extra_suites=(FRAMES_SUITE,), **_gate_settings(config))
    results = []
    for table in suite_tables:
        rules = report.for_table(table)
        failures = [r for r in rules if not r.success]
        failed = "\n".join(
            f"- `{r.name}` ({r.guards}): {r.unexpected_count:,} rows, e.g. {', '.join(r.failing_rows[:5]) or '-'}"
            for r in failures
        )
        results.append(
            dg.AssetCheckResult(
                check_name=check_name(table),
                asset_key=asset or table,
                passed=not failures,
                severity=dg.AssetCheckSeverity.ERROR,
                description=(f"{len(failures)} of {len(rules)} expectations failed: "
                             + ", ".join(r.name for r in failures)) if failures else None,
                metadata={
                    "expectations": len(rules),
                    "failed": len(failures),
                    "failures": dg.MetadataValue.md(failed or "none"),
                    "rules": dg.MetadataValue.md("\n".join(f"- `{r.name}`: {r.guards}" for r in rules) or "none"),
                    "decided by": DECIDED_BY.format(scope=scope),
                },
            )
        )
    return results


def scan_check(
    context: dg.AssetCheckExecutionContext, table: str, tables: dict[str, pl.DataFrame], config: Config
) -> dg.AssetCheckResult:
    """The check of a per-scan ``table`` for the run's scan, or for each scan of the run's range (each recorded
    as its partition's evaluation, ``assets.scan_batches``)."""
    if not in_range(context):
        [result] = suite_results(tables, [table], config, "scan")
        return result
    per_scan = {
        key: suite_results({name: only_scan(frame, key) for name, frame in tables.items()}, [table], config, "scan")
        for key in sorted(context.partition_keys)
    }
    [result] = record_check_results(context, check_name(table), per_scan)
    return result


def scene_checks(tables: dict[str, pl.DataFrame], config: Config) -> list[dg.AssetCheckResult]:
    """The suites of the four scene tables, from the tables the ``scene`` step just wrote."""
    return suite_results({name: tables[name] for name in SCENE_SUITES}, SCENE_SUITES, config, "scan's tables")


def pinpoint_checks(
    targets: pl.DataFrame, neighbors: pl.DataFrame, objects: pl.DataFrame, config: Config
) -> list[dg.AssetCheckResult]:
    tables = {"objects": objects, "pinpoint_targets": targets, "pinpoint_neighbors": neighbors}
    return suite_results(tables, PINPOINT_SUITES, config, "scan's tables")


@dg.asset_check(
    asset="frame_samples",
    name=check_name("frame_samples"),
    partitions_def=scan_partitions,
    blocking=True,
    additional_ins={"scans": dg.AssetIn("scans")},
    description="expectation suite of frame_samples (expectations/suites.py), every rule must pass",
)
def frame_samples_expectations(
    context, storage: StorageResource, run_config: RunConfigResource,
    frame_samples: pl.DataFrame, scans: pl.DataFrame):
    tables = {"scans": scans, "frame_samples": frame_samples}
    return scan_check(context, "frame_samples", tables, run_config.config(storage))


@dg.asset_check(
    asset="object_visibility",
    name=check_name("object_visibility"),
    partitions_def=scan_partitions,
    blocking=True,
    additional_ins={"objects": dg.AssetIn("objects")},
    description="expectation suite of object_visibility (expectations/suites.py), every rule must pass",
)
def object_visibility_expectations(
    context, storage: StorageResource, run_config: RunConfigResource,
    object_visibility: pl.DataFrame, objects: pl.DataFrame):
    tables = {"objects": objects, "object_visibility": object_visibility}
    return scan_check(context, "object_visibility", tables, run_config.config(storage))


@dg.asset_check(
    asset="dummy_videos",
    name=check_name("dummy_videos"),
    partitions_def=scan_partitions,
    blocking=True,
    additional_ins={"scans": dg.AssetIn("scans"), "objects": dg.AssetIn("objects")},
    description="expectation suite of dummy_videos (expectations/suites.py), every rule must pass",
)
def dummy_videos_expectations(
    context, storage: StorageResource, run_config: RunConfigResource,
    dummy_videos: pl.DataFrame, scans: pl.DataFrame, objects: pl.DataFrame):
    tables = {"scans": scans, "objects": objects, "dummy_videos": dummy_videos}
    return scan_check(context, "dummy_videos", tables, run_config.config(storage))


@dg.multi_asset_check(
    specs=[
        *(check_spec(table, asset="qa", additional_deps=QA_INPUTS) for table in QA_SUITES),
        check_spec("qa_distribution_drops", additional_deps=("qa", "scans")),
    ],
    ins={name: dg.AssetIn(name) for name in ("qa", "qa_distribution_drops", "scans", "objects", "object_visibility")},
    can_subset=False,
)
def qa_expectations(
    storage: StorageResource, run_config: RunConfigResource, qa: TableParts, qa_distribution_drops: pl.DataFrame,
    scans: pl.DataFrame, objects: pl.DataFrame, object_visibility: pl.DataFrame,
):
    """The ``qa`` and ``qa_distribution`` suites over the whole question table and the scans it asks about, and
    the ``qa_distribution_drops`` suite over what the same step dropped.

    The question table arrives unread: its rules are decided a row group at a time (``expectations.checks``
    ``SlicedView``), since at 10,000 scans it is gigabytes.
    """
    config = run_config.config(storage)
    tables = {"qa": qa, "scans": scans, "objects": objects, "object_visibility": object_visibility}
    yield from suite_results(tables, QA_SUITES, config, "whole question table", asset="qa")
    drops = {"qa": qa, "scans": scans, "qa_distribution_drops": qa_distribution_drops}
    yield from suite_results(drops, ["qa_distribution_drops"], config, "whole drop record", asset="qa_distribution_drops")
