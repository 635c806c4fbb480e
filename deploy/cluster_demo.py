"""``make cluster-demo``: the whole production stack on this machine, the demo scans through it as a backfill.

Starts Postgres, Redis and an S3-compatible server (moto) on loopback, two
Celery workers, the Dagster daemon and the webserver (``deploy.local_cluster``);
uploads synthetic scans to the bucket; runs ``scan2qa backfill --wait`` (scan
runs queued by Dagster's backfill, started by the daemon's queue, steps run by
the workers, then the dataset-wide job); copies the release out of the bucket
into ``data/cluster-demo/release`` (the S3 server keeps its objects in memory);
prints where everything went and the UI address; then keeps the stack up for
exploring the UI until Ctrl-C, and stops every process it started on any exit.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from deploy.local_cluster import REPO, LocalCluster, ServiceError
from pipeline.threads import available_cores, threads_per_worker


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy.cluster_demo", description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4, help="synthetic scans (default 4)")
    parser.add_argument("--frames", type=int, default=120, help="frames per scan (default 120)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--workdir", default=str(REPO / "data" / "cluster-demo"), help="where logs, scans and the release go")
    parser.add_argument("--stop-when-done", action="store_true", help="stop the stack once the release is written")
    return parser.parse_args(argv)


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def generate_scans(folder: Path, scenes: int, frames: int) -> None:
    if any(folder.glob("synth*")):
        return
    step(f"generating {scenes} synthetic scans x {frames} frames into {folder}")
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(folder), "--scenes", str(scenes),
                    "--frames", str(frames), "--seed", "0"], check=True)


def download_release(cluster: LocalCluster, target: Path) -> Path | None:
    from pipeline.storage import upath

    releases = upath(cluster.uri("out/releases"), cluster.storage_options)
    if not (releases / "LATEST").exists():
        return None
    version = (releases / "LATEST").read_text().strip()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    releases.fs.get(f"{cluster.bucket}/out/releases/{version}/", str(target), recursive=True)
    return target


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(args.workdir).resolve()
    scans = workdir / "scans"
    # SIGTERM (a supervisor, `kill`) stops the stack like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    generate_scans(scans, args.scenes, args.frames)
    for stale in ("logs", "dagster_home"):
        shutil.rmtree(workdir / stale, ignore_errors=True)
    try:
        with LocalCluster(workdir / "stack") as cluster:
            step("starting Postgres, Redis and the S3 server (moto) on loopback")
            cluster.start_storage()
            step(f"uploading {scans} to {cluster.uri('scans')}")
            cluster.upload(scans, "scans")
            threads = threads_per_worker(args.workers)
            step(f"starting {args.workers} Celery workers ({threads} ray-casting thread(s) each on {available_cores()} cores)")
            for index in range(1, args.workers + 1):
                cluster.start_worker(f"worker{index}", threads=threads)
            step("starting the Dagster daemon and webserver")
            cluster.start_daemon()
            cluster.start_webserver()
            print(f"    UI: {cluster.webserver_url} (runs, the backfill, asset partitions)", flush=True)
            step("backfill: every scan through scan_job_celery, then dataset_job_celery")
            started = time.monotonic()
            result = subprocess.run([sys.executable, "-m", "scan2qa", "backfill", "--wait"],
                                    env=cluster.environment(), cwd=REPO)
            step(f"backfill ended with status {result.returncode} after {time.monotonic() - started:.0f} s")
            release = download_release(cluster, workdir / "release")
            print(f"    outputs in the bucket: {cluster.uri('out')} (S3 endpoint {cluster.s3_endpoint})")
            if release:
                print(f"    release copied to:     {release}")
                print(f"    reviewer report:       {release / 'report' / 'index.html'}")
            print(f"    logs of every service: {cluster.logs}")
            print(f"    UI:                    {cluster.webserver_url}")
            if args.stop_when_done:
                return result.returncode
            print("the stack stays up for the UI; press Ctrl-C to stop everything", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopped every service this demo started", flush=True)
        return 130
    except ServiceError as exc:
        print(f"cluster demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
