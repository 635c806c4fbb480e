"""deploy/dagster.yaml through Dagster's own instance loader, and the code location's Celery jobs.

The loader validates every key against Dagster's schema and resolves the
``{env: ...}`` values, so a typo or a missing variable fails here rather than
in a deployment. (The cluster tests start a real instance on Postgres from the
same file.)
"""

import shutil
from pathlib import Path

import dagster as dg
import pytest

ROOT = Path(__file__).resolve().parents[1]

DEPLOYMENT_ENV = {
    "DAGSTER_PG_HOST": "db.internal", "DAGSTER_PG_PORT": "5433", "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "secret", "DAGSTER_PG_DB": "dagster", "SCAN2QA_MAX_CONCURRENT_RUNS": "7",
}


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    for name, value in DEPLOYMENT_ENV.items():
        monkeypatch.setenv(name, value)
    shutil.copy(ROOT / "deploy" / "dagster.yaml", tmp_path / "dagster.yaml")
    return tmp_path


def resolved(config_type, value):
    """A config value as Dagster resolves it when the instance starts (``{env: ...}`` read from the environment)."""
    from dagster._config import post_process_config, process_config

    result = process_config(config_type, value)
    assert result.success, result.errors
    return post_process_config(config_type, value).value


def test_dagster_yaml_passes_dagsters_instance_loader(dagster_home):
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster._core.storage.config import pg_config
    from dagster._core.definitions.definition_config_schema import convert_user_facing_definition_config_schema
    from dagster_postgres.utils import pg_url_from_config

    config, custom_class = dagster_instance_config(str(dagster_home))
    assert custom_class is None
    coordinator = config["run_coordinator"]
    assert (coordinator["module"], coordinator["class"]) == ("dagster", "QueuedRunCoordinator")
    queued = resolved(convert_user_facing_definition_config_schema(QueuedRunCoordinator.config_type()).config_type,
                      coordinator["config"])
    assert queued["max_concurrent_runs"] == 7
    assert [(limit["key"], limit["value"], limit["limit"]) for limit in queued["tag_concurrency_limits"]] == [
        ("scan2qa/phase", "dataset", 1)
    ]
    postgres = resolved(convert_user_facing_definition_config_schema(pg_config()).config_type,
                        config["storage"]["postgres"])
    assert pg_url_from_config(postgres) == "postgresql+psycopg2://dagster:secret@db.internal:5433/dagster"


def test_dagster_yaml_names_every_variable_it_needs(dagster_home, monkeypatch):
    from dagster._config import process_config
    from dagster._core.definitions.definition_config_schema import convert_user_facing_definition_config_schema
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.storage.config import pg_config

    monkeypatch.delenv("DAGSTER_PG_HOST")
    config, _ = dagster_instance_config(str(dagster_home))
    result = process_config(convert_user_facing_definition_config_schema(pg_config()).config_type,
                            config["storage"]["postgres"])
    assert not result.success and "DAGSTER_PG_HOST" in str(result.errors)


def test_celery_jobs_select_what_the_in_process_jobs_select():
    from assets.definitions import defs

    for name in ("scan_job", "dataset_job"):
        plain, celery = defs.resolve_job_def(name), defs.resolve_job_def(f"{name}_celery")
        assert plain.asset_layer.executable_asset_keys == celery.asset_layer.executable_asset_keys
        assert celery.executor_def.name == "scan2qa_celery"
        assert plain.partitions_def == celery.partitions_def
    assert defs.resolve_job_def("dataset_job_celery").tags.get("scan2qa/phase") == "dataset"


def test_celery_worker_app_acknowledges_steps_only_after_they_ran(monkeypatch):
    monkeypatch.setenv("SCAN2QA_CELERY_BROKER", "redis://127.0.0.1:6390/0")
    monkeypatch.setenv("SCAN2QA_CELERY_VISIBILITY_TIMEOUT", "900")
    from assets.celery import celery_settings

    settings = celery_settings()
    assert settings["task_acks_late"] and settings["task_reject_on_worker_lost"]
    assert settings["worker_prefetch_multiplier"] == 1
    assert settings["broker_transport_options"]["visibility_timeout"] == 900
    monkeypatch.setenv("SCAN2QA_CELERY_VISIBILITY_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SCAN2QA_CELERY_VISIBILITY_TIMEOUT"):
        celery_settings()


def test_deployment_switches(monkeypatch):
    from assets.deployment import sensor_dataset_job, sensor_scan_job, sensor_status

    monkeypatch.setenv("SCAN2QA_EXECUTOR", "celery")
    monkeypatch.setenv("SCAN2QA_AUTOMATION", "stopped")
    assert (sensor_scan_job(), sensor_dataset_job()) == ("scan_job_celery", "dataset_job_celery")
    assert sensor_status().value == "STOPPED"
    monkeypatch.setenv("SCAN2QA_EXECUTOR", "kubernetes")
    with pytest.raises(ValueError, match="SCAN2QA_EXECUTOR='kubernetes'"):
        sensor_scan_job()


def test_a_celery_deployment_runs_ui_and_automation_runs_on_celery(monkeypatch):
    """Runs of selections no named job holds (automation's dataset-wide runs, an asset page's Materialize) take the
    code location's default executor: Celery on a Celery deployment; scan_job and dataset_job stay in-process."""
    from assets.definitions import all_assets
    from assets.deployment import default_executor
    from assets.jobs import build_jobs
    from resources.defaults import default_resources

    monkeypatch.setenv("SCAN2QA_EXECUTOR", "celery")
    defs = dg.Definitions(assets=all_assets, jobs=build_jobs(all_assets), resources=default_resources(),
                          executor=default_executor())
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "scan2qa_celery"
    assert {defs.resolve_job_def(n).executor_def.name for n in ("scan_job", "dataset_job")} == {"in_process"}
    monkeypatch.setenv("SCAN2QA_EXECUTOR", "in_process")
    assert default_executor().name == "in_process"


def test_instance_heals_runs_with_a_launcher_that_checks_run_workers(dagster_home):
    from dagster._core.instance.config import dagster_instance_config
    from dagster._serdes.config_class import ConfigurableClassData

    config, _ = dagster_instance_config(str(dagster_home))
    launcher = config["run_launcher"]
    loaded = ConfigurableClassData(launcher["module"], launcher["class"], "{}").rehydrate(object)
    assert loaded.supports_check_run_worker_health, "run monitoring must see a run whose worker is gone"
    monitoring, retries = config["run_monitoring"], config["run_retries"]
    assert monitoring["enabled"] and monitoring["max_resume_run_attempts"] == 0, "DefaultRunLauncher cannot resume"
    assert 0 < monitoring["poll_interval_seconds"] <= 60
    assert retries["enabled"] and 0 < retries["max_retries"] <= 3, "bounded retries"
    assert retries["retry_on_asset_or_op_failure"] is False, "a step that raised (a ScanError) is not retried"
    assert config["retention"]["sensor"]["purge_after_days"]["skipped"] >= 1


def test_run_worker_health_check_asks_the_runs_code_server(tmp_path, monkeypatch):
    import json

    from dagster._core.launcher import WorkerStatus
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.storage.tags import GRPC_INFO_TAG
    from dagster._grpc.client import DagsterGrpcClient
    from dagster._grpc.types import GetCurrentRunsResult
    from dagster._serdes import serialize_value

    from deploy.run_launcher import MonitoredRunLauncher

    launcher = MonitoredRunLauncher()

    def run(tags):
        return DagsterRun(job_name="scan_job_celery", run_id="r1", tags=tags)

    assert launcher.check_run_worker_health(run({})).status == WorkerStatus.UNKNOWN
    gone = {GRPC_INFO_TAG: json.dumps({"host": "localhost", "socket": str(tmp_path / "no-server.sock")})}
    result = launcher.check_run_worker_health(run(gone))
    assert result.status == WorkerStatus.FAILED and "does not answer" in result.msg

    class Reply:
        def __init__(self, runs):
            self.serialized_current_runs = serialize_value(GetCurrentRunsResult(current_runs=runs, serializable_error_info=None))

    alive = {GRPC_INFO_TAG: json.dumps({"host": "localhost", "port": 4266})}
    monkeypatch.setattr(DagsterGrpcClient, "_query", lambda self, *a, **k: Reply(["r1", "r2"]))
    assert launcher.check_run_worker_health(run(alive)).status == WorkerStatus.RUNNING
    monkeypatch.setattr(DagsterGrpcClient, "_query", lambda self, *a, **k: Reply(["r2"]))
    result = launcher.check_run_worker_health(run(alive))
    assert result.status == WorkerStatus.FAILED and "runs no worker for this run" in result.msg


def test_scan_and_dataset_jobs_carry_run_time_limits(monkeypatch):
    from assets.definitions import defs
    from assets.run_policy import dataset_run_tags, scan_run_tags

    for name in ("scan_job", "scan_job_celery"):
        assert defs.resolve_job_def(name).tags["dagster/max_runtime"] == "7200"
    dataset = defs.resolve_job_def("dataset_job_celery").tags
    assert dataset["dagster/max_runtime"] == "21600" and dataset["dagster/max_retries"] == "1"
    monkeypatch.setenv("SCAN2QA_SCAN_RUN_MAX_SECONDS", "900")
    assert scan_run_tags() == {"dagster/max_runtime": "900"}
    monkeypatch.setenv("SCAN2QA_DATASET_RUN_MAX_SECONDS", "forever")
    with pytest.raises(ValueError, match="SCAN2QA_DATASET_RUN_MAX_SECONDS='forever'"):
        dataset_run_tags()


def test_celery_results_expire_after_an_hour_unless_told(monkeypatch):
    from assets.celery import celery_settings

    monkeypatch.delenv("SCAN2QA_CELERY_RESULT_EXPIRES", raising=False)
    assert celery_settings()["result_expires"] == 3600
    monkeypatch.setenv("SCAN2QA_CELERY_RESULT_EXPIRES", "86400")
    assert celery_settings()["result_expires"] == 86400
    monkeypatch.setenv("SCAN2QA_CELERY_RESULT_EXPIRES", "0")
    with pytest.raises(ValueError, match="SCAN2QA_CELERY_RESULT_EXPIRES"):
        celery_settings()
