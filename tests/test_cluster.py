"""The deployment for real, on loopback: Postgres, Redis, moto's S3 server, Celery workers and the Dagster daemon.

Synthetic scans go to the bucket; ``scan2qa backfill --wait`` queues them as a
Dagster backfill of ``scan_job_celery``; the daemon's QueuedRunCoordinator
starts the runs and their steps run on two Celery worker processes. Mid-way one
worker's process group is SIGKILLed while it casts a scan's visibility and
restarted, as a supervisor would, with the deployed Celery settings (no
shortened visibility timeout): the step must be handed back to the queue
(``assets.celery_orphans``) and run again, the backfill must exit 0 with the
complete release, byte-identical to a fault-free build, within the fault
tests' bound (``tests.cluster_faults``). A worker that cannot reach the bucket
must fail its step with one line naming the URI.
Run with ``make test-cluster`` (CI runs it in its own step).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from deploy.local_cluster import REPO, LocalCluster, postgres_bin

pytestmark = pytest.mark.cluster



def require_services() -> None:
    missing = [name for name in ("redis-server",) if not shutil.which(name)]
    try:
        postgres_bin("initdb")
    except Exception:
        missing.append("postgresql")
    if missing:
        pytest.fail(f"Debian packages missing: {', '.join(missing)} (make test-cluster installs them)")


def scan2qa(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scan2qa", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def digests(fs, prefix: str) -> dict[str, str]:
    """sha256 of every Parquet table under ``prefix`` (local or bucket), by relative path."""
    files = sorted(p for p in fs.find(prefix) if p.endswith(".parquet"))
    return {p[len(prefix):].lstrip("/"): hashlib.sha256(fs.cat_file(p)).hexdigest() for p in files}


def assert_matches_local_build(cluster: LocalCluster, tmp_path: Path, history: Sequence[Callable[[], None]] = ()) -> None:
    """A local ``scan2qa build`` of the bucket's scans (in-process, 2 worker processes) writes the same table
    bytes and the same release version as the deployment wrote to the bucket.

    ``history``: the changes the deployment saw after its first release, in order (a mesh cut short, then put
    back); the local build runs once, then again after each change. Released questions are soft pins of the next
    release (issue 38), so a deployment that released a scan set in between is compared with a local build that
    lived through the same releases, not with a build from nothing."""
    import json

    import yaml
    from fsspec.implementations.local import LocalFileSystem

    from pipeline.storage import upath

    local = tmp_path / "local"
    config = tmp_path / "local.yaml"
    config.write_text(yaml.safe_dump({"scans_root": cluster.uri("scans"), "output_root": str(local),
                                      "storage_options": cluster.storage_options}))
    # The deployment's SCAN2QA_SCANS/OUT/EXECUTOR would win over the file (environment before config file) and
    # send this build into the bucket on Celery; only the S3 credentials are kept.
    env = {k: v for k, v in cluster.environment().items()
           if not k.startswith(("DAGSTER_", "SCAN2QA_")) or k == "SCAN2QA_LETTER_KEY"}  # the same letters

    def build_locally() -> None:
        build = scan2qa("build", "--config", str(config), "--workers", "2", env=env)
        printed, _ = build.communicate(timeout=1800)  # 9 min seen beside a running cluster on a loaded machine
        assert build.returncode == 0, f"scan2qa build exited {build.returncode}:\n{printed}"
        assert str(local) in printed, f"the local build did not write under {local}:\n{printed}"

    build_locally()
    for change in history:
        change()
        build_locally()
    bucket = upath(cluster.uri("out"), cluster.storage_options)
    bucket.fs.invalidate_cache()
    remote = digests(bucket.fs, f"{cluster.bucket}/out/tables")
    assert remote and remote == digests(LocalFileSystem(), str(local / "tables")), json.dumps(remote)[:500]
    assert (bucket / "releases" / "LATEST").read_text().strip() == (local / "releases" / "LATEST").read_text().strip()


def step_workers(instance, run_id: str, step: str) -> list[str]:
    """Celery workers that started ``step`` of the run, in order (dagster-celery's engine event names them)."""
    import dagster as dg

    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records
    workers = []
    for record in records:
        entry = record.event_log_entry
        if entry.step_key == step and "in celery worker" in (entry.dagster_event.message or ""):
            metadata = entry.dagster_event.engine_event_data.metadata
            workers.append(metadata["Celery worker"].value)
    return workers


def kill_worker_during_visibility(cluster: LocalCluster, instance, deadline: float) -> tuple[str, str]:
    """SIGKILL the worker running some scan's ``visibility`` step while it runs; returns (run id, worker)."""
    import dagster as dg

    while time.monotonic() < deadline:
        for run in instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery", statuses=[dg.DagsterRunStatus.STARTED])):
            workers = step_workers(instance, run.run_id, "visibility")
            finished = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS).records
            if workers and not any(r.event_log_entry.step_key == "visibility" for r in finished):
                name = workers[0].split("@")[0]
                cluster.kill(f"worker-{name}")
                return run.run_id, workers[0]
        time.sleep(0.3)
    raise AssertionError("no visibility step was seen running")


def deployment_environment(cluster: LocalCluster, monkeypatch) -> dict[str, str]:
    """The deployment's environment, also set in this process so the test can read the instance on Postgres."""
    env = cluster.environment()
    for name, value in env.items():
        if name.startswith(("DAGSTER_", "SCAN2QA_", "AWS_")):
            monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def cluster(tmp_path):
    require_services()
    with LocalCluster(tmp_path / "stack") as running:
        running.start_storage()
        yield running


@pytest.mark.cluster_long  # CI leaves it to make test-cluster-long (time): see pyproject.toml
def test_backfill_heals_after_a_workers_process_group_is_killed_mid_step(tmp_path, monkeypatch, fault_free,
                                                                         fault_scans):
    import dagster as dg

    from tests.cluster_faults import KEYS, FaultRun

    killed: list[tuple[str, str]] = []
    with FaultRun(tmp_path, monkeypatch, fault_free, fault_scans) as run:
        def fault() -> None:
            with dg.DagsterInstance.get() as instance:
                killed.append(kill_worker_during_visibility(run.cluster, instance, time.monotonic() + 600))
            run.fault_at = time.monotonic()  # the kill, not the wait for a visibility step to kill
            run.cluster.start_worker(killed[0][1].split("@")[0])  # the supervisor restarts it

        run.strike(fault)
        run.finish("a worker's process group SIGKILLed mid-step, restarted")
        killed_run, killed_worker = killed[0]
        with dg.DagsterInstance.get() as instance:
            # The killed worker's step ran again (on whichever worker took it back from the queue).
            workers = step_workers(instance, killed_run, "visibility")
            assert workers[0] == killed_worker and len(workers) >= 2, workers
            runs = instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery"))
            assert {r.tags["dagster/partition"] for r in runs if r.status == dg.DagsterRunStatus.SUCCESS} == set(KEYS)
            assert all("dagster/backfill" in r.tags for r in runs), "scan runs were not launched as a Dagster backfill"
            queued = instance.get_records_for_run(runs[0].run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED).records
            assert queued, "runs did not go through the QueuedRunCoordinator"
        from pipeline.storage import upath

        fs = upath(run.cluster.uri("out"), run.cluster.storage_options).fs
        assert not [p for p in fs.find(f"{run.cluster.bucket}/out") if p.rsplit("/", 1)[-1].startswith(".")], \
            "a temporary object was left under the output root"


def test_worker_that_cannot_reach_the_bucket_fails_its_step_naming_the_uri(tmp_path, cluster, monkeypatch):
    import dagster as dg

    scans = tmp_path / "scans"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", "1",
                    "--frames", "20", "--seed", "0"], check=True, capture_output=True)
    cluster.upload(scans, "scans")
    closed = f"http://127.0.0.1:{cluster.ports['s3'] + 1 if cluster.ports['s3'] < 65535 else 1}"
    unreachable = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": closed},
                   "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}}
    import json

    cluster.start_worker("lost", SCAN2QA_STORAGE_OPTIONS=json.dumps(unreachable))
    cluster.start_daemon()
    env = deployment_environment(cluster, monkeypatch)
    backfill = scan2qa("backfill", "--wait", "--timeout", "600", env=env)
    printed, _ = backfill.communicate(timeout=900)
    assert backfill.returncode == 1, printed
    failed = [line for line in printed.splitlines() if "FAILED" in line and "synth0000_00" in line]
    assert failed, printed
    assert f"s3://{cluster.bucket}/" in failed[0] and "cannot reach" in failed[0], failed[0]
