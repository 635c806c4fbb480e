"""``scan2qa bench latency``: how long the demo instance takes from a new scan (or a verdict) to its release.

Issue 23 asks for at most 60 s of waiting beyond the builds themselves from a
scan dropped into the scans root to the release that holds it, on the demo
instance. This drives exactly that instance: ``runs.demo_instance``'s
``dagster.yaml`` (queued runs, half the cores at once, one dataset-wide run at a
time), a first ``scan2qa build`` into it (what ``make demo`` does), then
``dagster-daemon`` (what ``make ui``'s ``dagster dev`` runs) with
``SCAN2QA_SENSOR_INTERVAL`` set. One more scan folder is renamed into the scans
root (a rename, so discovery never sees it half copied), and the clock runs
until ``releases/LATEST`` names a release holding it. Then a reviewer verdict
rejects one question by editing the verdicts file alone, and the clock runs
until a release applies it.

The total is split with Dagster's own run records (create, start and end
times): the scan run's and the release run's own work are "building"; the rest
(discovery tick, the queue and the launcher starting each run process,
automation's tick) is "waiting", the figure the issue bounds. The waits depend
on the machine's load (a run process imports the code location); repeat the
bench before trusting a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=2, help="scans built before the daemon starts (default 2)")
    parser.add_argument("--frames", type=int, default=24, help="frames per synthetic scan (default 24)")
    parser.add_argument("--interval", type=int, default=5, help="SCAN2QA_SENSOR_INTERVAL in seconds (default 5)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds to wait for each release (default 1200)")
    parser.add_argument("--work", help="working folder (default: a temporary one, removed afterwards)")


def run_records(instance, job_name: str | None = None, sensor: str | None = None):
    import dagster as dg

    tags = {"dagster/sensor_name": sensor} if sensor else {}
    return instance.get_run_records(filters=dg.RunsFilter(job_name=job_name, tags=tags))


def latency(instance, landed: float, released: float, scan_keys: set[str],
            job_name: str = "scan_job") -> tuple[dict[str, float | int], str]:
    """Seconds from files landing (``landed``, epoch) to the release pointer naming them (``released``), split into
    building and waiting: the ``job_name`` runs of ``scan_keys`` created after ``landed`` and the automation run that
    wrote the pointer (the last one started by then; automation may have run a smaller selection first). Returns
    the figures and that run's id."""
    scans = [r for r in run_records(instance, job_name=job_name)
             if r.dagster_run.tags.get("dagster/partition") in scan_keys and r.create_timestamp.timestamp() >= landed]
    last_built = max(r.end_time for r in scans)
    # Automation reacts to the last materialization, which lands a few seconds before its run's end is recorded:
    # the release run may be created before ``last_built`` (seen on a loaded machine), never before the scans ran.
    first_started = min(r.start_time for r in scans)
    automation = [r for r in run_records(instance, sensor="dataset_automation")
                  if r.create_timestamp.timestamp() >= first_started and r.start_time and r.start_time <= released]
    dataset = max(automation, key=lambda r: r.create_timestamp)
    building = last_built - first_started
    releasing = min(dataset.end_time or released, released) - dataset.start_time
    total = released - landed
    figures = {
        "total": total,
        "discovery (landed -> first scan run created)": min(r.create_timestamp.timestamp() for r in scans) - landed,
        "scan runs queued and launched": first_started - min(r.create_timestamp.timestamp() for r in scans),
        "scan builds": building,
        "automation (last scan run ended -> release run created)":
            max(0.0, dataset.create_timestamp.timestamp() - last_built),
        "automation runs": len(automation),
        "release run queued and launched": dataset.start_time - dataset.create_timestamp.timestamp(),
        "release run": releasing,
        "waiting beyond the builds": total - building - releasing,
    }
    return figures, dataset.dagster_run.run_id


def verdict_latency(instance, edited: float, released: float) -> dict[str, float | int]:
    """Seconds from the verdicts file's edit to the release applying it, split the same way."""
    automation = [r for r in run_records(instance, sensor="dataset_automation")
                  if r.create_timestamp.timestamp() >= edited and r.start_time and r.start_time <= released]
    dataset = max(automation, key=lambda r: r.create_timestamp)
    releasing = min(dataset.end_time or released, released) - dataset.start_time
    total = released - edited
    return {
        "total": total,
        "observation and automation (edit -> release run created)": dataset.create_timestamp.timestamp() - edited,
        "automation runs": len(automation),
        "release run queued and launched": dataset.start_time - dataset.create_timestamp.timestamp(),
        "release run": releasing,
        "waiting beyond the builds": total - releasing,
    }


def describe(what: str, figures: dict[str, float | int]) -> str:
    return f"latency, {what}: " + "; ".join(
        f"{name} {value:.1f} s" if isinstance(value, float) else f"{name} {value}" for name, value in figures.items())


class Releases:
    """``<out>/releases``: the pointer and what each release holds, read from the files the release step writes."""

    def __init__(self, out: Path):
        self.root = out / "releases"

    def latest(self) -> str | None:
        try:
            return (self.root / "LATEST").read_text().strip() or None
        except FileNotFoundError:
            return None

    def scans(self, version: str) -> set[str]:
        import polars as pl

        return set(pl.read_parquet(self.root / version / "tables" / "scans.parquet", columns=["key"])["key"])

    def qa_ids(self, version: str) -> list[str]:
        import polars as pl

        return sorted(pl.read_parquet(self.root / version / "tables" / "qa.parquet", columns=["id"])["id"])

    def rejected(self, version: str) -> list[str]:
        manifest = json.loads((self.root / version / "manifest.json").read_text())
        return manifest["checks"].get("rejected_by_reviewers", [])


def wait_until(predicate, what: str, timeout: float, daemon: subprocess.Popen, log: Path, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"dagster-daemon exited ({daemon.returncode}) while waiting for {what}; see {log}")
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise RuntimeError(f"{what}: not within {timeout:.0f} s; see {log}")


def environment(work: Path, interval: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SCAN2QA_"))}
    env.update({"DAGSTER_HOME": str(work / "home"), "SCAN2QA_SCANS": str(work / "scans"),
                "SCAN2QA_OUT": str(work / "out"), "SCAN2QA_SENSOR_INTERVAL": str(interval),
                "GX_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    return env


def run_latency_bench(args: argparse.Namespace) -> dict:
    import dagster as dg

    from runs.demo_instance import default_max_runs, write_demo_instance
    from deploy.local_cluster import stop_process_group

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="scan2qa-latency-"))
    staging, scans, incoming = work / "staging", work / "scans", work / "incoming"
    env = environment(work, args.interval)
    try:
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        say(f"generating {args.scans + 1} synthetic scans x {args.frames} frames")
        subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(staging),
                        "--scenes", str(args.scans + 1), "--frames", str(args.frames), "--seed", "0"],
                       check=True, capture_output=True, cwd=REPO)
        folders = sorted(p for p in staging.iterdir() if p.is_dir())
        scans.mkdir(parents=True)
        for folder in folders[:-1]:
            shutil.copytree(folder, scans / folder.name)
        for root_file in (p for p in staging.iterdir() if p.is_file()):  # the label map the scans' labels name
            shutil.copy2(root_file, scans / root_file.name)
        new_folder = folders[-1]
        new_key = f"synthetic/{new_folder.name}"
        write_demo_instance(work / "home", default_max_runs())
        say(f"scan2qa build of {args.scans} scans into the demo instance (as make demo)")
        built = subprocess.run([sys.executable, "-m", "scan2qa", "build"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if built.returncode != 0:
            raise RuntimeError("the first scan2qa build failed:\n" + built.stdout[-3000:])
        releases = Releases(work / "out")
        before = releases.latest()
        log = work / "daemon.log"
        with open(log, "wb") as handle:
            daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run",
                                       "-w", str(REPO / "workspace.yaml")], cwd=REPO, env=env, stdout=handle,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        try:
            with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
                # The demo at rest: the daemon's sensors have ticked over the built scans and requested nothing.
                wait_until(lambda: len(instance.get_daemon_heartbeats()) >= 3, "the daemon's heartbeats",
                           args.timeout, daemon, log)
                time.sleep(3 * args.interval)
                say(f"dropping {new_folder.name} into the scans root")
                shutil.copytree(new_folder, incoming / new_folder.name)
                landed = time.time()
                os.rename(incoming / new_folder.name, scans / new_folder.name)
                version = wait_until(lambda: (v := releases.latest()) and v != before and new_key in releases.scans(v)
                                     and v, "a release holding the new scan", args.timeout, daemon, log)
                released = time.time()
                new_scan, _ = latency(instance, landed, released, {new_key})
                say(describe("a new scan", new_scan))

                rejected = releases.qa_ids(version)[0]
                verdicts = work / "out" / "reviews" / "verdicts.csv"
                verdicts.parent.mkdir(parents=True, exist_ok=True)
                edited = time.time()
                verdicts.write_text(f"qa_id,verdict,note,reviewer\n{rejected},reject,latency bench,bench\n")
                wait_until(lambda: (v := releases.latest()) and rejected in releases.rejected(v),
                           "a release applying the verdict", args.timeout, daemon, log)
                verdict = verdict_latency(instance, edited, time.time())
                say(describe("a verdict", verdict))
        finally:
            stop_process_group(daemon, timeout=60)
        return {"scans_before": args.scans, "frames": args.frames, "sensor_interval_s": args.interval,
                "max_concurrent_runs": default_max_runs(), "load_average_1m": round(os.getloadavg()[0], 2),
                "new_scan": {k: round(v, 1) for k, v in new_scan.items()},
                "verdict": {k: round(v, 1) for k, v in verdict.items()}}
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def format_result(r: dict) -> str:
    lines = [f"demo instance ({r['scans_before']} scans built, {r['frames']} frames, sensor interval "
             f"{r['sensor_interval_s']} s, {r['max_concurrent_runs']} run(s) at once; load {r['load_average_1m']})"]
    lines.append(describe("a new scan -> its release", r["new_scan"]))
    lines.append(describe("a verdicts edit -> its release", r["verdict"]))
    return "\n".join(lines)
