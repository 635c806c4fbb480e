"""Jobs: one over the per-scan assets (partitioned by scan), one over the dataset-wide assets.

Selections are computed from the assets' partitioning, so an asset module added
to ``assets.definitions`` lands in the right job without editing this file.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.partitions import scan_partitions

SCAN_JOB = "scan_job"
DATASET_JOB = "dataset_job"


def _materializable(assets: Sequence[object]) -> list[dg.AssetsDefinition]:
    """Assets a job can materialize (source assets and check-only definitions are left out)."""
    return [a for a in assets if isinstance(a, dg.AssetsDefinition) and a.is_materializable]


def per_scan_keys(assets: Sequence[object]) -> list[dg.AssetKey]:
    return sorted(key for a in _materializable(assets) if a.partitions_def == scan_partitions for key in a.keys)


def dataset_wide_keys(assets: Sequence[object]) -> list[dg.AssetKey]:
    return sorted(key for a in _materializable(assets) if a.partitions_def is None for key in a.keys)


def build_jobs(assets: Sequence[object]) -> list[dg.UnresolvedAssetJobDefinition]:
    jobs = [
        dg.define_asset_job(
            SCAN_JOB,
            selection=dg.AssetSelection.assets(*per_scan_keys(assets)),
            partitions_def=scan_partitions,
            description="Materialize every per-scan asset for one scan partition.",
        )
    ]
    if dataset_wide_keys(assets):
        jobs.append(
            dg.define_asset_job(
                DATASET_JOB,
                selection=dg.AssetSelection.assets(*dataset_wide_keys(assets)),
                description="Materialize the dataset-wide assets from every scan partition that exists.",
            )
        )
    return jobs
