"""The Dagster path, with no ``scan2qa build``: the daemon's sensors and automation alone publish every release.

A real ``dagster-daemon`` on a scratch instance loads the code location
(``workspace.yaml``). Scans dropped into the scans root are found by
``scan_discovery`` and built; the automation condition sensor then builds the
dataset-wide assets. Breaking one scan's mesh makes its rerun fail: the next
automatic release leaves it out and names it, with its error, in the manifest
and the report. Repairing it brings it back; removing a scan folder takes it out
of the next release; one asset of a partition rebuilt alone is followed by automation's rebuild of the
assets downstream of it, and the next release holds the scan. Editing the verdicts file alone
(``verdicts_watch``) leads to a release that applies the verdict. Every step
waits on the instance or the release pointer, never on a fixed sleep.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.demo_instance import instance_yaml
from deploy.local_cluster import stop_process_group

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_long]  # the daemon and its runs, minutes: make test-cluster-long

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCENES, FRAMES = 3, 24
BROKEN = "synthetic/synth0001_00"  # the synthetic scans' keys
INTERVAL = 5  # SCAN2QA_SENSOR_INTERVAL for this test


# A partition's scan_job run, of one asset (``sys.argv[2]``) or of all, in a process of its own with the
# deployment's environment, as the UI's Materialize does; prints the run id.
RERUN = """
import sys
import dagster as dg
from assets.definitions import defs
with dg.DagsterInstance.get() as instance:
    selection = [dg.AssetKey(name) for name in sys.argv[2:]] or None
    result = defs.resolve_job_def("scan_job").execute_in_process(
        instance=instance, partition_key=sys.argv[1], asset_selection=selection)
    assert result.success
    print(result.run_id)
"""


def rerun(env: dict, key: str, *assets: str) -> str:
    done = subprocess.run([sys.executable, "-c", RERUN, key, *assets], cwd=REPO, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def wait_for(predicate, what: str, timeout: float, daemon: subprocess.Popen, log: Path, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise AssertionError(f"dagster-daemon exited ({daemon.returncode}) while waiting for {what}:\n"
                                 + log.read_text(errors="replace")[-3000:])
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n" + log.read_text(errors="replace")[-3000:])


class Release:
    """The releases under an output root: a local ``Path`` or a ``UPath`` in a bucket (the Celery deployment)."""

    def __init__(self, out):
        self.releases = out / "releases"

    def latest(self) -> str | None:
        try:
            return (self.releases / "LATEST").read_text().strip()
        except FileNotFoundError:
            return None

    def manifest(self, version: str) -> dict:
        return json.loads((self.releases / version / "manifest.json").read_text())

    def report(self, version: str) -> str:
        return (self.releases / version / "report" / "index.html").read_text()

    def table(self, version: str, name: str):
        import polars as pl

        return pl.read_parquet(io.BytesIO((self.releases / version / "tables" / f"{name}.parquet").read_bytes()))

    def scans(self, version: str) -> set[str]:
        return set(self.table(version, "scans")["key"])

    def qa_ids(self, version: str) -> set[str]:
        return set(self.table(version, "qa")["id"])


def assert_names_failed_scan(release: Release, version: str, key: str, error_part: str, scenes: int) -> None:
    """The release leaves ``key`` out and names it, with its error, in the manifest and the report."""
    manifest = release.manifest(version)
    failed = {f["key"]: f for f in manifest["checks"]["excluded_scans"]["failed_scans"]}
    assert set(failed) == {key}, failed
    assert failed[key]["state"] == "failed" and error_part in failed[key]["error"], failed
    assert key not in release.scans(version) and len(release.scans(version)) == scenes - 1
    report = release.report(version)
    assert key in report and error_part in report


def holds_every_scan(release: Release, scenes: int):
    """The latest release once it holds ``scenes`` scans and names no failed one."""
    def check():
        latest = release.latest()
        if latest is None or len(release.scans(latest)) != scenes:
            return None
        return latest if release.manifest(latest)["checks"]["excluded_scans"]["failed_scans"] == [] else None
    return check


def excludes(release: Release, key: str):
    """The latest release once it names ``key`` among its failed scans."""
    def check():
        latest = release.latest()
        if latest is None:
            return None
        failed = release.manifest(latest)["checks"]["excluded_scans"]["failed_scans"]
        return latest if key in {f["key"] for f in failed} else None
    return check


def new_release_after(release: Release, previous: str | None, moment: float):
    """A release published after ``moment`` (versions are content hashes: the same content keeps its name)."""
    def check():
        latest = release.latest()
        if latest is None:
            return None
        manifest = release.releases / latest / "manifest.json"
        if latest != previous or manifest.stat().st_mtime > moment:
            return latest
        return None
    return check


@pytest.fixture
def daemon_env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SCAN2QA_"))}
    env.update({
        "DAGSTER_HOME": str(home),
        "SCAN2QA_SCANS": str(tmp_path / "scans"),
        "SCAN2QA_OUT": str(tmp_path / "out"),
        "SCAN2QA_SENSOR_INTERVAL": str(INTERVAL),
        "SCAN2QA_THREADS": "1",
        "GX_ANALYTICS_ENABLED": "false",
        "PYTHONUNBUFFERED": "1",
    })
    return env


def test_sensor_and_automation_alone_publish_exclude_and_restore(tmp_path, daemon_env, monkeypatch):
    import dagster as dg

    staging = tmp_path / "staging"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(staging), "--scenes", str(SCENES),
                    "--frames", str(FRAMES), "--seed", "0"], check=True, capture_output=True, cwd=REPO)
    shutil.copytree(staging, tmp_path / "scans")
    monkeypatch.setenv("DAGSTER_HOME", daemon_env["DAGSTER_HOME"])
    with dg.DagsterInstance.get():
        pass  # the SQLite storage is created once here, not by the daemon and its code server racing each other
    log = tmp_path / "daemon.log"
    with open(log, "wb") as handle:
        daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")],
                                  cwd=REPO, env=daemon_env, stdout=handle, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    release = Release(tmp_path / "out")
    try:
        with dg.DagsterInstance.get() as instance:
            # 1. Three scans dropped into the root: discovered, built, released, with nothing else done.
            first = wait_for(holds_every_scan(release, SCENES), "a release of all three scans", 1200, daemon, log)
            kept_ids = release.qa_ids(first)

            # 2. A reviewer rejects one question by editing the verdicts file only.
            rejected = sorted(kept_ids)[0]
            verdicts = tmp_path / "out" / "reviews" / "verdicts.csv"
            verdicts.parent.mkdir(parents=True, exist_ok=True)
            moment = time.time()
            verdicts.write_text(f"qa_id,verdict,note,reviewer\n{rejected},reject,ambiguous wording,ana\n")
            reviewed = wait_for(new_release_after(release, first, moment), "a release applying the verdict",
                                600, daemon, log)
            assert rejected not in release.qa_ids(reviewed)
            assert rejected in release.manifest(reviewed)["checks"]["rejected_by_reviewers"]
            assert rejected in release.report(reviewed)

            # 3. One scan's mesh breaks: its rerun fails and the next release leaves it out, naming the error.
            mesh = tmp_path / "scans" / "synth0001_00" / "synth0001_00_vh_clean_2.ply"
            good = mesh.read_bytes()
            moment = time.time()
            mesh.write_bytes(good[: len(good) // 3])
            excluded = wait_for(new_release_after(release, reviewed, moment), "a release without the broken scan",
                                600, daemon, log)
            assert_names_failed_scan(release, excluded, BROKEN, "_vh_clean_2.ply", SCENES)
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": BROKEN}))
            assert runs[0].status == dg.DagsterRunStatus.FAILURE, [r.status for r in runs]

            # 4. Repaired: the next automatic release holds it again.
            moment = time.time()
            mesh.write_bytes(good)
            restored = wait_for(new_release_after(release, excluded, moment), "a release with the repaired scan",
                                600, daemon, log)
            wait_for(lambda: BROKEN in release.scans(release.latest()), "the repaired scan released", 300,
                     daemon, log)
            restored = release.latest()
            assert release.manifest(restored)["checks"]["excluded_scans"]["failed_scans"] == []

            # 5. A scan folder leaves the root: its partition goes and the next automatic release leaves it out.
            removed = "synthetic/synth0002_00"
            shutil.move(tmp_path / "scans" / "synth0002_00", tmp_path / "withdrawn")
            without = wait_for(lambda: (v := release.latest()) and removed not in release.scans(v) and v,
                               "a release without the removed scan", 600, daemon, log)
            assert release.scans(without) == release.scans(restored) - {removed}
            assert release.manifest(without)["checks"]["excluded_scans"]["failed_scans"] == []
            assert removed not in instance.get_dynamic_partitions("scans")

            # 6. One asset of a partition rebuilt alone (as from its asset page): automation rebuilds that
            # partition's assets downstream of it (assets.automation.scan_automation) and the release waits for
            # them, so the next automatic release holds the scan instead of leaving it out as stale.
            rebuilt = "synthetic/synth0000_00"
            moment = time.time()
            alone = rerun(daemon_env, rebuilt, "visibility")
            # The healed scan's tables are the bytes they were, so the release has the same content and version
            # (a version is never rewritten): what shows the release step ran again is its materialization.
            def released_after_rerun():
                event = instance.get_latest_materialization_event(dg.AssetKey("release"))
                return event is not None and event.timestamp > moment and release.latest()

            back = wait_for(released_after_rerun, "a release after the partial rerun", 600, daemon, log)
            assert release.scans(back) == release.scans(without)
            assert release.manifest(back)["checks"]["excluded_scans"]["failed_scans"] == []
            # Nobody launched a run but the daemon and the test's rerun: every other run came from a sensor or
            # automation.
            launched_by = {r.tags.get("dagster/sensor_name") for r in instance.get_runs() if r.run_id != alone}
            assert launched_by <= {"scan_discovery", "dataset_automation"}, launched_by
    finally:
        stop_process_group(daemon, timeout=60)
