"""10,000 scans as one backfill on the loopback Postgres, with no partition key on any command line.

The partitions are registered through Dagster's Python API in batches and the
backfill is one ``PartitionBackfill`` added to the instance (what
``scan2qa backfill`` does), so the argv limit that stopped the old
``dagster job backfill --partitions a,b,...`` at about 6,200 scans cannot
apply. The daemon's backfill loop then creates the runs; its queue is limited
to 0 runs in progress so they stay queued and nothing heavy runs. The test
waits until ``CREATED_RUNS`` runs exist (or the backfill has created them all)
and checks them; it prints the rate at which the daemon created them.
``SCAN2QA_SCALE_ALL_RUNS=1`` waits for all 10,000 instead (a measurement, not
a test: minutes). Run with ``make test-cluster``.
"""

from __future__ import annotations

import os
import time

import pytest

from deploy.local_cluster import LocalCluster
from tests.test_cluster import deployment_environment, require_services

pytestmark = pytest.mark.cluster

SCANS = 10_000
CREATED_RUNS = 50  # the daemon creates runs 25 at a time; ~1-2 s each on a loaded 2-core machine
WAIT_S = 600  # an upper bound for a loaded machine; the run normally takes a fraction of it


def count_runs_until(instance, tags: dict[str, str], wanted: int, since: float, deadline: float) -> list[tuple[float, int]]:
    """(seconds since ``since``, runs tagged ``tags``) every 2 s until ``wanted`` runs exist or ``deadline``."""
    import dagster as dg

    counts: list[tuple[float, int]] = []
    while time.monotonic() < deadline:
        created = instance.get_runs_count(dg.RunsFilter(tags=tags))
        counts.append((time.monotonic() - since, created))
        if created >= wanted:
            break
        time.sleep(2)
    return counts


def test_ten_thousand_partitions_backfill_without_argv(tmp_path, monkeypatch, capsys):
    import dagster as dg
    from dagster._core.execution.backfill import BulkActionStatus
    from dagster._core.storage.tags import BACKFILL_ID_TAG, PARTITION_NAME_TAG

    from runs.backfill import BATCH_TAG, add_job_backfill, open_workspace, register_partitions
    from assets.celery import SCAN_JOB_CELERY
    from runs.instance_calls import Patience
    from assets.partitions import scan_partitions
    from deploy.local_cluster import WORKSPACE

    require_services()
    every_run = os.environ.get("SCAN2QA_SCALE_ALL_RUNS") == "1"
    wanted = SCANS if every_run else CREATED_RUNS
    keys = [f"synthetic/scale{i:05d}_00" for i in range(SCANS)]
    with LocalCluster(tmp_path / "stack") as cluster:
        cluster.start_postgres()
        cluster.extra_env["SCAN2QA_MAX_CONCURRENT_RUNS"] = "0"  # every run stays queued
        cluster.start_daemon()
        deployment_environment(cluster, monkeypatch)
        patience = Patience()
        with dg.DagsterInstance.get() as instance:
            started = time.monotonic()
            assert register_partitions(instance, patience, scan_partitions.name, keys) == SCANS
            assert register_partitions(instance, patience, scan_partitions.name, keys) == 0  # repeatable
            registered_s = time.monotonic() - started
            with open_workspace(instance, str(WORKSPACE)) as workspace:
                backfill_id = add_job_backfill(instance, patience, workspace, SCAN_JOB_CELERY, keys,
                                               {BATCH_TAG: "scale"})
            added = time.monotonic()
            backfill = instance.get_backfill(backfill_id)
            assert backfill.status == BulkActionStatus.REQUESTED and list(backfill.partition_names) == keys

            tags = {BACKFILL_ID_TAG: backfill_id}
            counts = count_runs_until(instance, tags, wanted, added,
                                      added + (WAIT_S * (SCANS // CREATED_RUNS) if every_run else WAIT_S))
            created = counts[-1][1]
            assert created >= wanted, f"the daemon created {created} runs of {wanted} in {counts[-1][0]:.0f} s"

            runs = instance.get_runs(dg.RunsFilter(tags=tags), limit=200)
            assert all(r.tags[BATCH_TAG] == "scale" and r.job_name == SCAN_JOB_CELERY for r in runs)
            assert {r.tags[PARTITION_NAME_TAG] for r in runs} <= set(keys)
            assert len({r.tags[PARTITION_NAME_TAG] for r in runs}) == len(runs), "a partition got two runs"
            statuses = {r.status for r in runs}
            assert statuses <= {dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED}, statuses

            # The first run is created after the daemon's next backfill tick (up to 30 s): the rate is from there on.
            first = next(t for t, n in counts if n > 0)
            rate = (created - next(n for t, n in counts if n > 0)) / max(counts[-1][0] - first, 1e-9) * 60
            with capsys.disabled():
                print(f"\n{SCANS} partitions registered in {registered_s:.1f} s; backfill added in "
                      f"{added - started - registered_s:.1f} s; first run after {first:.0f} s; "
                      f"{created} runs in {counts[-1][0]:.0f} s: {rate:.0f} runs/min after the first")
            # Stop the daemon before the cluster goes: it would go on creating runs while Postgres stops.
            cluster._stop_service(cluster.services.pop("daemon"))


READ_BACK_RUNS = tuple(int(n) for n in os.environ.get("SCAN2QA_SCALE_READ_BACK", "1000,2500").split(","))


def test_backfill_loop_reads_back_every_run_it_created(tmp_path, monkeypatch, capsys):
    """What Dagster's job-backfill loop pays before each chunk of 25 runs: every run of the backfill, read back.

    ``_get_partitions_chunk`` (dagster 1.13) fetches the backfill's runs to skip partitions already submitted, so the
    cost per chunk grows with the runs created so far and a one-scan-per-run backfill of 10k scans slows as it goes.
    Runs are added straight to the run storage (no daemon, no snapshots): only the read-back is measured.
    """
    import dagster as dg
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.storage.tags import BACKFILL_ID_TAG, PARTITION_NAME_TAG
    from dagster._core.utils import make_new_run_id

    require_services()
    with LocalCluster(tmp_path / "stack") as cluster:
        cluster.start_postgres()
        deployment_environment(cluster, monkeypatch)
        with dg.DagsterInstance.get() as instance:
            made, figures = 0, []
            for target in READ_BACK_RUNS:
                while made < target:
                    instance.add_run(DagsterRun(
                        job_name="scan_job_celery", run_id=make_new_run_id(), status=dg.DagsterRunStatus.NOT_STARTED,
                        tags={BACKFILL_ID_TAG: "scale", PARTITION_NAME_TAG: f"synthetic/scale{made:05d}_00"},
                    ))
                    made += 1
                started = time.perf_counter()
                runs = instance.get_runs(dg.RunsFilter(tags=DagsterRun.tags_for_backfill_id("scale")))
                figures.append(f"{target} runs read back in {time.perf_counter() - started:.2f} s")
                assert len(runs) == target
            with capsys.disabled():
                print("\nbackfill loop, per chunk of 25 runs: " + "; ".join(figures))


SCANS_PER_RUN = 100
CREATED_RANGE_RUNS = 10  # ~12 s each: the daemon writes each scan's planned events (~25) one by one


@pytest.mark.cluster_long  # CI leaves it to make test-cluster-long (time): see pyproject.toml
def test_ten_thousand_scans_in_runs_of_a_hundred_are_queued_in_minutes(tmp_path, monkeypatch, capsys):
    """With ``SCAN2QA_SCANS_PER_RUN=100`` (``assets.scan_batches``) the same 10,000 scans are one asset backfill of
    100 runs, each over a range of 100 consecutive scans, no scan in two runs. The test waits for the first
    ``CREATED_RANGE_RUNS`` runs and prints the rate; ``SCAN2QA_SCALE_ALL_RUNS=1`` waits for all 100 and checks that
    they cover every scan once."""
    import dagster as dg
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
        BACKFILL_ID_TAG,
    )

    from runs.backfill import BATCH_TAG, add_asset_backfill, open_workspace, register_partitions, scans_per_run_of
    from assets.partitions import keys_between
    from runs.instance_calls import Patience
    from assets.partitions import scan_partitions
    from deploy.local_cluster import WORKSPACE

    require_services()
    keys = [f"synthetic/scale{i:05d}_00" for i in range(SCANS)]
    all_runs = SCANS // SCANS_PER_RUN
    every_run = os.environ.get("SCAN2QA_SCALE_ALL_RUNS") == "1"
    wanted = all_runs if every_run else CREATED_RANGE_RUNS
    with LocalCluster(tmp_path / "stack") as cluster:
        cluster.start_postgres()
        cluster.extra_env["SCAN2QA_MAX_CONCURRENT_RUNS"] = "0"  # every run stays queued
        cluster.extra_env["SCAN2QA_SCANS_PER_RUN"] = str(SCANS_PER_RUN)
        cluster.start_daemon()
        deployment_environment(cluster, monkeypatch)
        patience = Patience()
        with dg.DagsterInstance.get() as instance:
            started = time.monotonic()
            register_partitions(instance, patience, scan_partitions.name, keys)
            with open_workspace(instance, str(WORKSPACE)) as workspace:
                assert scans_per_run_of(workspace) == SCANS_PER_RUN
                backfill_id = add_asset_backfill(instance, patience, workspace, keys, {BATCH_TAG: "scale"})
            added = time.monotonic()
            tags = {BACKFILL_ID_TAG: backfill_id}
            counts = count_runs_until(instance, tags, wanted, added, added + WAIT_S * (10 if every_run else 1))
            elapsed, created = counts[-1]
            assert created >= wanted, f"the daemon created {created} runs of {wanted} in {elapsed:.0f} s"
            cluster._stop_service(cluster.services.pop("daemon"))  # no more runs while they are read

            runs = instance.get_runs(dg.RunsFilter(tags=tags))
            ordered = list(instance.get_dynamic_partitions(scan_partitions.name))
            covered = [key for run in runs for key in keys_between(
                ordered, run.tags[ASSET_PARTITION_RANGE_START_TAG], run.tags[ASSET_PARTITION_RANGE_END_TAG])]
            assert len(covered) == len(set(covered)) == SCANS_PER_RUN * len(runs)  # ranges of 100, no scan twice
            if every_run:
                assert sorted(covered) == sorted(keys) and len(runs) == all_runs
            assert all(r.tags[BATCH_TAG] == "scale" for r in runs)
            selected = {key for run in runs for key in (run.asset_selection or ())}
            assert dg.AssetKey("scans") in selected and dg.AssetKey("qa_candidates") in selected, selected

            first = next(t for t, n in counts if n > 0)
            per_run = (elapsed - first) / max(created - next(n for t, n in counts if n > 0), 1)
            with capsys.disabled():
                print(f"\n{SCANS} scans in runs of {SCANS_PER_RUN}: registered and backfill added in "
                      f"{added - started:.1f} s; first run after {first:.0f} s; {created} runs in {elapsed:.0f} s "
                      f"({per_run:.1f} s a run after the first: all {all_runs} in about "
                      f"{(first + per_run * (all_runs - 1)) / 60:.0f} min)")
