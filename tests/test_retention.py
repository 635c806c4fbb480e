"""assets/retention.py: which runs the daily purge deletes, on summaries and on a real instance."""

from __future__ import annotations

import time

import pytest

from assets.retention import RunSummary, purge_superseded, retention_days, superseded_runs

DAY = 86400.0
NOW = 100 * DAY


def run(run_id, created, ended=None, ok=False, group=None, partition="p1", job="scan_job", selection=None):
    return RunSummary(run_id, group or run_id, (job, partition, selection), created, ended, ok)


def test_an_old_build_superseded_by_a_later_success_is_deleted_the_latest_kept():
    runs = [run("a", 1 * DAY, 1 * DAY, ok=True), run("b", 2 * DAY, 2 * DAY, ok=True), run("c", 3 * DAY, 3 * DAY, ok=True)]
    assert superseded_runs(runs, NOW) == ["a", "b"]


def test_nothing_younger_than_the_retention_is_deleted():
    runs = [run("a", 1 * DAY, 1 * DAY, ok=True), run("b", 95 * DAY, 95 * DAY, ok=True), run("c", 99 * DAY, 99 * DAY, ok=True)]
    assert superseded_runs(runs, NOW - 30 * DAY) == ["a"]


def test_a_retry_group_goes_or_stays_whole():
    # Group r: a failed run and its retry that succeeded from failure (the retry needs its parent's events).
    newest = [run("r1", 10 * DAY, 10 * DAY, group="r"), run("r2", 11 * DAY, 11 * DAY, ok=True, group="r")]
    older = [run("o1", 1 * DAY, 1 * DAY, group="o"), run("o2", 2 * DAY, 2 * DAY, ok=True, group="o")]
    assert superseded_runs(newest + older, NOW) == ["o1", "o2"]
    # A later group that only failed supersedes nothing: the last success is what the partition has.
    failed_later = [run("f", 20 * DAY, 20 * DAY)]
    assert superseded_runs(newest + failed_later, NOW) == []


def test_runs_in_progress_and_other_builds_are_kept():
    runs = [
        run("old", 1 * DAY, None, ok=False),  # still STARTED, whatever its age
        run("new", 2 * DAY, 2 * DAY, ok=True),
        run("other-partition", 1 * DAY, 1 * DAY, ok=True, partition="p2"),
        run("other-job", 1 * DAY, 1 * DAY, ok=True, job="dataset_job", partition=None),
        run("one-asset", 1 * DAY, 1 * DAY, ok=True, job="__ASSET_JOB", selection=("scans",)),
    ]
    assert superseded_runs(runs, NOW) == []


def test_retention_days_from_the_environment(monkeypatch):
    monkeypatch.delenv("SCAN2QA_RUN_RETENTION_DAYS", raising=False)
    assert retention_days() == 30
    monkeypatch.setenv("SCAN2QA_RUN_RETENTION_DAYS", "0")
    assert retention_days() == 0
    monkeypatch.setenv("SCAN2QA_RUN_RETENTION_DAYS", "a week")
    with pytest.raises(ValueError, match="SCAN2QA_RUN_RETENTION_DAYS='a week'"):
        retention_days()


def test_purge_deletes_superseded_runs_and_their_events_on_an_instance():
    import dagster as dg

    parts = dg.StaticPartitionsDefinition(["p1", "p2"])

    @dg.asset(partitions_def=parts, config_schema={"fail": bool})
    def table(context) -> None:
        if context.op_execution_context.op_config["fail"]:
            raise ValueError("bad input")

    def build(instance, partition, fail=False):
        result = dg.materialize([table], partition_key=partition, instance=instance, raise_on_error=False,
                                run_config={"ops": {"table": {"config": {"fail": fail}}}})
        return result.run_id

    with dg.instance_for_test() as instance:
        first, second = build(instance, "p1"), build(instance, "p1")
        only_failed = build(instance, "p2", fail=True)
        deleted = purge_superseded(instance, days=0, now=time.time() + 1)
        assert deleted == [first]
        assert instance.get_run_by_id(first) is None and not instance.all_logs(first)
        assert instance.get_run_by_id(second) and instance.get_run_by_id(only_failed)
        latest = instance.get_latest_materialization_event(dg.AssetKey("table"))
        assert latest.run_id == second
        assert purge_superseded(instance, days=0, now=time.time() + 1) == []
        # With the default retention nothing this young goes.
        build(instance, "p1")
        assert purge_superseded(instance, days=30) == []


def test_the_daily_job_and_schedule_load_and_run(monkeypatch):
    import dagster as dg

    from assets.retention import RETENTION_JOBS, RETENTION_SCHEDULES

    defs = dg.Definitions(jobs=RETENTION_JOBS, schedules=RETENTION_SCHEDULES)
    job = defs.resolve_job_def("purge_superseded_runs_job")
    assert defs.resolve_schedule_def("purge_superseded_runs_daily").cron_schedule == "30 4 * * *"
    monkeypatch.setenv("SCAN2QA_RUN_RETENTION_DAYS", "0")
    with dg.instance_for_test() as instance:
        first = job.execute_in_process(instance=instance)
        second = job.execute_in_process(instance=instance)
        assert first.success and second.success
        # The purge job's own runs are builds too: the older one is superseded by the newer.
        third = job.execute_in_process(instance=instance)
        assert third.success and instance.get_run_by_id(first.run_id) is None
