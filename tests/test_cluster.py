"""The deployment for real, on loopback: Postgres, Redis, moto's S3 server, Celery workers and the Dagster daemon.

Synthetic scans go to the bucket; ``scan2qa backfill --wait`` queues them as a
Dagster backfill of ``scan_job_celery``; the daemon's QueuedRunCoordinator
starts the runs and their steps run on two Celery worker processes. Mid-way one
worker is SIGKILLed while it casts a scan's visibility: the step must be handed
to the other worker, every run must still succeed, and the tables in the bucket
must be byte-identical to a local ``scan2qa build`` of the same scans. A worker
that cannot reach the bucket must fail its step with one line naming the URI.
Run with ``make test-cluster`` (CI runs it in its own step).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.local_cluster import REPO, LocalCluster, postgres_bin

pytestmark = pytest.mark.cluster

# Redis hands a dead worker's step to another worker this many seconds after the dead one took it.
VISIBILITY_TIMEOUT = 75
SCENES, FRAMES = 3, 120


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


def assert_matches_local_build(cluster: LocalCluster, tmp_path: Path) -> None:
    """A local ``scan2qa build`` of the bucket's scans (in-process, 2 worker processes) writes the same table
    bytes and the same release version as the deployment wrote to the bucket."""
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
    build = scan2qa("build", "--config", str(config), "--workers", "2", env=env)
    printed, _ = build.communicate(timeout=1800)  # 9 min seen beside a running cluster on a loaded machine
    assert build.returncode == 0, f"scan2qa build exited {build.returncode}:\n{printed}"
    assert str(local) in printed, f"the local build did not write under {local}:\n{printed}"
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


def test_backfill_on_celery_survives_a_killed_worker_and_matches_a_local_build(tmp_path, cluster, monkeypatch):
    import dagster as dg

    from pipeline.storage import upath

    scans = tmp_path / "scans"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", str(SCENES),
                    "--frames", str(FRAMES), "--seed", "0"], check=True, capture_output=True)
    cluster.upload(scans, "scans")
    cluster.extra_env["SCAN2QA_CELERY_VISIBILITY_TIMEOUT"] = str(VISIBILITY_TIMEOUT)
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.start_daemon()

    env = deployment_environment(cluster, monkeypatch)
    backfill = scan2qa("backfill", "--wait", "--timeout", "1200", env=env)
    with dg.DagsterInstance.get() as instance:
        killed_run, killed_worker = kill_worker_during_visibility(cluster, instance, time.monotonic() + 600)
        printed, _ = backfill.communicate(timeout=1500)
        assert backfill.returncode == 0, printed
        assert f"summary: {SCENES} ok, 0 failed" in printed, printed

        # The killed worker's step ran again on the other worker, and the event log says so.
        workers = step_workers(instance, killed_run, "visibility")
        assert workers[0] == killed_worker and len(workers) == 2 and workers[1] != killed_worker, workers
        runs = instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery"))
        assert len(runs) == SCENES and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert {r.tags["dagster/partition"] for r in runs} == {f"synthetic/synth{i:04d}_00" for i in range(SCENES)}
        assert all("dagster/backfill" in r.tags for r in runs), "scan runs were not launched as a Dagster backfill"
        queued = instance.get_records_for_run(runs[0].run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED).records
        assert queued, "runs did not go through the QueuedRunCoordinator"

    bucket = upath(cluster.uri("out"), cluster.storage_options)
    fs = bucket.fs
    assert (bucket / "releases" / "LATEST").exists(), "no release was published to the bucket"
    assert not [p for p in fs.find(f"{cluster.bucket}/out") if p.rsplit("/", 1)[-1].startswith(".")], \
        "a temporary object was left under the output root"

    assert_matches_local_build(cluster, tmp_path)


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
