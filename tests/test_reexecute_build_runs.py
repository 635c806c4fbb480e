"""The runs ``scan2qa build`` records (what ``make demo`` leaves in ``.dagster_home``) can be re-executed from
the UI: each is a run of the code location's ``scan_job`` / ``dataset_job`` with the workspace's origin, and the
webserver's own re-execution mutation launches a child run of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dagster_ui import graphql, webserver_ready
from deploy.local_cluster import free_port, stop_process_group, wait_until

pytestmark = pytest.mark.cluster  # starts dagster-webserver; CI runs it in the cluster step

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REEXECUTE = """
mutation($parent: String!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $parent, strategy: ALL_STEPS}) {
    __typename
    ... on LaunchRunSuccess { run { runId jobName } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConflict { message }
  }
}
"""



def test_build_runs_are_runs_of_the_code_location_jobs_and_re_execute(tmp_path, monkeypatch):
    import dagster as dg

    home = tmp_path / "home"
    home.mkdir()
    # Queued runs stay queued (no daemon here): the mutation's success is what the Re-execute button needs.
    (home / "dagster.yaml").write_text("run_coordinator:\n  module: dagster._core.run_coordinator\n"
                                       "  class: QueuedRunCoordinator\ntelemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SCAN2QA_"))}
    env.update({"DAGSTER_HOME": str(home), "SCAN2QA_WORKERS": "1", "SCAN2QA_SCANS": str(tmp_path / "scans"),
                "SCAN2QA_OUT": str(tmp_path / "out"), "GX_ANALYTICS_ENABLED": "false"})
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(tmp_path / "scans"), "--scenes", "1",
                    "--frames", "12", "--seed", "0"], check=True, capture_output=True, cwd=REPO, env=env)
    build = subprocess.run([sys.executable, "-m", "scan2qa", "build", "--scans", str(tmp_path / "scans"),
                            "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO, env=env)
    assert "summary: 1 ok, 0 failed" in build.stdout, build.stdout + build.stderr

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        runs = {r.job_name: r for r in instance.get_runs()}
    assert {"scan_job", "dataset_job"} <= set(runs), sorted(runs)
    for run in (runs["scan_job"], runs["dataset_job"]):
        assert run.remote_job_origin is not None and run.remote_job_origin.location_name == "scan2qa"

    port = free_port()
    log = tmp_path / "webserver.log"
    with open(log, "wb") as handle:
        server = subprocess.Popen([str(BIN / "dagster-webserver"), "-w", str(REPO / "workspace.yaml"), "-h",
                                   "127.0.0.1", "-p", str(port)], cwd=REPO, env=env, stdout=handle,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: webserver_ready(port), "dagster-webserver", 240, log, server)
        for job in ("scan_job", "dataset_job"):
            answer = graphql(port, REEXECUTE, {"parent": runs[job].run_id})
            launched = answer["data"]["launchRunReexecution"]
            assert launched["__typename"] == "LaunchRunSuccess", (job, answer)
            assert launched["run"]["jobName"] == job
    finally:
        stop_process_group(server, timeout=60)
