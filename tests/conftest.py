from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# One letter key for the whole session, set at import so subprocesses, Dagster workers and the daemon inherit it:
# many tests compare builds in different output folders, each of which would otherwise make its own secret key.
TEST_LETTER_KEY = "5ca2a0" * 5 + "00"
os.environ["SCAN2QA_LETTER_KEY"] = TEST_LETTER_KEY


@pytest.fixture(autouse=True)
def serial_builds(monkeypatch):
    """``scan2qa build`` in tests runs its partitions in the test process unless a test asks for workers.

    Many tests narrow the asset graph with monkeypatch, which spawned worker processes would not see, and
    pytest-xdist already keeps both cores busy.
    """
    monkeypatch.setenv("SCAN2QA_WORKERS", "1")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only ../shared folder; tests that need it skip when it is absent."""
    if not (SHARED / "fixtures").is_dir():
        pytest.skip(f"{SHARED}/fixtures is absent: real-data fixtures are not available in this checkout")
    return SHARED


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures"


@dataclass
class S3Bucket:
    name: str
    options: dict  # fsspec storage options pointing at the loopback server

    def uri(self, path: str = "") -> str:
        return f"s3://{self.name}/{path}".rstrip("/")

    def upload(self, local: Path, path: str) -> str:
        """Copy a local folder's files under ``path`` in this bucket; returns its URI."""
        from pipeline.storage import upath

        target = upath(self.uri(path), self.options)
        for f in sorted(local.rglob("*")):
            if f.is_file():
                (target / f.relative_to(local).as_posix()).write_bytes(f.read_bytes())
        return self.uri(path)


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on a free loopback port, as s3fs's own tests run it; yields fsspec storage options."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            env.delenv(name, raising=False)
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": f"http://{host}:{port}"}}
        finally:
            server.stop()


@pytest.fixture
def s3_bucket(s3_server) -> S3Bucket:
    """A fresh bucket per test (the server keeps buckets for the whole session)."""
    from pipeline.storage import upath

    name = f"scan2qa-{uuid.uuid4().hex[:12]}"
    upath(f"s3://{name}", s3_server).fs.mkdir(name)
    return S3Bucket(name, s3_server)

# The cluster tier's fault tests share one fault-free build of their scans (built only when a fault test runs).
from tests.cluster_faults import fault_free, fault_scans  # noqa: E402,F401
