"""``scan2qa bench scaling``: the per-scan phase on one process, N local workers, and 1 vs 2 Celery workers.

The same synthetic scans are built four ways in one run, so every figure is
set against a baseline measured minutes apart on the same machine:

- ``serial``: ``scan2qa build --workers 1`` (partitions one after another in this process);
- ``workers``: ``scan2qa build --workers N`` (N spawned processes, ``cores / N`` threads each);
- ``celery-1`` and ``celery-2``: a loopback deployment (Postgres, Redis, the daemon's queued runs,
  ``scan2qa backfill`` of ``scan_job_celery``) with one and with two Celery worker processes.

Only the per-scan phase is timed (the dataset-wide assets run once, elsewhere). Each figure is wall
seconds, CPU seconds and core utilisation = CPU-s / (wall-s x cores). For the local builds CPU is this
process and its (waited) children, so it is exactly the build's; for the Celery runs it is the busy time
of the whole machine from ``/proc/stat`` (workers, run workers, daemon, Postgres, Redis), since the
work is spread over processes this one does not own; on a shared machine it includes neighbours' load.
Every Celery worker gets one ray-casting thread in both Celery configurations, so the two differ only in
how many steps run at once: each worker stands for a one-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=4, help="synthetic scans (default 4)")
    parser.add_argument("--frames", type=int, default=100, help="frames per scan (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes of the 'workers' build (default 2)")
    parser.add_argument("--skip-celery", action="store_true", help="only the local builds (no Postgres/Redis needed)")
    parser.add_argument("--work", help="working folder (default: a temporary one, removed afterwards)")


def cpu_seconds_of_this_and_children() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``, all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def figure(name: str, wall: float, cpu: float, cores: int, scans: int, **extra) -> dict:
    return {"name": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "utilisation": round(cpu / (wall * cores), 3) if wall else 0.0,
            "scans_per_hour": round(3600 * scans / wall, 1) if wall else 0.0, **extra}


def local_build(name: str, scans_root: Path, out: Path, workers: int, cores: int, count: int) -> dict:
    from runs.build import build
    from pipeline.config import load_config

    config = load_config(None, scans_root=str(scans_root), output_root=str(out))
    print(f"  {name}: scan2qa build --workers {workers} ...", file=sys.stderr, flush=True)
    wall0, cpu0 = time.perf_counter(), cpu_seconds_of_this_and_children()
    with contextlib.redirect_stdout(io.StringIO()):
        report = build(config, workers=workers, dataset_wide=False)
    wall, cpu = time.perf_counter() - wall0, cpu_seconds_of_this_and_children() - cpu0
    if report.failed:
        raise RuntimeError(f"{name}: {len(report.failed)} scans failed: {next(iter(report.failed.values()))}")
    return figure(name, wall, cpu, cores, count, workers=workers)


def celery_build(name: str, scans_root: Path, work: Path, workers: int, cores: int, count: int) -> dict:
    """One fresh loopback deployment; times the scan runs of one backfill from queued to the last one ended."""
    import dagster as dg

    from deploy.local_cluster import LocalCluster

    with LocalCluster(work / name) as cluster:
        cluster.start_postgres()
        cluster.start_redis()
        out = work / name / "out"
        cluster.extra_env.update({"SCAN2QA_SCANS": str(scans_root), "SCAN2QA_OUT": str(out),
                                  "SCAN2QA_STORAGE_OPTIONS": "{}", "SCAN2QA_MAX_CONCURRENT_RUNS": str(max(4, 2 * workers))})
        for index in range(workers):
            cluster.start_worker(f"w{index + 1}", threads=1)
        cluster.start_daemon()
        env = cluster.environment()
        print(f"  {name}: scan2qa backfill of {count} scans on {workers} Celery worker(s) ...", file=sys.stderr, flush=True)
        busy0, wall0 = machine_busy_seconds(), time.perf_counter()
        backfill = subprocess.Popen([sys.executable, "-m", "scan2qa", "backfill"], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        printed, _ = backfill.communicate()
        if backfill.returncode != 0:
            raise RuntimeError(f"{name}: scan2qa backfill failed: {printed.strip().splitlines()[-1:]}")
        saved = {k: os.environ.get(k) for k in env if k.startswith(("DAGSTER_", "SCAN2QA_"))}
        os.environ.update({k: v for k, v in env.items() if k.startswith(("DAGSTER_", "SCAN2QA_"))})
        try:
            with dg.DagsterInstance.get() as instance:
                while True:
                    runs = instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery"))
                    ended = [r for r in runs if r.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                                                             dg.DagsterRunStatus.CANCELED)]
                    if len(runs) == count and len(ended) == count:
                        break
                    time.sleep(0.5)
                failed = [r for r in runs if r.status != dg.DagsterRunStatus.SUCCESS]
                starts = [instance.get_run_stats(r.run_id).start_time for r in runs]
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        wall, busy = time.perf_counter() - wall0, machine_busy_seconds() - busy0
        worker_cpu = cluster.cpu_seconds("worker-")
        daemon_cpu = cluster.cpu_seconds("daemon")
        if failed:
            raise RuntimeError(f"{name}: {len(failed)} scan runs did not succeed")
        queued_to_first_start = min(s for s in starts if s) - (time.time() - wall)
    return figure(name, wall, busy, cores, count, workers=workers, cpu_source="/proc/stat (whole machine)",
                  worker_cpu_s=round(worker_cpu, 2), daemon_and_run_workers_cpu_s=round(daemon_cpu, 2),
                  first_run_started_after_s=round(max(0.0, queued_to_first_start), 1))


def run_scaling_bench(args: argparse.Namespace) -> dict:
    from pipeline.threads import available_cores

    cores = available_cores()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="scan2qa-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    scans = work / "scans"
    try:
        if not any(scans.glob("synth*")):
            print(f"generating {args.scans} synthetic scans x {args.frames} frames", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", str(args.scans),
                            "--frames", str(args.frames), "--seed", "0"], check=True, capture_output=True)
        results = [
            local_build("serial", scans, work / "serial", 1, cores, args.scans),
            local_build("workers", scans, work / "workers", args.workers, cores, args.scans),
        ]
        if not args.skip_celery:
            results += [celery_build("celery-1", scans, work, 1, cores, args.scans),
                        celery_build("celery-2", scans, work, 2, cores, args.scans)]
        by_name = {r["name"]: r for r in results}
        ratios = {"workers_vs_serial_speedup": round(by_name["serial"]["wall_s"] / by_name["workers"]["wall_s"], 2)}
        if "celery-2" in by_name:
            ratios["celery_2_vs_1_throughput"] = round(by_name["celery-1"]["wall_s"] / by_name["celery-2"]["wall_s"], 2)
            ratios["celery_2_vs_workers_wall"] = round(by_name["celery-2"]["wall_s"] / by_name["workers"]["wall_s"], 2)
        identical = tables_identical(work / "serial", work / "workers")
        return {"cores": cores, "scans": args.scans, "frames": args.frames, "results": results, "ratios": ratios,
                "serial_and_workers_tables_identical": identical}
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def tables_identical(a: Path, b: Path) -> bool:
    def digests(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "tables").rglob("*.parquet"))}

    return digests(a) == digests(b) and bool(digests(a))


def format_result(r: dict) -> str:
    lines = [f"per-scan phase: {r['scans']} synthetic scans x {r['frames']} frames on {r['cores']} cores",
             f"{'':10} {'wall s':>8} {'CPU s':>8} {'util':>6} {'scans/h':>8}"]
    for f in r["results"]:
        line = f"{f['name']:10} {f['wall_s']:8.1f} {f['cpu_s']:8.1f} {f['utilisation']:6.0%} {f['scans_per_hour']:8.1f}"
        if "worker_cpu_s" in f:
            line += f"   (Celery workers {f['worker_cpu_s']:.1f} CPU-s, daemon + run workers {f['daemon_and_run_workers_cpu_s']:.1f})"
        lines.append(line)
    lines += [f"{k}: {v}" for k, v in r["ratios"].items()]
    lines.append(f"serial and --workers tables byte-identical: {r['serial_and_workers_tables_identical']}")
    if any(f["name"].startswith("celery") for f in r["results"]):
        lines.append("(Celery CPU s: busy time of the whole machine from /proc/stat, neighbours included)")
    return "\n".join(lines)
