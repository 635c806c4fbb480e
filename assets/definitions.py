"""The scan2qa code location (``workspace.yaml`` -> ``assets.definitions``).

To add assets (and the asset checks next to them), add their module to
``ASSET_MODULES``; jobs, sensors and the schedule pick them up from their
partitioning, and ``scan2qa build`` materializes them.

Runs launched from the UI, the sensors and the schedule execute their steps in
the run's own process (``in_process_executor``): a scan's steps form a chain
that each uses the machine's cores through its libraries, so Dagster's default
multiprocess executor only started one process per step to fight over the same
cores. How many runs go at once is the instance's run queue
(``runs.demo_instance`` writes it for the demo; ``deploy/dagster.yaml`` for a
deployment); the Celery jobs (``assets.celery``) keep their own executor, and a
deployment with ``SCAN2QA_EXECUTOR=celery`` makes Celery the default for the
runs no named job holds (UI materializations, automation: ``assets.deployment``).
"""

from __future__ import annotations

import dagster as dg

from assets import frames, membership, pinpoint, qa, release, sampled, scene, table_checks, visibility
from assets.automation import with_scan_automation
from assets.catalog import with_config_versions
from assets.celery import build_celery_jobs
from assets.batch_rerun import batch_rerun_sensor
from assets.deployment import default_executor, sensor_scan_job
from assets.jobs import build_jobs
from assets.partitions import scan_partitions
from assets.retention import RETENTION_JOBS, RETENTION_SCHEDULES
from assets.schedules import weekly_full_rebuild
from assets.sensors import build_sensors
from resources.defaults import default_resources

ASSET_MODULES = [scene, frames, visibility, qa, pinpoint, membership, release, sampled, table_checks]

# Code versions cover the run-config fields each asset and its ancestors read (assets.catalog); per-scan assets
# follow a partial rerun of their partition (assets.automation).
all_assets = with_scan_automation(with_config_versions(dg.load_assets_from_modules(ASSET_MODULES)), scan_partitions)
all_asset_checks = dg.load_asset_checks_from_modules(ASSET_MODULES)

asset_jobs = [*build_jobs(all_assets), *build_celery_jobs(all_assets)]
scan_jobs = [job for job in asset_jobs if job.partitions_def is not None]

defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[*asset_jobs, *RETENTION_JOBS],
    sensors=[*build_sensors(all_assets), batch_rerun_sensor(scan_jobs, sensor_scan_job())],
    schedules=[weekly_full_rebuild, *RETENTION_SCHEDULES],
    resources=default_resources(),
    executor=default_executor(),
)
