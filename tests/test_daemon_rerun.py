"""A partition rerun from the UI heals by itself under the real daemon, and ordinary builds lead to no extra run.

``scan2qa build`` builds two small synthetic scans into a scratch instance (the demo's ``dagster.yaml``); then a
real ``dagster-daemon`` and ``dagster-webserver`` run on it. Through the webserver's GraphQL, with the mutation the
UI's Materialize sends (``launchPipelineExecution`` of ``__ASSET_JOB`` with one asset and the partition tag),
``visibility`` of one partition is rebuilt alone. Automation then rebuilds that partition's assets downstream of
it in one run, and the next release holds the scan (it used to leave it out as stale). Counted by tags: after the
build no run comes for several automation ticks; after the rerun exactly one heal run of that partition and one
dataset-wide run come, then nothing for several ticks more; after a whole-scan run of the other partition
(``scan_job`` from its launchpad, spanning many ticks) only one dataset-wide run comes. Then that scan's mesh is
cut short: the UI reads its failed run's one line first, and the next release says it is partial (its WARN check
failed, the report's first lines). Every wait polls the instance or the release pointer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.demo_instance import instance_yaml
from tests.dagster_ui import graphql, webserver_ready
from tests.real_scans import break_truncated_ply
from deploy.local_cluster import free_port, stop_process_group

pytestmark = pytest.mark.slow  # a daemon, a webserver and their runs on a SQLite instance: minutes, no cluster

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCENES, FRAMES = 2, 12
RERUN_KEY = "synthetic/synth0000_00"
OTHER_KEY = "synthetic/synth0001_00"
INTERVAL = 5  # SCAN2QA_SENSOR_INTERVAL: seconds between automation ticks
QUIET_TICKS = 4  # automation ticks that must pass without a run
DOWNSTREAM_OF_VISIBILITY = {"object_visibility", "dummy_videos", "qa_candidates", "pinpoint_qa_candidates"}

MATERIALIZE = """
mutation($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""



def materialize_from_ui(port: int, asset: str | None, partition: str) -> str:
    """What the UI's Materialize on an asset's page sends for one partition (``asset`` None: the launchpad of
    ``scan_job``, every per-scan asset); the queued run's id."""
    selector = {"repositoryLocationName": "scan2qa", "repositoryName": "__repository__"}
    if asset is None:
        selector["pipelineName"] = "scan_job"
    else:
        selector.update(pipelineName="__ASSET_JOB", assetSelection=[{"path": [asset]}])
    params = {
        "mode": "default",
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
        "selector": selector,
    }
    answer = graphql(port, MATERIALIZE, {"params": params})
    launched = answer["data"]["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", answer
    return launched["run"]["runId"]


STEP_FAILURES = """
query($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on ExecutionStepFailureEvent { stepKey error { message } failureMetadata { description } }
      }
    }
  }
}
"""

CHECK_EXECUTIONS = """
query($assetKey: AssetKeyInput!, $checkName: String!) {
  assetCheckExecutions(assetKey: $assetKey, checkName: $checkName, limit: 1) {
    status
    evaluation { severity description }
  }
}
"""


def step_failure_as_the_ui_reads_it(port: int, run_id: str) -> str:
    """The description of the run's step failure, which the run page shows above the trace; also the first line
    of the error the trace belongs to."""
    answer = graphql(port, STEP_FAILURES, {"runId": run_id})
    events = answer["data"]["logsForRun"]["events"]
    [failure] = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    line = failure["failureMetadata"]["description"]
    assert failure["error"]["message"].splitlines()[0].endswith(line), failure
    return line


def latest_check_as_the_ui_reads_it(port: int, asset: str, check: str) -> dict:
    answer = graphql(port, CHECK_EXECUTIONS, {"assetKey": {"path": [asset]}, "checkName": check})
    [latest] = answer["data"]["assetCheckExecutions"]
    return latest


def wait_for(predicate, what: str, timeout: float, processes: dict[str, subprocess.Popen], logs: Path,
             poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                raise AssertionError(f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                                     + (logs / f"{name}.log").read_text(errors="replace")[-3000:])
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    tail = (logs / "dagster-daemon.log").read_text(errors="replace")[-3000:]
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n{tail}")


def automation_ticks(instance) -> int:
    """Finished evaluations of the ``dataset_automation`` sensor so far."""
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.scheduler.instigation import TickStatus

    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.instigator_name == "dataset_automation":
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=10_000)
            return sum(tick.status != TickStatus.STARTED for tick in ticks)
    return 0


def latest_release(out: Path) -> str | None:
    try:
        return (out / "releases" / "LATEST").read_text().strip()
    except FileNotFoundError:
        return None


def released_scans(out: Path, version: str) -> set[str]:
    import polars as pl

    return set(pl.read_parquet(out / "releases" / version / "tables" / "scans.parquet")["key"])


def manifest(out: Path, version: str) -> dict:
    return json.loads((out / "releases" / version / "manifest.json").read_text())


def test_a_ui_rerun_of_one_asset_heals_its_partition_and_the_release_holds_it(tmp_path, monkeypatch):
    import dagster as dg

    home, scans, out = tmp_path / "home", tmp_path / "scans", tmp_path / "out"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SCAN2QA_"))}
    env.update({"DAGSTER_HOME": str(home), "SCAN2QA_SCANS": str(scans), "SCAN2QA_OUT": str(out),
                "SCAN2QA_SENSOR_INTERVAL": str(INTERVAL), "SCAN2QA_WORKERS": "1", "SCAN2QA_THREADS": "1",
                "GX_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", str(SCENES),
                    "--frames", str(FRAMES), "--seed", "0"], check=True, capture_output=True, cwd=REPO, env=env)
    built = subprocess.run([sys.executable, "-m", "scan2qa", "build"], capture_output=True, text=True,
                           cwd=REPO, env=env)
    assert f"summary: {SCENES} ok, 0 failed" in built.stdout, built.stdout[-3000:] + built.stderr[-3000:]
    first = latest_release(out)
    assert first is not None and RERUN_KEY in released_scans(out, first)

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    port = free_port()
    commands = {
        "dagster-daemon": [str(BIN / "dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")],
        "dagster-webserver": [str(BIN / "dagster-webserver"), "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1",
                              "-p", str(port)],
    }
    processes: dict[str, subprocess.Popen] = {}
    try:
        for name, command in commands.items():
            with open(tmp_path / f"{name}.log", "wb") as handle:
                processes[name] = subprocess.Popen(command, cwd=REPO, env=env, stdout=handle,
                                                   stderr=subprocess.STDOUT, start_new_session=True)
        with dg.DagsterInstance.get() as instance:
            built_runs = {run.run_id for run in instance.get_runs()}

            # 1. After an ordinary whole-scan build, automation launches nothing.
            start = wait_for(lambda: automation_ticks(instance) or None, "the first automation tick", 600,
                             processes, tmp_path)
            wait_for(lambda: automation_ticks(instance) >= start + QUIET_TICKS, f"{QUIET_TICKS} automation ticks",
                     600, processes, tmp_path)
            assert {run.run_id for run in instance.get_runs()} == built_runs, [
                (run.job_name, run.tags) for run in instance.get_runs() if run.run_id not in built_runs]

            # 2. visibility of one partition, rebuilt alone from the UI.
            wait_for(lambda: webserver_ready(port), "dagster-webserver", 600, processes, tmp_path)
            rerun = materialize_from_ui(port, "visibility", RERUN_KEY)

            def finished(run_id):
                run = instance.get_run_by_id(run_id)
                return run if run is not None and run.is_finished else None

            assert wait_for(lambda: finished(rerun), "the UI's rerun", 900, processes, tmp_path).is_success

            # 3. Automation heals the partition; the next release holds the scan.
            def later_runs():
                return [run for run in instance.get_runs() if run.run_id not in built_runs | {rerun}]

            def released_after_rerun():
                """The release once a dataset-wide run came after the rerun and every run since has ended (a
                version is a content hash: the same content keeps its name)."""
                runs = later_runs()
                if any("dagster/partition" not in run.tags for run in runs) and all(r.is_finished for r in runs):
                    return latest_release(out)
                return None

            released = wait_for(released_after_rerun, "a release after the rerun", 900, processes, tmp_path)
            assert all(run.is_success for run in later_runs()), [(r.run_id, r.status) for r in later_runs()]
            assert RERUN_KEY in released_scans(out, released)
            assert manifest(out, released)["checks"]["excluded_scans"]["failed_scans"] == []

            ticks = automation_ticks(instance)
            wait_for(lambda: automation_ticks(instance) >= ticks + QUIET_TICKS, f"{QUIET_TICKS} ticks more", 600,
                     processes, tmp_path)
            runs = later_runs()
            heals = [run for run in runs if run.tags.get("dagster/partition") == RERUN_KEY]
            dataset = [run for run in runs if "dagster/partition" not in run.tags]
            assert len(heals) == 1 and len(dataset) == 1 and len(runs) == 2, [(r.asset_selection, r.tags) for r in runs]
            [heal] = heals
            assert {key.to_user_string() for key in heal.asset_selection} == DOWNSTREAM_OF_VISIBILITY
            assert {run.tags.get("dagster/sensor_name") for run in runs} == {"dataset_automation"}

            # 4. A whole-scan run (scan_job: no asset selection) spanning many ticks: one dataset-wide run follows,
            # no per-scan run.
            before = {run.run_id for run in instance.get_runs()}
            whole = materialize_from_ui(port, None, OTHER_KEY)
            assert wait_for(lambda: finished(whole), "the whole-scan run", 900, processes, tmp_path).is_success

            def after_whole():
                return [run for run in instance.get_runs() if run.run_id not in before | {whole}]

            def settled():
                runs = after_whole()
                return runs if runs and all(run.is_finished for run in runs) else None

            wait_for(settled, "the dataset-wide run after the whole-scan run", 900, processes, tmp_path)
            ticks = automation_ticks(instance)
            wait_for(lambda: automation_ticks(instance) >= ticks + QUIET_TICKS, f"{QUIET_TICKS} ticks more", 600,
                     processes, tmp_path)
            runs = after_whole()
            assert len(runs) == 1 and "dagster/partition" not in runs[0].tags and runs[0].is_success, [
                (r.asset_selection, r.tags) for r in runs]
            latest = latest_release(out)
            assert released_scans(out, latest) == {RERUN_KEY, OTHER_KEY}

            # 5. One scan's mesh cut short: discovery rebuilds it, its run fails, and the UI reads the one line
            # first; the next release leaves it out in plain sight (a failed WARN check on the release, the
            # report's first lines).
            before = {run.run_id for run in instance.get_runs()}
            break_truncated_ply(scans / OTHER_KEY.split("/")[1])

            def failed_scan_run():
                runs = [r for r in instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": OTHER_KEY}))
                        if r.run_id not in before and r.is_finished]
                return runs[0] if runs else None

            broken = wait_for(failed_scan_run, "the broken scan's run", 900, processes, tmp_path)
            assert broken.status == dg.DagsterRunStatus.FAILURE
            line = step_failure_as_the_ui_reads_it(port, broken.run_id)
            assert line.startswith(f"{OTHER_KEY}: ") and "_vh_clean_2.ply" in line and "\n" not in line, line

            def partial_release():
                version = latest_release(out)
                return version if version != latest and OTHER_KEY not in released_scans(out, version) else None

            partial = wait_for(partial_release, "a release leaving the broken scan out", 900, processes, tmp_path)
            [left_out] = manifest(out, partial)["checks"]["excluded_scans"]["failed_scans"]
            assert left_out["key"] == OTHER_KEY and left_out["state"] == "failed", left_out
            check = latest_check_as_the_ui_reads_it(port, "release", "all_registered_scans_released")
            assert check["status"] == "FAILED" and check["evaluation"]["severity"] == "WARN", check
            assert check["evaluation"]["description"] == "1 of 2 registered scans left out of the release", check
            report = (out / "releases" / partial / "report" / "index.html").read_text()
            body = report[report.index("<body"):]
            first = body.index('id="excluded-scans"')
            assert first < body.index("<h2") and "Partial release: 1 of 2 registered scans released, 1 left out." in body
            assert OTHER_KEY in body[first:body.index("<h2")] and "_vh_clean_2.ply" in body[first:body.index("<h2")]
    finally:
        for process in processes.values():
            stop_process_group(process, timeout=60)
