"""Release membership from Dagster's own record of every scan partition.

``scan_membership`` is the first dataset-wide step: it asks the instance, for
every registered scan partition and every per-scan asset, whether its latest
materialization attempt succeeded (``get_materialized_partitions`` and
``get_latest_asset_partition_materialization_attempts_without_materializations``,
the two queries behind the UI's partition status), and whether the latest
evaluation of each per-scan blocking check passed
(``get_asset_check_partition_info``), and whether its tables belong together:
each one made after every per-scan table it reads (``get_latest_storage_id_by_partition``)
and by the code version the code location now gives its asset (the
``dagster/code_version`` tag of its latest materialization, fetched by storage
id). Each query covers all partitions of one
asset or check at once, so the cost does not grow with runs per scan.

Whoever launched the runs — ``scan2qa build``, the UI, a backfill, a sensor,
automation, the Celery deployment — the instance has the same record, so every
path to a release decides membership the same way. A run that was canceled
counts as failed (its tables may be half rewritten); a run deleted from the
instance counts as never attempted.
"""


from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache

import dagster as dg
import polars as pl

from assets import frames, pinpoint, qa, scene, table_checks, visibility
from assets.automation import dataset_automation
from assets.catalog import observed_spec, table_asset
from assets.partitions import REGISTERED_SCANS, registered_scans_version, scan_partitions
from assets.run_errors import stored_failed_checks, stored_run_failure
from pipeline.release.membership import (
    BUILT,
    CHECKS_FAILED,
    FAILED,
    IN_PROGRESS,
    NOT_BUILT,
    STALE,
    ScanState,
    membership_table,
    state_counts,
    worst,
)

PER_SCAN_MODULES = (scene, frames, visibility, qa, pinpoint)
CODE_VERSION_TAG = "dagster/code_version"  # the tag Dagster stamps on each materialization
ID_PAGE = 1000  # materialization records fetched per call
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def per_scan_definitions() -> list[dg.AssetsDefinition]:
    return [
        a for a in dg.load_assets_from_modules(list(PER_SCAN_MODULES))
        if isinstance(a, dg.AssetsDefinition) and a.is_materializable and a.partitions_def == scan_partitions
    ]


@lru_cache(maxsize=1)
def per_scan_asset_keys() -> tuple[dg.AssetKey, ...]:
    return tuple(sorted(key for a in per_scan_definitions() for key in a.keys))


@lru_cache(maxsize=1)
def per_scan_check_keys() -> tuple[dg.AssetCheckKey, ...]:
    """Checks of per-scan assets, whether declared on the asset or beside it (``assets.table_checks``)."""
    scan_assets = set(per_scan_asset_keys())
    checks = {key for a in per_scan_definitions() for key in a.check_keys}
    checks |= {key for c in dg.load_asset_checks_from_modules([*PER_SCAN_MODULES, table_checks]) for key in c.check_keys}
    return tuple(sorted((key for key in checks if key.asset_key in scan_assets), key=lambda k: k.to_user_string()))


def scan_states(
    instance: dg.DagsterInstance,
    keys: Sequence[str],
    asset_keys: Sequence[dg.AssetKey],
    check_keys: Sequence[dg.AssetCheckKey],
    parents: Mapping[dg.AssetKey, Collection[dg.AssetKey]] | None = None,
    code_versions: Mapping[dg.AssetKey, str | None] | None = None,
) -> list[ScanState]:
    """One state per partition key: every per-scan asset built by its latest attempt and every check passed, and
    (given ``parents``, each asset's per-scan inputs, and ``code_versions``, the versions the code location now
    defines) every table made after its inputs and by its asset's current code version."""
    wanted = set(keys)
    per_key: dict[str, list[str]] = {key: [] for key in keys}
    failed_runs: dict[str, str] = {}  # partition -> the run whose failure left it unbuilt
    storage = instance.event_log_storage
    attempts = {}
    for asset_key in asset_keys:
        materialized = instance.get_materialized_partitions(asset_key) & wanted
        incomplete = {
            p: run for p, (run, _) in storage.get_latest_asset_partition_materialization_attempts_without_materializations(
                asset_key
            ).items() if p in wanted
        }
        attempts[asset_key] = incomplete
        for key in keys:
            per_key[key].append(BUILT if key in materialized else NOT_BUILT)
    runs = _run_statuses(instance, {run for incomplete in attempts.values() for run in incomplete.values()})
    for asset_key, incomplete in attempts.items():
        for key, run_id in incomplete.items():
            status = runs.get(run_id)
            if status is None:
                continue  # the run was deleted: the attempt is as if never made
            if status in FINISHED:
                if status != dg.DagsterRunStatus.SUCCESS:
                    per_key[key].append(FAILED)
                    failed_runs.setdefault(key, run_id)
            else:
                per_key[key].append(IN_PROGRESS)
    check_errors = _failed_checks(instance, keys, check_keys, failed_runs)
    stale = stale_tables(instance, keys, asset_keys, parents or {}, code_versions or {})
    states = []
    for key in keys:
        state = worst(per_key[key] + ([CHECKS_FAILED] if key in check_errors else []) + ([STALE] if key in stale else []))
        if state == CHECKS_FAILED:
            error = "expectations failed: " + "; ".join(sorted(set(check_errors[key])))
        elif state == FAILED:
            error = stored_run_failure(instance, failed_runs[key], key)
        elif state == IN_PROGRESS:
            error = "a run of this scan was still in progress when the release was decided"
        elif state == NOT_BUILT:
            error = "registered but never built"
        elif state == STALE:
            error = stale[key] + "; materialize every asset of this partition again"
        else:
            error = ""
        states.append(ScanState(key, state, error))
    return states


def stale_tables(
    instance: dg.DagsterInstance,
    keys: Sequence[str],
    asset_keys: Sequence[dg.AssetKey],
    parents: Mapping[dg.AssetKey, Collection[dg.AssetKey]],
    code_versions: Mapping[dg.AssetKey, str | None],
) -> dict[str, str]:
    """Partition -> why its tables do not belong together, for partitions where they do not.

    A table made before one of its inputs was made again holds answers of the input's previous build; one made by
    another code version (code, or run config, changed since: ``assets.catalog``) holds answers the current code
    would not give. A materialization without a code version (reported from outside a run) is not judged by it.
    """
    storage = instance.event_log_storage
    wanted = set(keys)
    made = {ak: storage.get_latest_storage_id_by_partition(ak, dg.DagsterEventType.ASSET_MATERIALIZATION)
            for ak in asset_keys}
    found: dict[str, str] = {}
    for asset_key in asset_keys:
        name = asset_key.to_user_string()
        for parent in sorted(parents.get(asset_key, ()), key=lambda k: k.to_user_string()):
            if parent not in made:
                continue
            for key, storage_id in made[asset_key].items():
                if key in wanted and key not in found and made[parent].get(key, -1) > storage_id:
                    found[key] = f"{name} was built before its input {parent.to_user_string()} was built again"
        current = code_versions.get(asset_key)
        if current is None:
            continue
        ids = {storage_id: key for key, storage_id in made[asset_key].items() if key in wanted and key not in found}
        for key, version in _code_versions(instance, asset_key, ids).items():
            if key not in found and version and version != current:
                found[key] = (f"{name} was built by code version {version}, the code location now gives {current} "
                              "(its code or the run config it reads changed)")
    return found


def _code_versions(instance: dg.DagsterInstance, asset_key: dg.AssetKey, ids: Mapping[int, str]) -> dict[str, str]:
    """Partition -> the code version tag of the materialization ``ids`` names for it (storage id -> partition):
    the tag is not among those the event log indexes by partition, so the records are fetched by id, in pages."""
    found: dict[str, str] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), ID_PAGE):
        page = ordered[start : start + ID_PAGE]
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=page), limit=len(page)
        ).records
        for record in records:
            made = record.asset_materialization  # None for one reported from outside a run
            found[ids[record.storage_id]] = (made.tags or {}).get(CODE_VERSION_TAG, "") if made else ""
    return found


def _failed_checks(
    instance: dg.DagsterInstance, keys: Sequence[str], check_keys: Sequence[dg.AssetCheckKey], failed_runs: dict
) -> dict[str, list[str]]:
    """Partition -> checks whose latest evaluation for it failed.

    A failed blocking check fails its run, so the scan's failed run names the checks it failed; a check declared
    with partitions is also asked for its latest evaluation per partition; one declared without (the checks
    evaluated inside a multi-asset's step) only has a latest evaluation overall, which counts for the
    partition its run built when that run also made the asset's latest materialization there.
    """
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

    wanted = set(keys)
    found: dict[str, list[str]] = {}
    for key, run_id in failed_runs.items():
        checks = stored_failed_checks(instance, run_id, key)
        if checks:
            found[key] = checks
    if not check_keys:
        return found
    storage = instance.event_log_storage
    for info in storage.get_asset_check_partition_info(list(check_keys), partition_keys=list(keys)):
        if info.partition_key in wanted and info.latest_execution_status == AssetCheckExecutionRecordStatus.FAILED:
            if info.partition_key not in failed_runs:  # a failed run already named its checks
                named = stored_failed_checks(instance, info.latest_planned_run_id, info.partition_key) or [_named(info.check_key)]
                found.setdefault(info.partition_key, []).extend(named)
    latest = storage.get_latest_asset_check_execution_by_key(list(check_keys))
    for check_key, record in latest.items():
        if record.status != AssetCheckExecutionRecordStatus.FAILED or record.partition is not None:
            continue
        run = instance.get_run_by_id(record.run_id)
        key = run.tags.get("dagster/partition") if run else None
        if key not in wanted:
            continue
        made = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=check_key.asset_key, asset_partitions=[key]), limit=1
        ).records
        if made and made[0].run_id == record.run_id and key not in failed_runs:
            found.setdefault(key, []).extend(stored_failed_checks(instance, record.run_id) or [_named(check_key)])
    return found


def _named(check_key: dg.AssetCheckKey) -> str:
    return f"{check_key.asset_key.to_user_string()} ({check_key.name})"


def _run_statuses(instance: dg.DagsterInstance, run_ids: set[str]) -> dict[str, dg.DagsterRunStatus]:
    """Each run's status; a failed run the daemon will retry (``dagster/will_retry``: it lost a service, its worker
    or its machine) counts as still in progress until its retry is the partition's latest attempt, so a scan lost
    to infrastructure is never judged failed while it heals."""
    from dagster._core.storage.tags import WILL_RETRY_TAG

    found: dict[str, dg.DagsterRunStatus] = {}
    ids = sorted(run_ids)
    for start in range(0, len(ids), 500):
        for run in instance.get_runs(filters=dg.RunsFilter(run_ids=ids[start : start + 500])):
            retrying = run.status == dg.DagsterRunStatus.FAILURE and run.tags.get(WILL_RETRY_TAG) == "true"
            found[run.run_id] = dg.DagsterRunStatus.STARTED if retrying else run.status
    return found


def per_scan_lineage(asset_graph) -> tuple[dict, dict]:
    """Each per-scan asset's per-scan inputs and the code version the loaded code location gives it (the run's
    own definitions: the versions cover the run config of the deployment, ``assets.catalog.with_config_versions``)."""
    scan_assets = set(per_scan_asset_keys())
    parents = {key: frozenset(asset_graph.get(key).parent_keys & scan_assets) for key in scan_assets}
    versions = {key: asset_graph.get(key).code_version for key in scan_assets}
    return parents, versions


@dg.multi_observable_source_asset(
    specs=[
        observed_spec(
            REGISTERED_SCANS, __name__, {"dagster"},
            "the scan partitions registered in the instance; observed with a new version when a scan whose folder "
            "left the scans root is removed (scan_discovery, scan2qa build), so the release follows",
        )
    ],
)
def registered_scans(context) -> dg.ObserveResult:
    keys = context.instance.get_dynamic_partitions(scan_partitions.name)
    return dg.ObserveResult(asset_key=REGISTERED_SCANS, data_version=dg.DataVersion(registered_scans_version(keys)),
                            metadata={"dagster/row_count": len(keys)})


@dg.asset(
    deps=[
        *(dg.AssetDep(key, partition_mapping=dg.AllPartitionMapping()) for key in per_scan_asset_keys()),
        registered_scans,
    ],
    group_name="release",
    description="every registered scan partition and whether the release may hold it (built, failed, "
    "checks_failed, in_progress, not_built, stale), read from the Dagster instance",
    automation_condition=dataset_automation(),
    **table_asset("scan_membership", __name__),
)
def scan_membership(context: dg.AssetExecutionContext) -> pl.DataFrame:
    instance = context.instance
    keys = sorted(instance.get_dynamic_partitions(scan_partitions.name))
    parents, versions = per_scan_lineage(context.job_def.asset_layer.asset_graph)
    states = scan_states(instance, keys, per_scan_asset_keys(), per_scan_check_keys(), parents, versions)
    table = membership_table(states)
    for state in states:
        if state.state != BUILT:
            context.log.warning(f"{state.key} left out of the release ({state.state}): {state.error}")
    context.add_output_metadata({"states": dg.MetadataValue.json(state_counts(table)),
                                 "built": int(table.filter(pl.col("state") == BUILT).height)})
    return table


def record_built_elsewhere(instance: dg.DagsterInstance, keys: Sequence[str]) -> None:
    """Record every per-scan asset of ``keys`` as materialized, for tables written without a run of them
    (``scan2qa bench dataset``'s replicas of built scans, tests that write tables directly), so that
    membership holds them as the instance would after a build."""
    scan_assets = set(per_scan_asset_keys())
    # Inputs first, as a run makes them, so no table looks older than an input it was built from (``stale_tables``).
    for asset_key in (k for k in inputs_first(per_scan_definitions()) if k in scan_assets):
        for key in keys:
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset_key, partition=key))


def inputs_first(definitions: Sequence[dg.AssetsDefinition]) -> list[dg.AssetKey]:
    """The asset keys of ``definitions`` and their inputs, each after its inputs; keys of one depth sorted."""
    from graphlib import TopologicalSorter

    order = TopologicalSorter({key: deps for a in definitions for key, deps in a.asset_deps.items()})
    order.prepare()
    found: list[dg.AssetKey] = []
    while order.is_active():
        ready = sorted(order.get_ready())
        found.extend(ready)
        order.done(*ready)
    return found
