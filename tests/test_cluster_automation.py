"""The Celery deployment with no ``scan2qa backfill``: sensors and automation alone publish every release.

On the loopback stack (Postgres, Redis, moto's S3, two Celery workers, the
daemon; ``SCAN2QA_EXECUTOR=celery``, sensors and automation running,
``SCAN2QA_SENSOR_INTERVAL`` short) three synthetic scans are uploaded to the
bucket's scans root. ``scan_discovery`` runs them as ``scan_job_celery``; the
``dataset_automation`` sensor's dataset-wide runs take the code location's
default executor, Celery too. Then one scan's mesh is cut short in the bucket:
its rerun fails and the next automatic release leaves it out and names it with
its error in the manifest and the report. The mesh is re-uploaded with its
original bytes (same ETag, so the scan's fingerprint is its last good build's):
the next automatic release holds it again and equals a local ``scan2qa build``
that lived through the same three releases (its questions are soft pins of the next release), table for
table, byte for byte.

The latencies from scans landing in the bucket to their release are printed
(``pytest -s``), split into the builds themselves and the waiting around them
(discovery, automation, the run queue and launcher); docs/operating.md
quotes them. Run with ``make test-cluster``.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from deploy.latency_bench import describe, run_records
from deploy.latency_bench import latency as latency_split
from deploy.local_cluster import LocalCluster
from tests.test_cluster import (  # noqa: F401 (cluster: the stack fixture, shared)
    assert_matches_local_build,
    cluster,
    deployment_environment,
    step_workers,
)
from tests.test_daemon_release import (
    BROKEN,
    FRAMES,
    INTERVAL,
    SCENES,
    Release,
    assert_names_failed_scan,
    excludes,
    holds_every_scan,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_long]  # CI leaves it to make test-cluster-long (time)

MESH = "synth0001_00/synth0001_00_vh_clean_2.ply"  # BROKEN's mesh, under the scans root


@pytest.fixture
def scans(tmp_path):
    """The synthetic scans, made before the stack starts (the test's clock starts when they land in the bucket)."""
    folder = tmp_path / "scans"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(folder), "--scenes", str(SCENES),
                    "--frames", str(FRAMES), "--seed", "0"], check=True, capture_output=True)
    return folder


@pytest.fixture
def deployment(cluster: LocalCluster) -> LocalCluster:
    """``tests.test_cluster``'s stack with two workers and the daemon, its sensors and automation running."""
    cluster.extra_env.update({"SCAN2QA_AUTOMATION": "running", "SCAN2QA_SENSOR_INTERVAL": str(INTERVAL)})
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.start_daemon()
    return cluster


def latency(instance, landed: float, released: float, scan_keys: set[str]):
    return latency_split(instance, landed, released, scan_keys, job_name="scan_job_celery")


def report(what: str, figures: dict[str, float | int]) -> None:
    print(describe(what, figures))


def test_sensors_and_automation_on_celery_exclude_a_broken_scan_and_restore_it(tmp_path, scans, deployment,
                                                                              monkeypatch):
    import dagster as dg

    from pipeline.storage import upath

    deployment_environment(deployment, monkeypatch)
    daemon = deployment.services["daemon"]
    release = Release(upath(deployment.uri("out"), deployment.storage_options))
    mesh = upath(deployment.uri("scans"), deployment.storage_options) / MESH
    keys = {f"synthetic/synth{i:04d}_00" for i in range(SCENES)}
    with dg.DagsterInstance.get() as instance:
        # 1. Three scans land in the bucket: discovered, built on the workers, released, nothing else done.
        deployment.upload(scans, "scans")
        landed = time.time()
        wait_for(holds_every_scan(release, SCENES), "a release of all three scans", 1200,
                 daemon.process, daemon.log)
        figures, release_run = latency(instance, landed, time.time(), keys)
        report("three new scans", figures)
        assert {r.dagster_run.job_name for r in run_records(instance, sensor="scan_discovery")} == {"scan_job_celery"}
        assert step_workers(instance, release_run, "release"), "the release step did not run on a Celery worker"

        # 2. The mesh cut short in the bucket: its rerun fails, the next release leaves it out and names its error.
        good = mesh.read_bytes()
        mesh.write_bytes(good[: len(good) // 3])
        broken_at = time.time()
        excluded = wait_for(excludes(release, BROKEN), "a release without the broken scan", 900,
                            daemon.process, daemon.log)
        report("a broken scan", latency(instance, broken_at, time.time(), {BROKEN})[0])
        assert_names_failed_scan(release, excluded, BROKEN, "_vh_clean_2.ply", SCENES)
        broken_runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": BROKEN}))
        assert broken_runs[0].status == dg.DagsterRunStatus.FAILURE, [r.status for r in broken_runs]

        # 3. Re-uploaded with its original bytes: the next automatic release holds it again.
        mesh.write_bytes(good)
        repaired_at = time.time()
        restored = wait_for(holds_every_scan(release, SCENES), "a release with the repaired scan", 900,
                            daemon.process, daemon.log)
        report("a repaired scan", latency(instance, repaired_at, time.time(), {BROKEN})[0])
        assert restored != excluded and BROKEN in release.scans(restored)
        launched_by = {r.dagster_run.tags.get("dagster/sensor_name") for r in run_records(instance)}
        assert launched_by == {"scan_discovery", "dataset_automation"}, launched_by
        # Nothing left in flight to write the bucket while it is compared with a local build.
        wait_for(lambda: all(r.dagster_run.is_finished for r in run_records(instance)), "every run finished", 600,
                 daemon.process, daemon.log)

    # The local build lives through the same three releases: the daemon is stopped first, so the bucket's mesh
    # can be cut and put back again for it without the sensors reacting.
    deployment.kill_daemon()
    assert_matches_local_build(deployment, tmp_path,
                               history=(lambda: mesh.write_bytes(good[: len(good) // 3]), lambda: mesh.write_bytes(good)))
