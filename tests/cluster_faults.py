"""What every fault test of the cluster tier asserts, once: the fault heals into the complete release, untouched.

A fault test starts the loopback stack with the deployed settings (nothing
shortened for the test), four synthetic scans and a run queue of two, runs
``scan2qa backfill --wait``, strikes once two scan runs have steps in flight
(two more wait in the queue), and then requires:

- exit 0, every scan in the release and ``summary: 4 ok, 0 failed``;
- no release missing a scan was ever ``latest``: ``LatestWatcher`` reads the
  bucket's ``LATEST`` every second from the start, and every version it saw
  holds every scan;
- the tables byte-identical to a fault-free build of the same scans (a local
  ``scan2qa build``, made once per session and shared by the fault tests);
- the complete release out within ``HEAL_BOUND_S`` of the fault (the seconds
  are printed: ``pytest -s``);
- nothing left behind once the stack stopped: no process of the deployment
  (found by its ``DAGSTER_HOME`` in ``/proc/*/environ``), no Postgres data
  folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from deploy.local_cluster import LocalCluster
from tests.test_cluster import deployment_environment, digests, require_services, scan2qa

SCENES, FRAMES = 4, 40
KEYS = [f"synthetic/synth{i:04d}_00" for i in range(SCENES)]
CONCURRENT_RUNS = 2
HEAL_BOUND_S = 600  # issue 40: the complete release within 10 minutes of the fault
TIMEOUT_S = 1800  # the backfill's own --timeout: far above the bound, so a slow heal fails on the bound, not on it


def make_scans(folder: Path, frames: int = FRAMES) -> Path:
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(folder), "--scenes", str(SCENES),
                    "--frames", str(frames), "--seed", "0"], check=True, capture_output=True)
    return folder


def fault_free_build(folder: Path, scans: Path) -> tuple[dict[str, str], str]:
    """Table digests and release version of a local ``scan2qa build`` (no Dagster deployment, no fault) of the scans
    read from the same bucket URI the fault tests' deployment reads (``s3://scan2qa/scans``, on a moto server of
    its own), since the tables record where each scan came from."""

    import yaml
    from fsspec.implementations.local import LocalFileSystem

    with LocalCluster(folder / "s3") as store:
        store.start_s3()
        store.upload(scans, "scans")
        local = folder / "local"
        config = folder / "local.yaml"
        config.write_text(yaml.safe_dump({"scans_root": store.uri("scans"), "output_root": str(local),
                                          "storage_options": store.storage_options}))
        env = {k: v for k, v in store.environment().items()
               if not k.startswith(("DAGSTER_", "SCAN2QA_")) or k == "SCAN2QA_LETTER_KEY"}
        build = scan2qa("build", "--config", str(config), "--workers", "2", env=env)
        printed, _ = build.communicate(timeout=1800)
    assert build.returncode == 0, f"scan2qa build exited {build.returncode}:\n{printed}"
    return digests(LocalFileSystem(), str(local / "tables")), (local / "releases" / "LATEST").read_text().strip()


class LatestWatcher:
    """Every release the bucket's ``LATEST`` named while the test ran: version -> (first seen, its scan keys)."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster
        self.seen: dict[str, tuple[float, frozenset[str]]] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def __enter__(self) -> LatestWatcher:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(30)
        self.read()  # the last word

    def read(self) -> None:
        from pipeline.storage import read_table, upath

        releases = upath(self.cluster.uri("out"), self.cluster.storage_options) / "releases"
        releases.fs.invalidate_cache()
        pointer = releases / "LATEST"
        if not pointer.exists():
            return
        version = pointer.read_text().strip()
        if version and version not in self.seen:
            keys = read_table(releases / version / "tables" / "scans.parquet", "scans")["key"].to_list()
            self.seen[version] = (time.monotonic(), frozenset(keys))

    def loop(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                self.read()
            except Exception:  # noqa: BLE001 - a release being written, or S3 busy: read again in a second
                pass

    def first_complete(self) -> float | None:
        times = [seen for seen, keys in self.seen.values() if keys >= set(KEYS)]
        return min(times) if times else None


def deployment_processes(dagster_home: Path) -> list[tuple[int, str]]:
    """Processes whose environment names this deployment's ``DAGSTER_HOME`` (every service but Postgres and Redis,
    which ``postmaster.pid`` and the port tell)."""
    marker = f"DAGSTER_HOME={dagster_home}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        if environ.parent.name == str(os.getpid()):
            continue  # the test itself (its os.environ names the deployment)
        try:
            if marker in environ.read_bytes().split(b"\0"):
                pid = int(environ.parent.name)
                found.append((pid, (environ.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]))
        except OSError:
            continue
    return found


def assert_nothing_left(cluster: LocalCluster, pg_dir: Path | None, ports: dict[str, int]) -> None:
    from deploy.local_cluster import port_open

    deadline = time.monotonic() + 30  # a SIGKILLed process is reaped by init a moment later
    while deployment_processes(cluster.dagster_home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not deployment_processes(cluster.dagster_home), deployment_processes(cluster.dagster_home)
    assert pg_dir is None or not (pg_dir / "data").exists() or pg_dir == cluster.workdir / "postgres", pg_dir
    assert pg_dir is None or not (pg_dir / "data" / "postmaster.pid").exists(), "Postgres still running"
    assert not [name for name in ("postgres", "redis") if name in ports and port_open(ports[name])], ports


def require_stack():
    require_services()


class FaultRun:
    """One fault test's stack, backfill and verdict (``with FaultRun(tmp_path, monkeypatch, reference) as run:``)."""

    def __init__(self, tmp_path: Path, monkeypatch, reference: tuple[dict[str, str], str], scans: Path):
        self.tmp_path, self.monkeypatch, self.reference, self.scans = tmp_path, monkeypatch, reference, scans
        self.cluster = LocalCluster(tmp_path / "stack")
        self.backfill: subprocess.Popen | None = None
        self.watcher: LatestWatcher | None = None
        self.fault_at: float | None = None
        self.printed = ""

    def __enter__(self) -> FaultRun:
        require_stack()
        cluster = self.cluster
        cluster.start_storage()
        cluster.upload(self.scans, "scans")
        cluster.extra_env["SCAN2QA_MAX_CONCURRENT_RUNS"] = str(CONCURRENT_RUNS)
        cluster.start_worker("w1")
        cluster.start_worker("w2")
        cluster.start_daemon()
        self.env = deployment_environment(cluster, self.monkeypatch)
        self.watcher = LatestWatcher(cluster).__enter__()
        self.backfill = scan2qa("backfill", "--wait", "--timeout", str(TIMEOUT_S), env=self.env)
        return self

    def __exit__(self, *exc) -> None:
        if self.backfill is not None and self.backfill.poll() is None:
            self.backfill.kill()
            self.backfill.wait()
        if self.watcher is not None:
            self.watcher.stopping.set()
        pg_dir, ports = self.cluster.pg_dir, dict(self.cluster.ports)
        self.cluster.stop()
        if exc[0] is None:
            assert_nothing_left(self.cluster, pg_dir, ports)

    def strike(self, fault) -> None:
        """``fault()`` once two scan runs have a step in flight; the fault's clock starts as it begins."""
        import dagster as dg

        with dg.DagsterInstance.get() as instance:
            wait_for_started_steps(instance, CONCURRENT_RUNS, time.monotonic() + 900)
        self.fault_at = time.monotonic()
        fault()

    def finish(self, what: str) -> float:
        """The backfill's verdict and the release's: returns the seconds from the fault to the complete release."""
        printed, _ = self.backfill.communicate(timeout=TIMEOUT_S + 300)
        self.printed = printed
        self.watcher.__exit__(None, None, None)
        print(f"\n{what}: scan2qa backfill --wait exited {self.backfill.returncode}:\n{printed}")
        assert "Traceback" not in printed, printed
        assert self.backfill.returncode == 0, printed
        assert f"summary: {SCENES} ok, 0 failed" in printed, printed
        partial = {v: sorted(set(KEYS) - keys) for v, (_, keys) in self.watcher.seen.items() if not keys >= set(KEYS)}
        assert not partial, f"a release missing scans was latest: {partial}"
        complete = self.watcher.first_complete()
        assert complete is not None, f"no complete release was ever latest: {self.watcher.seen}"
        healed = complete - self.fault_at
        print(f"{what}: complete release latest {healed:.0f} s after the fault")
        assert healed <= HEAL_BOUND_S, f"{what}: the complete release came {healed:.0f} s after the fault"
        self.assert_identical()
        return healed

    def assert_identical(self) -> None:
        from pipeline.storage import upath

        tables, version = self.reference
        bucket = upath(self.cluster.uri("out"), self.cluster.storage_options)
        bucket.fs.invalidate_cache()
        remote = digests(bucket.fs, f"{self.cluster.bucket}/out/tables")
        assert remote == tables, sorted(set(remote.items()) ^ set(tables.items()))[:6]
        assert (bucket / "releases" / "LATEST").read_text().strip() == version


def wait_for_started_steps(instance, count: int, deadline: float) -> None:
    """Until ``count`` scan runs are STARTED and each has sent a step that has not finished: the fault must hit runs
    in the middle, holding their queue slots, while the others wait in the queue."""
    import dagster as dg

    while time.monotonic() < deadline:
        busy = 0
        for run in instance.get_runs(filters=dg.RunsFilter(job_name="scan_job_celery",
                                                           statuses=[dg.DagsterRunStatus.STARTED])):
            started = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START).records
            ended = instance.get_records_for_run(
                run.run_id, of_type={dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}).records
            busy += len(started) > len(ended)
        if busy >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{count} scan runs were never seen with a step running at once")


@pytest.fixture(scope="session")
def fault_scans(tmp_path_factory) -> Path:
    return make_scans(tmp_path_factory.mktemp("fault-scans") / "scans")


@pytest.fixture(scope="session")
def fault_free(tmp_path_factory, fault_scans) -> tuple[dict[str, str], str]:
    """The fault-free build every fault test's tables must equal, byte for byte (built once per session; or the
    output root ``SCAN2QA_FAULT_FREE_OUTPUT`` names, a build of the same scans made earlier by this fixture)."""
    from fsspec.implementations.local import LocalFileSystem

    earlier = os.environ.get("SCAN2QA_FAULT_FREE_OUTPUT")
    if earlier:
        local = Path(earlier)
        return digests(LocalFileSystem(), str(local / "tables")), (local / "releases" / "LATEST").read_text().strip()
    return fault_free_build(tmp_path_factory.mktemp("fault-free"), fault_scans)
