"""A run over a range of scans that failed on some of them reruns the others: ``rerun_batch_survivors``.

A step over a range fails as a whole when any of its scans fails
(``assets.scan_batches``), so one bad scan would leave the rest of its range
unbuilt. This run-failure sensor reads the failed run's ``BatchFailure`` (the
scans that failed and why) and requests the range's other scans again, one
run per stretch of consecutive scans between the failed ones, with the failed
run's own tags (a backfill's batch tag among them) so whoever follows the
batch (``scan2qa backfill --wait``) follows the reruns too. The failed scans
keep the failed run as their latest attempt, and their own line as its error.

A run that failed for another reason (its worker lost, a run-time limit) is
not this sensor's: run retries rerun it whole. The sensor starts running with
the daemon whatever ``SCAN2QA_AUTOMATION`` says: it completes work already
asked for, as run retries do, and never starts new work.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.partitions import (
    ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG, keys_between, partition_range, scan_partitions,
)
from assets.run_errors import batch_failed_scans

RERUN_OF_TAG = "scan2qa/rerun_of"  # on each rerun: the batch run whose surviving scans it builds
# The failed run's tags a rerun keeps: ours (a backfill's batch), its backfill, and its run-time limit (a run of
# several scans may take several times a scan run's limit, ``scan2qa backfill`` sets it so).
CARRIED_PREFIXES = ("scan2qa/", "dagster/backfill", "dagster/max_runtime")


def survivor_ranges(range_keys: Sequence[str], failed: set[str]) -> list[tuple[str, str]]:
    """(first, last) of each stretch of consecutive keys of ``range_keys`` (partition order) none of which failed."""
    stretches: list[tuple[str, str]] = []
    start = None
    previous = None
    for key in [*range_keys, None]:
        if key is not None and key not in failed:
            start = start or key
            previous = key
            continue
        if start is not None:
            stretches.append((start, previous))
        start = None
    return stretches


def range_keys(instance: dg.DagsterInstance, start: str, end: str) -> list[str]:
    return keys_between(list(instance.get_dynamic_partitions(scan_partitions.name)), start, end)


def rerun_requests(instance: dg.DagsterInstance, run: dg.DagsterRun, job_name: str) -> list[dg.RunRequest]:
    bounds = partition_range(run.tags)
    if bounds is None:
        return []
    failed = batch_failed_scans(instance, run.run_id)
    if not failed:
        return []
    carried = {k: v for k, v in run.tags.items() if k.startswith(CARRIED_PREFIXES)}
    requests = []
    for first, last in survivor_ranges(range_keys(instance, *bounds), set(failed)):
        requests.append(dg.RunRequest(
            run_key=f"{run.run_id}:{first}..{last}",
            job_name=job_name,
            asset_selection=sorted(run.asset_selection) if run.asset_selection else None,
            tags={**carried, RERUN_OF_TAG: run.run_id,
                  ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last},
        ))
    return requests


def batch_rerun_sensor(scan_jobs: Sequence[dg.UnresolvedAssetJobDefinition], default_job: str) -> dg.SensorDefinition:
    """Reruns go to the failed run's job when it is one of ``scan_jobs``, else (an asset backfill's run) to
    ``default_job``, the per-scan job of the deployment's executor."""
    names = {job.name for job in scan_jobs}

    @dg.run_failure_sensor(
        name="rerun_batch_survivors",
        request_jobs=list(scan_jobs),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=15,
        description="a run over several scans that failed on some: rerun the others (assets/batch_rerun.py)",
    )
    def rerun_batch_survivors(context: dg.RunFailureSensorContext):
        run = context.dagster_run
        job = run.job_name if run.job_name in names else default_job
        requests = rerun_requests(context.instance, run, job)
        if not requests:
            return dg.SkipReason(f"run {run.run_id[:8]} did not fail on some scans of a range")
        return requests

    return rerun_batch_survivors
