"""Jobs: one over the per-scan assets (partitioned by scan), one over the dataset-wide assets.

Selections are computed from the assets' partitioning, so an asset module added
to ``assets.definitions`` lands in the right job without editing this file.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.infrastructure_errors import retry_run_after_infrastructure_failure
from assets.partitions import scan_partitions
from assets.run_policy import dataset_run_tags, scan_run_tags

SCAN_JOB = "scan_job"
DATASET_JOB = "dataset_job"
SCAN_TAGS = {"scan2qa/phase": "scan"}  # a run over every per-scan asset: its updates are no partial rerun to heal


def _materializable(assets: Sequence[object]) -> list[dg.AssetsDefinition]:
    """Assets a job can materialize (source assets and check-only definitions are left out)."""
    return [a for a in assets if isinstance(a, dg.AssetsDefinition) and a.is_materializable]


def per_scan_keys(assets: Sequence[object]) -> list[dg.AssetKey]:
    return sorted(key for a in _materializable(assets) if a.partitions_def == scan_partitions for key in a.keys)


def dataset_wide_keys(assets: Sequence[object]) -> list[dg.AssetKey]:
    return sorted(key for a in _materializable(assets) if a.partitions_def is None for key in a.keys)


def build_jobs(
    assets: Sequence[object], suffix: str = "", executor_def: dg.ExecutorDefinition | None = None, how: str = ""
) -> list[dg.UnresolvedAssetJobDefinition]:
    """The per-scan job and (when there are dataset-wide assets) the dataset job; ``suffix`` names a variant
    with another executor (``assets.celery``); without one a job runs in-process whatever the code location's
    default executor (``assets.deployment``). Dataset runs are tagged so the run queue can limit them; both
    carry ``assets.run_policy``'s limits for run monitoring and run retries, and a failed step that had lost a
    service marks its run for the daemon's retry (``assets.infrastructure_errors``)."""
    jobs = [
        dg.define_asset_job(
            SCAN_JOB + suffix,
            selection=dg.AssetSelection.assets(*per_scan_keys(assets)),
            partitions_def=scan_partitions,
            executor_def=executor_def or dg.in_process_executor,
            tags={**SCAN_TAGS, **scan_run_tags()},  # assets.automation.partial_rerun_update
            hooks={retry_run_after_infrastructure_failure},
            description=f"Materialize every per-scan asset for one scan partition{how}.",
        )
    ]
    if dataset_wide_keys(assets):
        jobs.append(
            dg.define_asset_job(
                DATASET_JOB + suffix,
                selection=dg.AssetSelection.assets(*dataset_wide_keys(assets)),
                executor_def=executor_def or dg.in_process_executor,
                tags={"scan2qa/phase": "dataset", **dataset_run_tags()},
                    hooks={retry_run_after_infrastructure_failure},
                description=f"Materialize the dataset-wide assets from every scan partition that exists{how}.",
            )
        )
    return jobs
