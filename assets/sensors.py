"""Sensors: discover scans and request their runs; watch the reviewer verdicts; automation for the rest.

``scan_discovery`` runs one bounded step of ``pipeline.scene.discovery.discovery_tick``
per evaluation: it lists the scans root, fingerprints new scans and the next
known ones in a rotation kept in the cursor (at most
``discovery.max_scans_per_tick`` scans or ``discovery.max_seconds_per_tick``
seconds per tick, so a tick stays inside Dagster's evaluation limit however
large the root is), and requests runs only for scans that are new or whose
files changed. A registered scan that a complete listing no longer finds (its
folder removed) has its partition removed and the set of registered scans
observed anew, so automation releases without it. Run keys include the fingerprint and the cursor the evaluation
started from, so a re-evaluated tick never launches a duplicate and a scan whose
files return to an earlier state still runs. A scan the cursor does not know yet
(the first tick after ``make demo``, or a cursor reset) is not rebuilt when its
latest ``scans`` materialization recorded the same fingerprint and its latest run
succeeded: ``scan2qa build``
tags each scan's run with the fingerprint discovery took (``FINGERPRINT_TAG``)
and the ``scene`` step records it, so the sensor recognises what the demo
already built. Both sensors start running with the daemon (``dagster dev``):
dropping a scan folder into the scans root is all it takes to build it. The
evaluation interval is ``SCAN2QA_SENSOR_INTERVAL`` seconds (default 30), the
same for ``verdicts_watch`` (which records an observation of the verdicts file
when its content changes) and for the automation condition sensor that
rebuilds the dataset-wide assets after any upstream change (``assets.automation``).
With ``SCAN2QA_EXECUTOR=celery`` in the deployment's environment they request
the Celery jobs instead of the in-process ones; ``SCAN2QA_AUTOMATION=stopped``
starts them stopped (``assets.deployment``).
"""

import hashlib
from collections.abc import Sequence

import dagster as dg

from assets.automation import AUTOMATION_INTERVAL, automation_sensor
from assets.deployment import sensor_interval, sensor_scan_job, sensor_status
from assets.jobs import dataset_wide_keys
from assets.partitions import (
    DATA_VERSION_TAG,
    FINGERPRINT_TAG,
    SOURCE_TAG,
    gone_from_root,
    registered_scans_observation,
    scan_partitions,
)
from pipeline.scene.discovery import DiscoveryState, discovery_tick
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


@dg.sensor(
    name="scan_discovery",
    job_name=sensor_scan_job(),
    minimum_interval_seconds=sensor_interval(AUTOMATION_INTERVAL),
    default_status=sensor_status(),
    description="Adds a partition for every new scan folder under the scans root and runs new or changed scans.",
)
def scan_discovery(
    context: dg.SensorEvaluationContext, storage: StorageResource, run_config: RunConfigResource
) -> dg.SensorResult:
    config = run_config.config(storage)
    tick = discovery_tick(
        config.scans_root,
        config.storage_options,
        DiscoveryState.from_cursor(context.cursor),
        max_scans=config.discovery.max_scans_per_tick,
        max_seconds=config.discovery.max_seconds_per_tick,
        exclude=config.output_root,
    )
    context.log.info(f"scan_discovery: {tick.summary()}")
    registered = set(context.instance.get_dynamic_partitions(scan_partitions.name))
    new_keys = [key for key, _ in tick.scans if key not in registered]
    gone = gone_from_root(registered, [key for key, _ in tick.scans], tick.discovery_complete)
    built = [key for key, _, fingerprint in tick.changed
             if key in registered and built_fingerprint(context.instance, key) == fingerprint
             and latest_run_succeeded(context.instance, key)]
    evaluation = evaluation_id(context.cursor)
    run_requests = [
        dg.RunRequest(partition_key=key, run_key=f"{key}@{fingerprint}#{evaluation}",
                      tags={SOURCE_TAG: uri, FINGERPRINT_TAG: fingerprint})
        for key, uri, fingerprint in tick.changed
        if key not in built
    ]
    cursor = tick.state.to_cursor()
    if built:
        context.log.info(f"scan_discovery: {len(built)} scans already built from these files: {', '.join(built[:5])}")
    if not run_requests and not new_keys and not gone:
        already = f"; {len(built)} already built from the same files" if built else ""
        return dg.SensorResult(
            skip_reason=f"no new or changed scans under {config.scans_root}: {tick.summary()}{already}", cursor=cursor
        )
    requests = [scan_partitions.build_add_request(new_keys)] if new_keys else []
    events = []
    if gone:  # their partitions go, and the observed set of registered scans tells automation to release again
        context.log.info(f"scan_discovery: {len(gone)} scans no longer under {config.scans_root}, their partitions "
                         f"removed (left out of the next release): {', '.join(gone[:5])}")
        requests.append(scan_partitions.build_delete_request(gone))
        events.append(registered_scans_observation((registered - set(gone)) | set(new_keys), gone))
    return dg.SensorResult(run_requests=run_requests, dynamic_partitions_requests=requests, asset_events=events,
                           cursor=cursor)


def evaluation_id(cursor: str | None) -> str:
    """Names the cursor this evaluation started from: a run key is unique to one scan, one fingerprint and one
    evaluation, so an evaluation retried from the same cursor (a daemon that died mid-tick) launches nothing twice,
    while files that return to an earlier fingerprint (a repaired mesh re-uploaded with its old bytes: same S3
    ETag) still get a run; Dagster never launches a run key a sensor has used before."""
    return hashlib.sha256((cursor or "").encode()).hexdigest()[:12]


def latest_run_succeeded(instance: dg.DagsterInstance, key: str) -> bool:
    """Whether the partition's latest run ended well: after a failed rerun, files back at the fingerprint of the
    last good build are a repair to build again, not a scan already built."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": key}), limit=1)
    return not runs or runs[0].status == dg.DagsterRunStatus.SUCCESS


def built_fingerprint(instance: dg.DagsterInstance, key: str) -> str | None:
    """The discovery fingerprint the latest ``scans`` materialization of ``key`` was built from, if recorded."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("scans"), asset_partitions=[key]), limit=1
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    value = records[0].asset_materialization.metadata.get("fingerprint")
    return None if value is None else str(value.value)


@dg.sensor(
    name="verdicts_watch",
    minimum_interval_seconds=sensor_interval(AUTOMATION_INTERVAL),
    default_status=sensor_status(),
    description="Records a new observation of reviewer_verdicts whenever the verdicts file changes, so the "
    "release follows a reviewer's edit without anyone clicking Observe.",
)
def verdicts_watch(
    context: dg.SensorEvaluationContext, storage: StorageResource, run_config: RunConfigResource
) -> dg.SensorResult:
    """An observation (no run) with the file's content hash as data version; automation does the rest."""
    from pipeline.release.verdicts import verdicts_fingerprint

    config = run_config.config(storage)
    found = verdicts_fingerprint(config.verdicts_path, config.storage_options)
    version, rows = found["version"], found["rows"]
    if version == context.cursor:
        return dg.SensorResult(skip_reason=f"{config.verdicts_path}: unchanged ({rows} verdicts)")
    if context.cursor is None and observed_version(context.instance) == version:
        return dg.SensorResult(skip_reason=f"{config.verdicts_path}: already observed ({rows} verdicts)", cursor=version)
    observation = dg.AssetObservation(
        asset_key="reviewer_verdicts",
        metadata={"path": config.verdicts_path, "exists": found["exists"], "dagster/row_count": rows},
        tags={DATA_VERSION_TAG: version},
    )
    context.log.info(f"verdicts_watch: {config.verdicts_path} changed: {rows} verdicts (version {version})")
    return dg.SensorResult(asset_events=[observation], cursor=version)


def observed_version(instance: dg.DagsterInstance) -> str | None:
    """The data version of the latest recorded observation of the verdicts (by the sensor, a build or the UI)."""
    records = instance.fetch_observations(dg.AssetKey("reviewer_verdicts"), limit=1).records
    if not records or records[0].asset_observation is None:
        return None
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG)


def build_sensors(assets: Sequence[object]) -> list[dg.SensorDefinition]:
    """Automation and the verdicts watch exist only once some module defines a dataset-wide asset."""
    if not dataset_wide_keys(assets):
        return [scan_discovery]
    return [scan_discovery, verdicts_watch, automation_sensor()]
