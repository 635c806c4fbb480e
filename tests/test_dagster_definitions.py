"""The code location: definitions load, asset graph, jobs, discovery sensor and weekly schedule."""

import datetime
import os

import dagster as dg
import pytest

from assets.definitions import all_assets, defs
from assets.jobs import SCAN_JOB, per_scan_keys
from assets.partitions import scan_partitions
from assets.schedules import weekly_full_rebuild
from assets.sensors import scan_discovery
from pipeline.scene.discovery import DiscoveryState
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import write_scan

SUNDAY = datetime.datetime(2026, 11, 29, 3, 0, tzinfo=datetime.timezone.utc)
SCENE_KEYS = {dg.AssetKey(name) for name in ("scans", "objects", "rooms", "frames")}


def test_definitions_load_with_scene_assets():
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = set(graph.get_all_asset_keys())
    assert SCENE_KEYS <= keys
    for key in SCENE_KEYS:
        assert graph.get(key).partitions_def == scan_partitions
    assert SCENE_KEYS <= set(per_scan_keys(all_assets))
    assert defs.resolve_job_def(SCAN_JOB).partitions_def == scan_partitions
    assert defs.resolve_sensor_def("scan_discovery") is not None
    assert defs.resolve_schedule_def("weekly_full_rebuild").cron_schedule == "0 3 * * 0"
    assert set(defs.resources) >= {"storage", "io_manager"}


def test_storage_resource_reads_environment(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCAN2QA_SCANS", "s3://bucket/scans")
    monkeypatch.setenv("SCAN2QA_OUT", "s3://bucket/out")
    monkeypatch.setenv("SCAN2QA_STORAGE_OPTIONS", '{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}')
    config = StorageResource.from_env().config()
    assert (config.scans_root, config.output_root, config.tables_root) == ("s3://bucket/scans", "s3://bucket/out", "s3://bucket/out/tables")
    assert config.storage_options == {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    for name in ("SCAN2QA_SCANS", "SCAN2QA_OUT", "SCAN2QA_STORAGE_OPTIONS"):
        monkeypatch.delenv(name)
    local = StorageResource.from_env().config()
    assert (local.scans_root, local.output_root) == ("data/scans", "data/out")


def evaluate(instance, storage, cursor):
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=default_resources(storage))
    result = scan_discovery(context)
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_sensor_adds_new_scans_and_rerequests_only_changes(tmp_path):
    root = tmp_path / "scans"
    for scene in ("synth0000_00", "synth0001_00"):
        write_scan(root, scene)
    instance = dg.DagsterInstance.ephemeral()
    storage = StorageResource(scans_root=str(root), output_root=str(tmp_path / "out"))

    first = evaluate(instance, storage, None)
    added = [k for r in first.dynamic_partitions_requests for k in r.partition_keys]
    assert added == ["synthetic/synth0000_00", "synthetic/synth0001_00"]
    assert [r.partition_key for r in first.run_requests] == added
    assert sorted(DiscoveryState.from_cursor(first.cursor).scans) == added

    unchanged = evaluate(instance, storage, first.cursor)
    assert not unchanged.run_requests and not unchanged.dynamic_partitions_requests
    assert unchanged.skip_reason is not None

    write_scan(root, "synth0002_00")
    changed_file = root / "synth0000_00" / "synth0000_00.txt"
    changed_file.write_text(changed_file.read_text() + "numDepthFrames = 0\n")
    stat = changed_file.stat()
    os.utime(changed_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    later = evaluate(instance, storage, unchanged.cursor)
    assert [k for r in later.dynamic_partitions_requests for k in r.partition_keys] == ["synthetic/synth0002_00"]
    assert sorted(r.partition_key for r in later.run_requests) == ["synthetic/synth0000_00", "synthetic/synth0002_00"]
    # Run keys carry the fingerprint, so a re-evaluated tick can never launch the same run twice.
    assert len({r.run_key for r in first.run_requests + later.run_requests}) == 4
    assert sorted(instance.get_dynamic_partitions("scans")) == [
        "synthetic/synth0000_00", "synthetic/synth0001_00", "synthetic/synth0002_00"]


def test_sensor_skips_empty_root(tmp_path):
    result = evaluate(dg.DagsterInstance.ephemeral(), StorageResource(scans_root=str(tmp_path / "none")), None)
    assert not result.run_requests and result.skip_reason is not None


def test_weekly_schedule_requests_every_partition():
    with dg.instance_for_test() as instance:
        assert isinstance(weekly_full_rebuild(dg.build_schedule_context(instance=instance, scheduled_execution_time=SUNDAY)), dg.SkipReason)
        instance.add_dynamic_partitions("scans", ["synthetic/synth0000_00", "scannet/scene0000_00"])
        requests = weekly_full_rebuild(dg.build_schedule_context(instance=instance, scheduled_execution_time=SUNDAY))
    assert [r.partition_key for r in requests] == ["scannet/scene0000_00", "synthetic/synth0000_00"]
    assert len({r.run_key for r in requests}) == 2


@pytest.mark.parametrize("module_name", ["assets.scene", "assets.jobs", "assets.sensors", "assets.schedules"])
def test_definition_modules_import_no_readers(module_name):
    """The code location loads without importing mesh/image readers (they load at run time)."""
    import importlib

    assert importlib.import_module(module_name)


def test_every_dataset_wide_asset_follows_upstream_changes_by_automation():
    """No sensor of ours decides when a release is rebuilt: each dataset-wide asset has the automation
    condition, each per-scan asset follows a partial rerun of its partition, and the automation sensor (interval
    from SCAN2QA_SENSOR_INTERVAL) targets them."""
    from assets.automation import dataset_automation, scan_automation
    from assets.jobs import dataset_wide_keys

    graph = defs.resolve_asset_graph()
    expected = dataset_automation()
    for key in dataset_wide_keys(all_assets):
        assert graph.get(key).automation_condition == expected, key
    for key in per_scan_keys(all_assets):
        assert graph.get(key).automation_condition == scan_automation(), key
    sensor = defs.resolve_sensor_def("dataset_automation")
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert {s.name for s in defs.sensors} == {"scan_discovery", "verdicts_watch", "dataset_automation", "rerun_batch_survivors"}


def test_verdicts_watch_observes_a_changed_file_once(tmp_path):
    from assets.sensors import verdicts_watch

    out = tmp_path / "out"
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(out))
    with dg.instance_for_test() as instance:
        def tick(cursor=None):
            context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=default_resources(storage))
            return verdicts_watch(context)

        absent = tick()
        assert absent.cursor == "absent" and len(absent.asset_events) == 1
        assert tick(absent.cursor).skip_reason is not None
        (out / "reviews").mkdir(parents=True)
        (out / "reviews" / "verdicts.csv").write_text("qa_id,verdict,note,reviewer\nq1,reject,,ana\n")
        changed = tick(absent.cursor)
        [event] = changed.asset_events
        assert event.asset_key == dg.AssetKey("reviewer_verdicts") and changed.cursor != "absent"
        assert event.tags["dagster/data_version"] == changed.cursor and event.metadata["dagster/row_count"].value == 1
        assert tick(changed.cursor).skip_reason is not None
