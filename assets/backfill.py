"""``scan2qa backfill``: every discovered scan as one Dagster backfill on a deployment, then the release.

``scan2qa build`` runs the graph in this process (or its worker pool); a
deployment runs it in the daemon's queue: partitions are registered in the
instance (Postgres), the scan runs are launched by Dagster's own backfill
(``dagster job backfill``), which only enqueues them, and the daemon's
``QueuedRunCoordinator`` starts them as its concurrency limit allows, each
run's steps going to the Celery workers when the job is ``scan_job_celery``.
With ``--wait`` the command follows the runs, printing a line per scan as it
finishes, then launches the dataset-wide job (``dagster job launch``, queued
too) and prints where the release went. Nothing here schedules anything
itself: kill this command and the queued runs go on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg

from assets.celery import DATASET_JOB_CELERY, SCAN_JOB_CELERY
from assets.jobs import DATASET_JOB, SCAN_JOB
from pipeline.scene.discovery import discover_scans

BATCH_TAG = "scan2qa/batch"
TERMINAL = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
DATASET_JOBS = {SCAN_JOB: DATASET_JOB, SCAN_JOB_CELERY: DATASET_JOB_CELERY}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job", default=SCAN_JOB_CELERY, choices=sorted(DATASET_JOBS),
                        help=f"the partitioned job to backfill (default: {SCAN_JOB_CELERY})")
    parser.add_argument("--scans", help="scans root (default: SCAN2QA_SCANS or the config)")
    parser.add_argument("--config", help="YAML run configuration (default: SCAN2QA_CONFIG or ./scan2qa.yaml)")
    parser.add_argument("--workspace", default="workspace.yaml",
                        help="the workspace file the daemon loads (default: ./workspace.yaml)")
    parser.add_argument("--wait", action="store_true",
                        help="follow the runs to the end, then launch the dataset-wide job and wait for the release")
    parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds --wait waits at most (default 6 h)")


def dagster_cli(*args: str) -> str:
    """A ``dagster`` CLI command of this environment; its failure is one line."""
    command = [str(Path(sys.executable).with_name("dagster")), *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in (result.stderr or result.stdout).strip().splitlines() if line.strip()]
        raise RuntimeError(f"dagster {args[0]} {args[1]}: {lines[-1] if lines else f'exit {result.returncode}'}")
    return result.stdout


def run_error(instance: dg.DagsterInstance, run_id: str) -> str:
    """The innermost cause of the run's first failed step, as ``scan2qa build`` prints it."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    for record in records:
        error = record.event_log_entry.dagster_event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause
        if error is not None:
            message = error.message.strip().splitlines()[0] if error.message.strip() else error.cls_name
            return f"{record.event_log_entry.step_key}: {message}"
    return "run failed (see its event log in the UI)"


def wait_for_runs(instance: dg.DagsterInstance, tags: dict[str, str], expected: int, deadline: float, label) -> dict:
    """Follow the runs carrying ``tags`` until ``expected`` of them have ended; prints a line per ended run."""
    ended: dict[str, dg.DagsterRun] = {}
    while len(ended) < expected:
        for run in instance.get_runs(filters=dg.RunsFilter(tags=tags)):
            if run.run_id in ended or run.status not in TERMINAL:
                continue
            ended[run.run_id] = run
            stats = instance.get_run_stats(run.run_id)
            seconds = (stats.end_time or 0) - (stats.start_time or stats.end_time or 0)
            status = f"ok ({seconds:.1f} s)" if run.status == dg.DagsterRunStatus.SUCCESS else (
                f"FAILED: {run_error(instance, run.run_id)}")
            print(f"[{len(ended)}/{expected}] {label(run)} ... {status}", flush=True)
        if len(ended) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expected - len(ended)} of {expected} runs had not ended when --timeout ran out")
            time.sleep(2)
    return ended


def run(args: argparse.Namespace) -> int:
    if not os.environ.get("DAGSTER_HOME"):
        print("scan2qa backfill: DAGSTER_HOME is not set: a backfill runs on a deployment's instance "
              "(deploy/dagster.yaml; see README, Scaling out)", file=sys.stderr)
        return 1
    if not Path(args.workspace).is_file():
        print(f"scan2qa backfill: {args.workspace}: no such workspace file (the one the daemon loads)", file=sys.stderr)
        return 1
    from resources.storage import StorageResource

    deployment = StorageResource.from_env()
    config = StorageResource(
        scans_root=args.scans or deployment.scans_root,
        output_root=deployment.output_root,
        storage_options=deployment.storage_options,
        config_file=args.config or deployment.config_file,
    ).config()
    scans = discover_scans(config.scans_root, config.storage_options)
    if not scans:
        print(f"no scans found under {config.scans_root}")
        return 1
    from assets.build import output_summary, register_partitions

    keys = [key for key, _ in scans]
    batch = uuid.uuid4().hex[:12]
    with dg.DagsterInstance.get() as instance:
        register_partitions(instance, keys)
        print(f"backfill of {args.job}: {len(keys)} scans under {config.scans_root} (batch {batch})", flush=True)
        dagster_cli("job", "backfill", "-w", args.workspace, "-j", args.job, "--partitions", ",".join(keys),
                    "--tags", json.dumps({BATCH_TAG: batch}), "--noprompt")
        print("runs queued; the daemon starts them as its concurrency limit allows", flush=True)
        if not args.wait:
            return 0
        deadline = time.monotonic() + args.timeout
        ended = wait_for_runs(instance, {BATCH_TAG: batch}, len(keys), deadline,
                              lambda r: r.tags.get("dagster/partition", r.run_id))
        ok = sum(1 for r in ended.values() if r.status == dg.DagsterRunStatus.SUCCESS)
        if not ok:
            print(f"summary: 0 ok, {len(keys)} failed; no dataset-wide run")
            return 1
        dataset_job = DATASET_JOBS[args.job]
        dagster_cli("job", "launch", "-w", args.workspace, "-j", dataset_job,
                    "--tags", json.dumps({BATCH_TAG: f"{batch}-dataset"}))
        print(f"{dataset_job} queued", flush=True)
        final = wait_for_runs(instance, {BATCH_TAG: f"{batch}-dataset"}, 1, deadline, lambda r: "dataset-wide")
        dataset_ok = all(r.status == dg.DagsterRunStatus.SUCCESS for r in final.values())
    for line in output_summary(config):
        print(line)
    failed = len(keys) - ok
    print(f"summary: {ok} ok, {failed} failed{'' if dataset_ok else ', dataset-wide assets FAILED'}")
    return 0 if dataset_ok else 1
