"""The scan2qa code location (``workspace.yaml`` -> ``assets.definitions``).

To add assets (and the asset checks next to them), add their module to
``ASSET_MODULES``; jobs, sensors and the schedule pick them up from their
partitioning, and ``scan2qa build`` materializes them.
"""

from __future__ import annotations

import dagster as dg

from assets import frames, pinpoint, qa, release, scene, visibility
from assets.celery import build_celery_jobs
from assets.jobs import build_jobs
from assets.schedules import weekly_full_rebuild
from assets.sensors import build_sensors
from resources.defaults import default_resources

ASSET_MODULES = [scene, frames, visibility, qa, pinpoint, release]

all_assets = dg.load_assets_from_modules(ASSET_MODULES)
all_asset_checks = dg.load_asset_checks_from_modules(ASSET_MODULES)

defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_asset_checks,
    jobs=[*build_jobs(all_assets), *build_celery_jobs(all_assets)],
    sensors=build_sensors(all_assets),
    schedules=[weekly_full_rebuild],
    resources=default_resources(),
)
