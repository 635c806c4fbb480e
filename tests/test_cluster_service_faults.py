"""The deployment's Redis or Postgres goes away under running scans, and the backfill heals by itself.

Four synthetic scans go through ``scan2qa backfill --wait`` on the loopback
stack with the deployed settings (``tests.cluster_faults``: a run queue of two,
two Celery workers). Once two scan runs have steps in flight (two more queued):

- Redis is stopped for 20 s and started again on the same port, empty: the
  broker lost its queued steps and stored results. A run worker polling its
  steps' results fails its run on the lost connection (``RUN_EXCEPTION``), and
  the daemon's run retries launch it again from its first unfinished step.
- Postgres is stopped cleanly (``pg_ctl -m fast``) for 15 s and started again:
  a step that loses the instance retries with backoff (the jobs' RetryPolicy),
  a launch that meets the outage goes back in the run queue
  (``deploy/run_launcher.py``, ``max_user_code_failure_retries``), and every
  process of the deployment, this command included, retries a refused
  connection for about 50 s (``patient_postgres_connections``).

Either way the command exits 0 with the complete release, byte-identical to a
fault-free build, within ``HEAL_BOUND_S`` of the fault, with no partial release
ever ``latest`` and nothing left behind (``FaultRun.finish``). Run with ``make
test-cluster``.
"""

from __future__ import annotations

import time

import pytest

from tests.cluster_faults import FaultRun

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_long]  # CI leaves these to make test-cluster-long (time)

REDIS_DOWN_S, POSTGRES_DOWN_S = 20, 15


def test_redis_stopped_20_s_while_scans_run_heals_into_the_complete_release(tmp_path, monkeypatch, fault_free,
                                                                               fault_scans):
    with FaultRun(tmp_path, monkeypatch, fault_free, fault_scans) as run:
        def fault() -> None:
            run.cluster.stop_redis()
            time.sleep(REDIS_DOWN_S)
            run.cluster.start_redis()

        run.strike(fault)
        run.finish(f"redis stopped {REDIS_DOWN_S} s")


def test_postgres_stopped_15_s_while_scans_run_heals_into_the_complete_release(tmp_path, monkeypatch, fault_free,
                                                                                  fault_scans):
    with FaultRun(tmp_path, monkeypatch, fault_free, fault_scans) as run:
        run.strike(lambda: run.cluster.restart_postgres(down_seconds=POSTGRES_DOWN_S, mode="fast"))
        run.finish(f"postgres stopped {POSTGRES_DOWN_S} s (pg_ctl -m fast)")
