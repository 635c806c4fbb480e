"""An ``s3://`` root that does not answer, or no credentials: one line naming the URI and the cause, exit 1.

The object store is a loopback port nobody listens on (bound, then closed), so
nothing leaves the machine; the commands run in subprocesses with AWS's
credential files, instance metadata and profile variables out of the way, so
"no credentials" is what the process really sees.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.real_scans import write_scan

ROOT = Path(__file__).resolve().parents[1]
NO_SUCH_FILE = "/nonexistent/scan2qa-test"


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A loopback port that refuses connections: bound to find a free one, then closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def aws_env(endpoint: str | None, credentials: bool) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": NO_SUCH_FILE,
           "AWS_CONFIG_FILE": NO_SUCH_FILE, "AWS_SHARED_CREDENTIALS_FILE": NO_SUCH_FILE,
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1"}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    if credentials:
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    return env


def scan2qa(cwd: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scan2qa", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def storage_options(port: int, credentials: bool) -> dict:
    options = {"client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"},
               "config_kwargs": {"retries": {"max_attempts": 1}}}
    if credentials:
        options |= {"key": "testing", "secret": "testing"}
    return options


def build_config(tmp_path: Path, scans: str, out: str, port: int, credentials: bool = True) -> str:
    path = tmp_path / "roots.yaml"
    path.write_text(yaml.safe_dump({"scans_root": scans, "output_root": out,
                                    "storage_options": storage_options(port, credentials)}))
    return str(path)


def assert_one_line(done: subprocess.CompletedProcess, command: str, uri: str, cause: str) -> None:
    printed = done.stdout + done.stderr
    assert done.returncode == 1, printed
    assert "Traceback" not in printed, printed
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, printed
    assert lines[0].startswith(f"scan2qa {command}: error: {uri}: "), printed
    assert cause in lines[0], printed


def test_build_from_an_unreachable_scans_bucket(tmp_path, closed_port):
    config = build_config(tmp_path, "s3://scans-bucket/scans", str(tmp_path / "out"), closed_port)
    done = scan2qa(tmp_path, aws_env(None, True), "build", "--config", config, "--workers", "1")
    assert_one_line(done, "build", "s3://scans-bucket/scans", "cannot reach the object store (Could not connect")
    assert not (tmp_path / "out" / "releases").exists()


def test_build_into_an_unreachable_output_bucket(tmp_path, closed_port):
    write_scan(tmp_path / "scans", "synth0000_00")
    config = build_config(tmp_path, str(tmp_path / "scans"), "s3://out-bucket/out", closed_port)
    done = scan2qa(tmp_path, aws_env(None, True), "build", "--config", config, "--workers", "1")
    assert_one_line(done, "build", "s3://out-bucket/out", "cannot reach the object store (Could not connect")
    assert "synth0000_00" not in done.stdout, "no scan work starts before the output root answered"


def test_build_with_no_credentials(tmp_path, closed_port):
    config = build_config(tmp_path, "s3://scans-bucket/scans", "s3://out-bucket/out", closed_port, credentials=False)
    done = scan2qa(tmp_path, aws_env(None, False), "build", "--config", config, "--workers", "1")
    assert_one_line(done, "build", "s3://out-bucket/out", "cannot reach the object store (Unable to locate credentials")


def test_stats_on_an_unreachable_table(tmp_path, closed_port):
    for credentials, cause in ((True, "Could not connect"), (False, "Unable to locate credentials")):
        env = aws_env(f"http://127.0.0.1:{closed_port}", credentials)
        done = scan2qa(tmp_path, env, "stats", "--qa", "s3://bucket/qa.parquet")
        assert_one_line(done, "stats", "s3://bucket/qa.parquet", f"cannot reach the object store ({cause}")


@pytest.mark.parametrize("argv", [
    ("generate", "--annotations", "s3://bucket/boxes.json", "--out", "qa.parquet"),
    ("generate", "--annotations", "boxes.json", "--out", "s3://bucket/qa.parquet"),
    ("export", "--format", "revsi", "--release", "s3://bucket/release", "--out", "export"),
    ("export", "--format", "revsi", "--release", "release", "--out", "s3://bucket/export"),
    ("eval", "--release", "s3://bucket/release", "--predictions", "predictions.jsonl"),
    ("eval", "--release", "release", "--predictions", "s3://bucket/predictions.jsonl"),
], ids=lambda argv: f"{argv[0]}-{next(a for a in argv if '://' in a).rsplit('/', 1)[1]}")
def test_local_only_commands_refuse_an_object_store_uri(tmp_path, closed_port, argv):
    """``generate``, ``export`` and ``eval`` read and write local files: an ``s3://`` URI is refused by name."""
    done = scan2qa(tmp_path, aws_env(f"http://127.0.0.1:{closed_port}", True), *argv)
    uri = next(a for a in argv if "://" in a)
    flag = argv[argv.index(uri) - 1]
    assert_one_line(done, argv[0], f"{flag} {uri}", "takes local paths only")
