"""Sensors: discover scans and request their runs; refresh dataset-wide assets after scan runs.

``scan_discovery`` runs one bounded step of ``pipeline.scene.discovery.discovery_tick``
per evaluation: it lists the scans root, fingerprints new scans and the next
known ones in a rotation kept in the cursor (at most
``discovery.max_scans_per_tick`` scans or ``discovery.max_seconds_per_tick``
seconds per tick, so a tick stays inside Dagster's evaluation limit however
large the root is), and requests runs only for scans that are new or whose
files changed. Run keys include the fingerprint, so a re-evaluated tick never
launches a duplicate. Both sensors start running with the daemon (``dagster
dev``): dropping a scan folder into the scans root is all it takes to build it.
With ``SCAN2QA_EXECUTOR=celery`` in the deployment's environment they request
the Celery jobs instead of the in-process ones; ``SCAN2QA_AUTOMATION=stopped``
starts them stopped (``assets.deployment``).
"""

from collections.abc import Sequence

import dagster as dg

from assets.deployment import sensor_dataset_job, sensor_scan_job, sensor_status
from assets.jobs import dataset_wide_keys
from assets.partitions import SOURCE_TAG, scan_partitions
from pipeline.scene.discovery import DiscoveryState, discovery_tick
from resources.storage import StorageResource

ACTIVE_STATUSES = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dg.sensor(
    name="scan_discovery",
    job_name=sensor_scan_job(),
    minimum_interval_seconds=120,
    default_status=sensor_status(),
    description="Adds a partition for every new scan folder under the scans root and runs new or changed scans.",
)
def scan_discovery(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult:
    config = storage.config()
    tick = discovery_tick(
        config.scans_root,
        config.storage_options,
        DiscoveryState.from_cursor(context.cursor),
        max_scans=config.discovery.max_scans_per_tick,
        max_seconds=config.discovery.max_seconds_per_tick,
    )
    context.log.info(f"scan_discovery: {tick.summary()}")
    registered = set(context.instance.get_dynamic_partitions(scan_partitions.name))
    new_keys = [key for key, _ in tick.scans if key not in registered]
    run_requests = [
        dg.RunRequest(partition_key=key, run_key=f"{key}@{fingerprint}", tags={SOURCE_TAG: uri})
        for key, uri, fingerprint in tick.changed
    ]
    cursor = tick.state.to_cursor()
    if not run_requests and not new_keys:
        return dg.SensorResult(
            skip_reason=f"no new or changed scans under {config.scans_root}: {tick.summary()}", cursor=cursor
        )
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[scan_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=cursor,
    )


@dg.sensor(
    name="dataset_refresh",
    job_name=sensor_dataset_job(),
    minimum_interval_seconds=300,
    default_status=sensor_status(),
    description="Rebuilds the dataset-wide assets once scan runs have finished and at least one succeeded since.",
)
def dataset_refresh(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    instance = context.instance
    if instance.get_runs(filters=dg.RunsFilter(job_name=sensor_scan_job(), statuses=ACTIVE_STATUSES), limit=1):
        return dg.SensorResult(skip_reason="scan runs still in progress")
    latest = instance.get_runs(filters=dg.RunsFilter(job_name=sensor_scan_job(), statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1)
    if not latest or latest[0].run_id == context.cursor:
        return dg.SensorResult(skip_reason="no scan run succeeded since the last dataset rebuild")
    run_id = latest[0].run_id
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"after-{run_id}")], cursor=run_id)


def build_sensors(assets: Sequence[object]) -> list[dg.SensorDefinition]:
    """The dataset refresh sensor exists only once some module defines a dataset-wide asset."""
    return [scan_discovery, dataset_refresh] if dataset_wide_keys(assets) else [scan_discovery]
