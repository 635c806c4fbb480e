"""A backfill on the loopback deployment heals by itself when the daemon dies, alone or with its machine.

Four small synthetic scans go through ``scan2qa backfill --wait`` with a run
queue of two (``SCAN2QA_MAX_CONCURRENT_RUNS=2``), so two runs are STARTED and two
wait in the queue when the fault strikes:

- the daemon process alone is SIGKILLed, then restarted: its code server and
  run workers outlive it, the started runs finish, the new daemon starts the
  queued ones;
- the daemon, its code server and every run worker are SIGKILLed (the daemon's
  machine lost), then the daemon restarted: the two started runs have no worker
  left. Run monitoring (``deploy/run_launcher.py``: their code server no longer
  answers) fails them, which frees their slots, and run retries
  (``deploy/dagster.yaml``) launch them again.

Either way the command exits 0 with the complete release, byte-identical to a
fault-free build, within ``HEAL_BOUND_S`` seconds of the fault, with no
partial release ever ``latest`` and nothing left behind
(``tests.cluster_faults.FaultRun``). The seconds it took are printed (``pytest -s``).

The lost-machine case needs ``scan2qa backfill`` to leave its Dagster backfill
open while runs are in flight: the retry daemon refuses to retry a run of a
backfill in a terminal state, and ``dagster job backfill`` (what the command
ran before issue 24) marks its backfill COMPLETED as soon as it queued the runs.
"""

from __future__ import annotations

import time

import pytest

from deploy.local_cluster import LocalCluster
from tests.cluster_faults import CONCURRENT_RUNS, SCENES, FaultRun
from tests.test_cluster import deployment_environment, require_services

pytestmark = pytest.mark.cluster



@pytest.fixture
def cluster(tmp_path):
    require_services()
    with LocalCluster(tmp_path / "stack") as running:
        running.start_storage()
        yield running


def scan_runs(instance):
    import dagster as dg

    return instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery"))


@pytest.mark.cluster_long  # CI leaves it to make test-cluster-long (time): see pyproject.toml
def test_backfill_heals_after_the_daemon_is_killed_and_restarted(tmp_path, monkeypatch, fault_free, fault_scans):
    with FaultRun(tmp_path, monkeypatch, fault_free, fault_scans) as run:
        def fault() -> None:
            assert run.cluster.run_worker_pids(), "the started runs' workers were not found under the daemon"
            run.cluster.kill_daemon()
            time.sleep(10)  # nothing dequeues, monitors or retries while it is down
            run.cluster.restart_daemon()

        run.strike(fault)
        run.finish("daemon SIGKILLed, restarted 10 s later")


@pytest.mark.cluster_long  # CI leaves it to make test-cluster-long (time): see pyproject.toml
def test_backfill_heals_after_the_daemons_machine_is_lost(tmp_path, monkeypatch, fault_free, fault_scans):
    import dagster as dg

    with FaultRun(tmp_path, monkeypatch, fault_free, fault_scans) as run:
        orphaned: set[str] = set()

        def fault() -> None:
            with dg.DagsterInstance.get() as instance:
                orphaned.update(r.run_id for r in scan_runs(instance) if r.status == dg.DagsterRunStatus.STARTED)
            killed = run.cluster.kill_daemon_and_run_workers()
            assert len(killed) >= CONCURRENT_RUNS, f"run workers killed: {killed}"
            time.sleep(10)
            run.cluster.restart_daemon()

        run.strike(fault)
        run.finish("daemon, code server and run workers SIGKILLed, daemon restarted 10 s later")
        # The orphaned runs were failed, not left STARTED, and each was retried by Dagster's run retries.
        with dg.DagsterInstance.get() as instance:
            for run_id in orphaned:
                failed = instance.get_run_by_id(run_id)
                if failed.status == dg.DagsterRunStatus.SUCCESS:
                    continue  # its last step had ended before the kill reached it
                assert failed.status == dg.DagsterRunStatus.FAILURE, (run_id, failed.status)
                retry = failed.tags.get("dagster/auto_retry_run_id")
                assert retry, f"run {run_id} of {failed.tags.get('dagster/partition')} was not retried"


def test_fault_helpers_bring_redis_and_postgres_back_on_the_same_port(cluster, monkeypatch):
    """The helpers other fault tests use: a stopped service comes back where its clients look for it."""
    import dagster as dg

    from deploy.local_cluster import port_open

    redis_port, postgres_port = cluster.ports["redis"], cluster.ports["postgres"]
    cluster.stop_redis()
    assert not port_open(redis_port)
    cluster.start_redis()
    assert cluster.ports["redis"] == redis_port and port_open(redis_port)

    deployment_environment(cluster, monkeypatch)
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("scan", ["before/restart"])
        cluster.restart_postgres(down_seconds=1)
        assert cluster.ports["postgres"] == postgres_port
        assert "before/restart" in instance.get_dynamic_partitions("scan"), "same data after the restart"
