"""``scan2qa backfill --wait`` while the deployment's Redis or Postgres goes away under running scans.

Three synthetic scans run as a backfill of ``scan_job_celery`` on two Celery
workers, two runs at a time, with run retries on (``deploy/dagster.yaml``).
Once a scan's steps are running, (a) Redis is stopped for 20 s and started
again on the same port (empty: the broker lost what it held), or (b) Postgres
is stopped at once for 15 s and started again. Either way the command must end
on its own, without a traceback, in one of two ways: exit 0 with a release of
every scan whose tables are byte-identical to a local ``scan2qa build`` of the
same scans, or a non-zero exit naming every scan the release lacks. It rides
out the database outage itself (its one-line "instance database unreachable"
notice is checked), and waits for the runs the daemon retries.

Bound on time: the command's ``--timeout`` (``TIMEOUT_S``) bounds the wait; a
run whose run worker died with the database down stays STARTED (the
``DefaultRunLauncher`` cannot tell run monitoring its worker is gone), which
then ends as a non-zero exit naming that scan as ``in_progress`` when the
timeout runs out. Run with ``make test-cluster``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from deploy.local_cluster import LocalCluster
from tests.test_cluster import assert_matches_local_build, deployment_environment, require_services, scan2qa

pytestmark = pytest.mark.cluster

SCENES, FRAMES = 3, 40
KEYS = [f"synthetic/synth{i:04d}_00" for i in range(SCENES)]
TIMEOUT_S = 1200
REDIS_DOWN_S, POSTGRES_DOWN_S = 20, 15


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    require_services()
    scans = tmp_path / "scans"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", str(SCENES),
                    "--frames", str(FRAMES), "--seed", "0"], check=True, capture_output=True)
    with LocalCluster(tmp_path / "stack") as running:
        running.start_storage()
        running.upload(scans, "scans")
        running.extra_env["SCAN2QA_MAX_CONCURRENT_RUNS"] = "2"
        running.start_worker("w1")
        running.start_worker("w2")
        running.start_daemon()
        deployment_environment(running, monkeypatch)
        yield running


def wait_for_running_steps(deadline: float) -> None:
    """Until some scan run has a step started on a Celery worker (the fault then hits work in flight)."""
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        while time.monotonic() < deadline:
            for run in instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery",
                                                               statuses=[dg.DagsterRunStatus.STARTED])):
                if instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START, limit=1).records:
                    return
            time.sleep(0.5)
    raise AssertionError("no scan step was seen running")


def released_keys(cluster: LocalCluster) -> set[str]:
    from pipeline.storage import read_table, upath

    releases = upath(cluster.uri("out"), cluster.storage_options) / "releases"
    if not (releases / "LATEST").exists():
        return set()
    version = (releases / "LATEST").read_text().strip()
    return set(read_table(releases / version / "tables" / "scans.parquet", "scans")["key"].to_list())


def assert_complete_and_identical_or_named(cluster: LocalCluster, tmp_path, printed: str, returncode: int) -> str:
    """Exit 0 with every scan released and the bytes of a local build, or non-zero naming each missing scan."""
    print(f"scan2qa backfill --wait exited {returncode}:\n{printed}")
    assert "Traceback" not in printed, printed
    released = released_keys(cluster)
    if returncode != 0:
        missing = [k for k in KEYS if k not in released]
        assert missing or "FAILED" in printed, printed
        for key in missing:
            assert re.search(rf"^  missing {re.escape(key)}: \w+: .+$", printed, re.M), (key, printed)
        return "partial"
    assert released >= set(KEYS), (sorted(released), printed)
    assert f"summary: {SCENES} ok, 0 failed" in printed, printed

    assert_matches_local_build(cluster, tmp_path)
    return "complete"


def test_redis_stopped_while_scans_run_is_ridden_out_or_named(tmp_path, cluster):
    backfill = scan2qa("backfill", "--wait", "--timeout", str(TIMEOUT_S), env=cluster.environment())
    try:
        wait_for_running_steps(time.monotonic() + 600)
        cluster.stop_redis()
        time.sleep(REDIS_DOWN_S)
        cluster.start_redis()
        printed, _ = backfill.communicate(timeout=TIMEOUT_S + 300)
    finally:
        if backfill.poll() is None:
            backfill.kill()
    outcome = assert_complete_and_identical_or_named(cluster, tmp_path, printed, backfill.returncode)
    print(f"redis outage: {outcome} release, exit {backfill.returncode}")


def test_postgres_restarted_while_scans_run_is_ridden_out_or_named(tmp_path, cluster):
    backfill = scan2qa("backfill", "--wait", "--timeout", str(TIMEOUT_S), env=cluster.environment())
    try:
        wait_for_running_steps(time.monotonic() + 600)
        cluster.restart_postgres(down_seconds=POSTGRES_DOWN_S)
        printed, _ = backfill.communicate(timeout=TIMEOUT_S + 300)
    finally:
        if backfill.poll() is None:
            backfill.kill()
    assert "instance database unreachable (" in printed and "retrying in" in printed, printed
    outcome = assert_complete_and_identical_or_named(cluster, tmp_path, printed, backfill.returncode)
    print(f"postgres outage: {outcome} release, exit {backfill.returncode}")
