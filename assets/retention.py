"""Daily purge of superseded runs: their event logs are most of what the instance's database holds.

Every scan run writes a couple of hundred event rows (a few hundred KB) to
Postgres, and Dagster keeps them forever: a 10k-scan rebuild adds gigabytes,
and the rebuild after it makes them worthless. Dagster's own ``retention``
setting only covers schedule and sensor ticks (``deploy/dagster.yaml``), so
this job deletes runs (``instance.delete_run``: the run and its events) that
are superseded and old:

- runs are grouped by what they built: job, partition and asset selection;
  within that, a root run and its retries and re-executions form one group,
  because a re-execution from failure materializes only what failed and relies
  on its parent's events for the rest;
- a group is superseded when a later group of the same job, partition and
  selection has a successful run; its runs are deleted once every one of them
  has ended more than ``SCAN2QA_RUN_RETENTION_DAYS`` days ago (default 30).

So the newest successful build of every partition, everything still in
progress, and anything that never succeeded since, stay; so does the history of
the last N days. ``SCAN2QA_RUN_RETENTION_DAYS=0`` purges every superseded group
that has ended.

The schedule ``purge_superseded_runs_daily`` starts with the daemon unless
``SCAN2QA_AUTOMATION=stopped`` (``assets.deployment``). Registered in the code
location through ``RETENTION_JOBS`` and ``RETENTION_SCHEDULES``.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import dagster as dg

from assets.deployment import schedule_status

RETENTION_DAYS_VARIABLE = "SCAN2QA_RUN_RETENTION_DAYS"
DEFAULT_RETENTION_DAYS = 30
PARTITION_TAG = "dagster/partition"
PAGE = 1000


def retention_days() -> int:
    value = os.environ.get(RETENTION_DAYS_VARIABLE, "").strip()
    if not value:
        return DEFAULT_RETENTION_DAYS
    if not value.isdigit():
        raise ValueError(f"{RETENTION_DAYS_VARIABLE}={value!r}: expected a whole number of days, 0 or more")
    return int(value)


@dataclass(frozen=True)
class RunSummary:
    """What the purge needs of a run record (the records themselves carry whole run configs)."""

    run_id: str
    group: str  # root run id: a run and its retries / re-executions
    built: tuple  # (job name, partition or None, sorted asset selection or None)
    created: float
    ended: float | None  # None while in progress
    succeeded: bool


def summarize(record) -> RunSummary:
    run = record.dagster_run
    selection = tuple(sorted(key.to_user_string() for key in run.asset_selection)) if run.asset_selection else None
    ended = (record.end_time or record.update_timestamp.timestamp()) if run.is_finished else None
    return RunSummary(
        run_id=run.run_id,
        group=run.root_run_id or run.run_id,
        built=(run.job_name, run.tags.get(PARTITION_TAG), selection),
        created=record.create_timestamp.timestamp(),
        ended=ended,
        succeeded=run.status == dg.DagsterRunStatus.SUCCESS,
    )


def superseded_runs(runs: Iterable[RunSummary], ended_before: float) -> list[str]:
    """Run ids to delete: every run of a group that a later successful group of the same build supersedes,
    when the whole group ended before ``ended_before`` (a timestamp). Sorted, oldest group first."""
    groups: dict[tuple, dict[str, list[RunSummary]]] = {}
    for run in runs:
        groups.setdefault(run.built, {}).setdefault(run.group, []).append(run)
    doomed: list[tuple[float, str]] = []
    for by_group in groups.values():
        started = {group: min(r.created for r in members) for group, members in by_group.items()}
        successes = [started[g] for g, members in by_group.items() if any(r.succeeded for r in members)]
        if not successes:
            continue
        newest_success = max(successes)
        for group, members in by_group.items():
            if started[group] >= newest_success:
                continue
            if all(r.ended is not None and r.ended < ended_before for r in members):
                doomed.extend((started[group], r.run_id) for r in members)
    return [run_id for _, run_id in sorted(doomed)]


def all_run_summaries(instance: dg.DagsterInstance) -> Iterator[RunSummary]:
    cursor = None
    while True:
        records = instance.get_run_records(limit=PAGE, cursor=cursor)
        if not records:
            return
        yield from (summarize(record) for record in records)
        cursor = records[-1].dagster_run.run_id


def purge_superseded(instance: dg.DagsterInstance, days: int, now: float | None = None) -> list[str]:
    """Delete the superseded runs that ended more than ``days`` days before ``now``; returns their ids."""
    now = now if now is not None else datetime.datetime.now(datetime.timezone.utc).timestamp()
    doomed = superseded_runs(all_run_summaries(instance), now - days * 86400)
    for run_id in doomed:
        instance.delete_run(run_id)
    return doomed


@dg.op(description="Delete superseded runs (and their event logs) older than SCAN2QA_RUN_RETENTION_DAYS days.")
def purge_superseded_runs(context) -> None:
    days = retention_days()
    deleted = purge_superseded(context.instance, days)
    context.log.info(f"deleted {len(deleted)} superseded runs that ended more than {days} days ago")


@dg.job(name="purge_superseded_runs_job", executor_def=dg.in_process_executor,
        description="Delete runs superseded by a later successful build of the same partition, once old enough.")
def purge_superseded_runs_job():
    purge_superseded_runs()


purge_superseded_runs_daily = dg.ScheduleDefinition(
    name="purge_superseded_runs_daily",
    job=purge_superseded_runs_job,
    cron_schedule="30 4 * * *",
    default_status=schedule_status(),
    description="Every day 04:30 UTC: delete superseded runs older than SCAN2QA_RUN_RETENTION_DAYS days.",
)

RETENTION_JOBS = [purge_superseded_runs_job]
RETENTION_SCHEDULES = [purge_superseded_runs_daily]
