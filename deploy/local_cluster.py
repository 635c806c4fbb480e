"""The production stack on one machine, every service real and on loopback: for trying it and for its tests.

A deployment runs Postgres (Dagster's run, event and schedule storage), Redis
(the Celery broker and result backend), an S3-compatible object store, Celery
workers, the Dagster daemon (queued runs, sensors, backfills) and the
webserver. ``LocalCluster`` starts each of those as a child process on free
loopback ports, with its data in one working folder, and stops everything it
started on exit: Postgres and Redis from the Debian packages (``postgresql``,
``redis-server``), moto's S3 server from the ``moto[server]`` package, the
rest from this project's environment. Nothing here is scan2qa logic: the same
processes, started by hand on several machines, are the deployment docs/scaling.md
describes.

Fault tests break it on purpose, each helper doing what the named failure does
and nothing more, and each service coming back where it was (same port, same
data folder), so the processes that outlived the fault reconnect by themselves:

- ``kill_daemon()``: the daemon process alone dies (its code server and the run
  workers that server spawned go on, orphaned); ``restart_daemon()`` starts a
  new one.
- ``kill_daemon_and_run_workers()``: the daemon's machine is lost: the daemon,
  its code server and every run worker die at once (SIGKILL); returns the run
  workers' process ids.
- ``run_worker_pids()``: the run workers alive now (``DefaultRunLauncher``'s are
  ``multiprocessing`` children of the daemon's code server; other launchers'
  are ``dagster api execute_run`` processes).
- ``stop_redis()`` / ``start_redis()``: the broker goes away and comes back on
  the same port; it keeps nothing on disk (as started here), so queued steps
  and stored results are gone with it.
- ``stop_postgres(mode)`` / ``start_postgres()`` / ``restart_postgres(down_seconds,
  mode)``: the database stops (``pg_ctl -m immediate`` by default, a crash;
  ``"fast"`` a clean stop) and comes back on the same port with the same data.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

LETTER_KEY_VARIABLE = "SCAN2QA_LETTER_KEY"  # pipeline.qa.letter_key.ENV_VAR

REPO = Path(__file__).resolve().parents[1]
DAGSTER_YAML = REPO / "deploy" / "dagster.yaml"
WORKSPACE = REPO / "workspace.yaml"
BIN = Path(sys.executable).parent


class ServiceError(RuntimeError):
    """A service did not start; the message names it and the tail of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin(name: str) -> str:
    """A Postgres server binary from Debian's packages (not on PATH there), or from PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    path = shutil.which(name)
    if not path:
        raise ServiceError(f"{name}: not found; install Debian's postgresql package (apt-get install postgresql)")
    return path


def stop_process_group(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the session ``process`` leads (started with ``start_new_session``), SIGKILL it after ``timeout``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until(check, what: str, timeout: float, log: Path | None = None, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServiceError(f"{what}: exited with status {process.returncode}{log_tail(log)}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise ServiceError(f"{what}: not ready after {timeout:.0f} s{log_tail(log)}")


def log_tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return "\n  " + "\n  ".join(tail) if tail else ""


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _process_table() -> tuple[dict[int, int], dict[int, float], dict[int, int]]:
    """{pid: parent pid}, {pid: CPU seconds incl. reaped children}, {pid: process group} of every process now."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    groups: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        groups[child] = int(fields[2])
        cpu[child] = sum(int(v) for v in fields[11:15]) / ticks  # utime, stime, cutime, cstime
    return parents, cpu, groups


def process_tree(pid: int, parents: dict[int, int] | None = None) -> set[int]:
    """A process and its live descendants."""
    parents = parents if parents is not None else _process_table()[0]
    tree, frontier = {pid}, [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current and child not in tree:
                tree.add(child)
                frontier.append(child)
    return tree


def process_tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a live process, its live descendants and the descendants they have reaped (``/proc/*/stat``)."""
    parents, cpu, _ = _process_table()
    return sum(cpu.get(p, 0.0) for p in process_tree(pid, parents))


def command_line(pid: int) -> list[str]:
    try:
        return [part.decode(errors="replace") for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]
    except OSError:
        return []


def is_run_worker(argv: list[str]) -> bool:
    """A Dagster run worker: ``dagster api execute_run`` (most launchers) or the ``multiprocessing`` child the
    code server spawns for ``DefaultRunLauncher`` (the server's only spawned children besides its resource
    tracker)."""
    line = " ".join(argv)
    if "api execute_run" in line or "api resume_run" in line:
        return True
    return "multiprocessing.spawn" in line and "--multiprocessing-fork" in line


def kill_now(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    log: Path


@dataclass
class LocalCluster:
    """Start with ``with LocalCluster(workdir) as cluster:``; every process it started is stopped on exit."""

    workdir: Path
    bucket: str = "scan2qa"
    services: dict[str, Service] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    pg_dir: Path | None = None
    # Process groups of processes that outlived the service that started them (a killed daemon's code server and
    # run workers): killed in stop(), so a fault test leaves nothing behind.
    orphan_groups: set[int] = field(default_factory=set)

    def __post_init__(self):
        self.workdir = Path(self.workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.dagster_home = self.workdir / "dagster_home"
        self.dagster_home.mkdir(exist_ok=True)
        shutil.copy(DAGSTER_YAML, self.dagster_home / "dagster.yaml")

    # --- lifecycle -------------------------------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop in reverse order of start: workers and Dagster first, storage last."""
        for name in reversed(list(self.services)):
            self._stop_service(self.services.pop(name))
        for group in self.orphan_groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.orphan_groups.clear()
        if self.pg_dir is not None and (self.pg_dir / "data" / "postmaster.pid").exists():
            self._as_postgres([postgres_bin("pg_ctl"), "-D", str(self.pg_dir / "data"), "-m", "fast", "-w", "stop"],
                              check=False)
        if self.pg_dir is not None and self.pg_dir != self.workdir / "postgres":
            shutil.rmtree(self.pg_dir, ignore_errors=True)
            self.pg_dir = None

    def _stop_service(self, service: Service, timeout: float = 20) -> None:
        stop_process_group(service.process, timeout)

    def cpu_seconds(self, name_prefix: str) -> float:
        """CPU seconds used so far by the services whose names start with ``name_prefix`` (and their children)."""
        return sum(process_tree_cpu_seconds(s.process.pid) for n, s in self.services.items() if n.startswith(name_prefix))

    def kill(self, name: str) -> None:
        """SIGKILL a service and every process it started, as a machine that loses power would."""
        service = self.services.pop(name)
        os.killpg(service.process.pid, signal.SIGKILL)
        service.process.wait()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Service:
        log = self.logs / f"{name}.log"
        handle = open(log, "ab")
        process = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env or self.environment(), cwd=cwd or REPO, start_new_session=True,
        )
        handle.close()
        service = Service(name, process, log)
        self.services[name] = service
        return service

    # --- storage services --------------------------------------------------------------------------------------------

    @staticmethod
    def _running_as_root() -> bool:
        return os.geteuid() == 0

    def _as_postgres(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Postgres refuses to run as root: as root, its commands run as the ``postgres`` user."""
        if self._running_as_root():
            argv = ["runuser", "-u", "postgres", "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise ServiceError(f"{' '.join(argv)}: exit {result.returncode}: {(result.stderr or result.stdout).strip()}")
        return result

    def start_postgres(self) -> None:
        """A fresh database cluster, or the stopped one again (same data, same port); as root its folder sits
        outside ``workdir`` (often a 0700 folder of root's)."""
        if self.pg_dir is None:
            if self._running_as_root():
                self.pg_dir = Path(tempfile.mkdtemp(prefix="scan2qa-postgres-"))
                os.chmod(self.pg_dir, 0o755)
                shutil.chown(self.pg_dir, "postgres", "postgres")
            else:
                self.pg_dir = self.workdir / "postgres"
                self.pg_dir.mkdir(exist_ok=True)
        data = self.pg_dir / "data"
        if not (data / "PG_VERSION").exists():
            self._as_postgres([postgres_bin("initdb"), "-D", str(data), "-U", "dagster", "--auth=trust", "-E", "UTF8"])
        port = self.ports.setdefault("postgres", free_port())
        self._as_postgres([
            postgres_bin("pg_ctl"), "-D", str(data), "-l", str(self.pg_dir / "postgres.log"), "-w", "-t", "60", "start",
            "-o", f"-h 127.0.0.1 -p {port} -k {self.pg_dir} -c fsync=off -c max_connections=200",
        ])
        self._as_postgres([postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "dagster"],
                          check=False)

    def stop_postgres(self, mode: str = "immediate") -> None:
        """Stop the database: ``immediate`` (default: open connections break, as when its machine is lost; the next
        start replays the WAL) or ``fast`` (clients disconnected, clean shutdown). ``start_postgres()`` brings it
        back with the same data on the same port."""
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"pg_ctl stop mode {mode!r}: expected smart, fast or immediate")
        if self.pg_dir is None:
            raise ServiceError("postgres: not started")
        self._as_postgres([postgres_bin("pg_ctl"), "-D", str(self.pg_dir / "data"), "-m", mode, "-w", "stop"])

    def restart_postgres(self, down_seconds: float = 0.0, mode: str = "immediate") -> None:
        """``stop_postgres(mode)``, ``down_seconds`` with no database, then ``start_postgres()``."""
        self.stop_postgres(mode)
        time.sleep(down_seconds)
        self.start_postgres()

    def stop_redis(self) -> None:
        """Stop Redis (SIGTERM); its port stays this cluster's. It keeps nothing on disk (``--save ""``), so the
        broker's queued steps and the stored results vanish under the workers; ``start_redis()`` starts an empty
        one on the same port."""
        self._stop_service(self.services.pop("redis"))

    def start_redis(self) -> None:
        port = self.ports.setdefault("redis", free_port())
        server = shutil.which("redis-server")
        if not server:
            raise ServiceError("redis-server: not found; install Debian's redis-server package")
        service = self._spawn("redis", [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                        "--appendonly", "no", "--dir", str(self.workdir)])
        wait_until(lambda: port_open(port), "redis", 30, service.log, service.process)

    def start_s3(self) -> None:
        port = self.ports.setdefault("s3", free_port())
        service = self._spawn("s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)])
        wait_until(lambda: port_open(port), "moto S3 server", 60, service.log, service.process)
        from pipeline.storage import upath

        upath(f"s3://{self.bucket}", self.storage_options).fs.mkdir(self.bucket)

    def start_storage(self) -> None:
        self.start_postgres()
        self.start_redis()
        self.start_s3()

    # --- the environment every scan2qa / Dagster / Celery process of the deployment shares ---------------------------

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def storage_options(self) -> dict:
        return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": self.s3_endpoint}}

    def uri(self, path: str) -> str:
        return f"s3://{self.bucket}/{path}"

    def upload(self, local: Path, path: str) -> str:
        """Copy a local folder's files under ``path`` in the bucket (one PUT each); returns its URI."""
        from pipeline.storage import upath

        target = upath(self.uri(path), self.storage_options)
        files = [f for f in sorted(Path(local).rglob("*")) if f.is_file()]
        target.fs.put([str(f) for f in files], [f"{self.bucket}/{path}/{f.relative_to(local).as_posix()}" for f in files])
        return self.uri(path)

    def environment(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DAGSTER_", "SCAN2QA_"))}
        env.update({
            "DAGSTER_HOME": str(self.dagster_home),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "GX_ANALYTICS_ENABLED": "false",
            "SCAN2QA_EXECUTOR": "celery",
            "SCAN2QA_AUTOMATION": "stopped",
            "SCAN2QA_MAX_CONCURRENT_RUNS": "4",
        })
        if "postgres" in self.ports:
            env.update({
                "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(self.ports["postgres"]),
                "DAGSTER_PG_USER": "dagster", "DAGSTER_PG_PASSWORD": "", "DAGSTER_PG_DB": "dagster",
            })
        if "redis" in self.ports:
            env["SCAN2QA_CELERY_BROKER"] = f"redis://127.0.0.1:{self.ports['redis']}/0"
            env["SCAN2QA_CELERY_BACKEND"] = f"redis://127.0.0.1:{self.ports['redis']}/1"
        if "s3" in self.ports:
            env.update({
                "SCAN2QA_SCANS": self.uri("scans"),
                "SCAN2QA_OUT": self.uri("out"),
                "SCAN2QA_STORAGE_OPTIONS": json.dumps(self.storage_options),
            })
        if os.environ.get(LETTER_KEY_VARIABLE):
            # One deployment, one letter key: every process that places options holds the same secret (else the
            # output root's key file serves them all). Tests compare the cluster's tables with a local build's.
            env[LETTER_KEY_VARIABLE] = os.environ[LETTER_KEY_VARIABLE]
        env.update(self.extra_env)
        env.update(overrides)
        return env

    # --- Dagster and Celery processes --------------------------------------------------------------------------------

    def start_worker(self, name: str, threads: int = 1, **env: str) -> Service:
        """One Celery worker process taking one step at a time, as docs/scaling.md's worker command starts it."""
        service = self._spawn(
            f"worker-{name}",
            [str(BIN / "celery"), "-A", "runs.celery_worker", "worker", "-n", f"{name}@%h", "--concurrency", "1",
             "-Q", "dagster", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
            env=self.environment(SCAN2QA_THREADS=str(threads), **env),
        )
        wait_until(lambda: "ready." in service.log.read_text(errors="replace"), f"celery worker {name}", 120,
                   service.log, service.process)
        return service

    def dagster(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A ``dagster`` CLI command against this deployment's instance and workspace."""
        result = subprocess.run([str(BIN / "dagster"), *args], capture_output=True, text=True,
                                env=self.environment(), cwd=REPO)
        if check and result.returncode != 0:
            raise ServiceError(f"dagster {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()[-2000:]}")
        return result

    def start_daemon(self) -> Service:
        log = self.logs / "daemon.log"
        offset = log.stat().st_size if log.exists() else 0  # a restarted daemon appends to the same log

        def ready() -> bool:
            with open(log, "rb") as handle:
                handle.seek(offset)
                return b"QueuedRunCoordinatorDaemon" in handle.read()

        service = self._spawn("daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(WORKSPACE)])
        wait_until(ready, "dagster-daemon", 120, service.log, service.process)
        return service

    def restart_daemon(self) -> Service:
        """Stop the daemon if one runs (SIGTERM: it stops its code server, which waits for its runs), start a new
        one. After ``kill_daemon()`` this only starts."""
        if "daemon" in self.services:
            self._stop_service(self.services.pop("daemon"), timeout=60)
        return self.start_daemon()

    def kill_daemon(self) -> None:
        """SIGKILL the daemon process alone, as when it crashes: its code server and run workers go on (the server
        exits once its runs end and no daemon heartbeats it); ``stop()`` still kills them if they are left."""
        service = self.services.pop("daemon")
        self.orphan_groups.add(os.getpgid(service.process.pid))
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.wait()

    def run_worker_pids(self) -> list[int]:
        """Run workers alive now under the daemon or left by a killed one (see ``is_run_worker``)."""
        parents, _, groups = _process_table()
        roots = {s.process.pid for n, s in self.services.items() if n == "daemon"}
        roots |= {pid for pid, group in groups.items() if group in self.orphan_groups}
        tree = set().union(*(process_tree(pid, parents) for pid in roots)) if roots else set()
        return sorted(pid for pid in tree if is_run_worker(command_line(pid)))

    def kill_daemon_and_run_workers(self) -> list[int]:
        """The daemon's machine lost: SIGKILL the daemon, its code server and every run worker at once (whatever
        process group they are in); returns the run workers' pids, so a test can tell the fault hit runs."""
        workers = self.run_worker_pids()
        service = self.services.pop("daemon", None)
        doomed = set(workers)
        if service is not None:
            doomed |= process_tree(service.process.pid)
        for group in self.orphan_groups:
            doomed |= {pid for pid, g in _process_table()[2].items() if g == group}
        kill_now(sorted(doomed))
        if service is not None:
            try:
                os.killpg(service.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            service.process.wait()
        return workers

    def start_webserver(self) -> Service:
        port = self.ports.setdefault("webserver", free_port())
        service = self._spawn("webserver", [str(BIN / "dagster-webserver"), "-w", str(WORKSPACE), "-h", "127.0.0.1",
                                            "-p", str(port)])

        def ready() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
                return response.status == 200

        wait_until(ready, "dagster-webserver", 180, service.log, service.process)
        return service

    @property
    def webserver_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['webserver']}"
