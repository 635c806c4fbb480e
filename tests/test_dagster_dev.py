"""``dagster dev -w workspace.yaml`` serves the scan2qa code location (checked through GraphQL)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE_QUERY = """
{ workspaceOrError { __typename ... on Workspace {
    locationEntries { name locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
ASSETS_QUERY = "{ assetNodes { assetKey { path } } }"
PARTITIONS_QUERY = '{ assetNodeOrError(assetKey: {path: ["objects"]}) { ... on AssetNode { partitionKeys } } }'
PARTITION_KEY = "scannet/scene0000_00"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())["data"]


def wait_for_location(port: int, process: subprocess.Popen, timeout: float = 120.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "dagster dev exited early"
        try:
            workspace = graphql(port, WORKSPACE_QUERY)["workspaceOrError"]
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
            continue
        entries = workspace.get("locationEntries") or []
        if entries and all(e["locationOrLoadError"] for e in entries):
            return entries
        time.sleep(0.5)
    raise AssertionError(f"code location not loaded within {timeout:.0f} s")


# Starting the webserver, daemon and code server takes 6-10 s on an idle 2-core machine (up to ~20 s when
# the cores are busy), so this stays in the default run.
def stop(process: subprocess.Popen) -> None:
    """Stop ``dagster dev`` as Ctrl-C does; its whole process group if it does not exit in time."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_dagster_dev_loads_the_code_location(tmp_path):
    import dagster as dg

    # A partition key with "/" registered beforehand must come back intact through the webserver.
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    instance.add_dynamic_partitions("scans", [PARTITION_KEY])
    instance.dispose()
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "SCAN2QA_SCANS": str(tmp_path / "scans"),
           "SCAN2QA_OUT": str(tmp_path / "out")}
    dagster = Path(sys.executable).parent / "dagster"
    process = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        entries = wait_for_location(port, process)
        assert [(e["name"], e["locationOrLoadError"]["__typename"]) for e in entries] == [("scan2qa", "RepositoryLocation")]
        assets = {tuple(node["assetKey"]["path"]) for node in graphql(port, ASSETS_QUERY)["assetNodes"]}
        assert {("scans",), ("objects",), ("rooms",), ("frames",)} <= assets
        assert graphql(port, PARTITIONS_QUERY)["assetNodeOrError"]["partitionKeys"] == [PARTITION_KEY]
    finally:
        stop(process)
