"""Several scans in one run (a multi-run backfill's partition range, ``assets.scan_batches``): the same table
bytes as one run per scan, each partition's checks recorded as its own, and a bad scan named without any scan of
its run released."""

from __future__ import annotations

import hashlib
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from assets.definitions import all_asset_checks, all_assets
from assets.jobs import per_scan_keys
from assets.membership import per_scan_asset_keys, per_scan_check_keys, scan_states
from assets.partitions import scan_partitions
from assets.scan_batches import SCANS_PER_RUN_ENV, scan_backfill_policy, scans_per_run
from pipeline.release.membership import BUILT, CHECKS_FAILED, FAILED
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import write_scan

KEYS = [f"synthetic/synth{i:04d}_00" for i in range(3)]


def per_scan_job(storage: StorageResource) -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=all_assets, asset_checks=all_asset_checks, resources=default_resources(storage),
        jobs=[dg.define_asset_job("scans", selection=dg.AssetSelection.assets(*per_scan_keys(all_assets)),
                                  partitions_def=scan_partitions, executor_def=dg.in_process_executor)],
    )
    return defs.resolve_job_def("scans")


def table_digests(out: Path) -> dict[str, str]:
    tables = out / "tables"
    return {str(p.relative_to(tables)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tables.rglob("*.parquet"))}


def build(tmp_path: Path, name: str, ranges: list[tuple[str, str] | str]) -> tuple[dg.DagsterInstance, Path, list]:
    out = tmp_path / name
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(out))
    job = per_scan_job(storage)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scans", KEYS)
    results = []
    for part in ranges:
        if isinstance(part, str):
            results.append(job.execute_in_process(instance=instance, partition_key=part, raise_on_error=False))
        else:
            tags = {ASSET_PARTITION_RANGE_START_TAG: part[0], ASSET_PARTITION_RANGE_END_TAG: part[1]}
            results.append(job.execute_in_process(instance=instance, tags=tags, raise_on_error=False))
    return instance, out, results


@pytest.fixture
def scans(tmp_path):
    for index, key in enumerate(KEYS):
        write_scan(tmp_path / "scans", key.split("/")[1], objects=3 + index % 2, frames=9)
    return tmp_path / "scans"


def states(instance) -> dict:
    found = scan_states(instance, KEYS, per_scan_asset_keys(), per_scan_check_keys())
    return {s.key: s for s in found}


def test_a_range_writes_the_bytes_of_one_run_per_scan_and_records_each_partitions_checks(tmp_path, scans):
    single, single_out, single_runs = build(tmp_path, "single", list(KEYS))
    assert all(r.success for r in single_runs)
    batch, batch_out, [batch_run] = build(tmp_path, "batch", [(KEYS[0], KEYS[-1])])
    assert batch_run.success

    assert table_digests(batch_out) == table_digests(single_out)
    assert len(table_digests(batch_out)) >= 11 * len(KEYS)
    videos = sorted(p.relative_to(batch_out / "videos") for p in (batch_out / "videos").rglob("*.mp4"))
    assert videos == sorted(p.relative_to(single_out / "videos") for p in (single_out / "videos").rglob("*.mp4"))

    # Dagster's own record: every partition built, every per-scan check evaluated for each partition.
    assert {key: s.state for key, s in states(batch).items()} == dict.fromkeys(KEYS, BUILT)
    infos = batch.event_log_storage.get_asset_check_partition_info(list(per_scan_check_keys()), partition_keys=KEYS)
    evaluated = {(info.check_key.name, info.partition_key) for info in infos if info.latest_execution_status.value == "SUCCEEDED"}
    assert evaluated == {(check.name, key) for check in per_scan_check_keys() for key in KEYS}


def test_a_bad_scan_fails_its_run_naming_it_and_no_scan_of_the_run_is_released(tmp_path, scans):
    broken = KEYS[1]
    scene_id = broken.split("/")[1]
    (scans / scene_id / f"{scene_id}_vh_clean_2.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\n")
    instance, out, [run] = build(tmp_path, "batch", [(KEYS[0], KEYS[-1])])
    assert not run.success
    found = states(instance)
    assert {key: s.state for key, s in found.items()} == dict.fromkeys(KEYS, FAILED)
    assert found[broken].error.startswith(f"{broken}: ") and "_vh_clean_2.ply" in found[broken].error
    for key in (KEYS[0], KEYS[2]):
        assert found[key].error.startswith("not built: another scan of its run failed"), found[key].error
        assert broken in found[key].error
    assert not (out / "tables").exists() or not list((out / "tables").rglob("*.parquet"))

    # The rerun sensor asks for the scans around the bad one, a range each; running them builds those scans and
    # leaves the bad one named.
    from assets.batch_rerun import RERUN_OF_TAG, batch_rerun_sensor

    failed_run = instance.get_run_by_id(run.run_id)
    failure = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)[0].dagster_event
    sensor = batch_rerun_sensor([dg.define_asset_job("scans", partitions_def=scan_partitions)], "scans")
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name, dagster_event=failure, dagster_instance=instance, dagster_run=failed_run,
    ).for_run_failure()
    requests = sensor(context)
    assert [(r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG]) for r in requests] == [
        (KEYS[0], KEYS[0]), (KEYS[2], KEYS[2])]
    assert all(r.tags[RERUN_OF_TAG] == run.run_id and r.job_name == "scans" for r in requests)
    job = per_scan_job(StorageResource(scans_root=str(scans), output_root=str(out)))
    for request in requests:
        assert job.execute_in_process(instance=instance, tags=request.tags, raise_on_error=False).success
    found = states(instance)
    assert found[KEYS[0]].state == BUILT and found[KEYS[2]].state == BUILT
    assert found[broken].state == FAILED and found[broken].error.startswith(f"{broken}: ")


def test_scans_per_run_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(SCANS_PER_RUN_ENV, raising=False)
    assert scans_per_run() == 1 and scan_backfill_policy() is None
    monkeypatch.setenv(SCANS_PER_RUN_ENV, "50")
    assert scan_backfill_policy() == dg.BackfillPolicy.multi_run(max_partitions_per_run=50)
    for bad in ("0", "many"):
        monkeypatch.setenv(SCANS_PER_RUN_ENV, bad)
        with pytest.raises(ValueError, match=SCANS_PER_RUN_ENV):
            scans_per_run()


def test_a_scan_breaking_a_suite_in_a_range_is_named_by_its_own_check(tmp_path, scans, monkeypatch):
    import polars as pl

    import pipeline.frames.budgets as budgets

    original = budgets.sample_frames
    broken = KEYS[2]

    def doubled_for_one_scan(frames, *args, **kwargs):
        table = original(frames, *args, **kwargs)
        return pl.concat([table, table]) if frames["key"][0] == broken else table

    monkeypatch.setattr(budgets, "sample_frames", doubled_for_one_scan)
    instance, out, [run] = build(tmp_path, "batch", [(KEYS[0], KEYS[-1])])
    assert not run.success
    found = states(instance)
    assert found[broken].state == CHECKS_FAILED
    assert "frame_samples" in found[broken].error and "expectations failed" in found[broken].error
    for key in KEYS[:2]:
        assert found[key].state == FAILED and found[key].error.startswith("not built: another scan"), found[key]
    infos = instance.event_log_storage.get_asset_check_partition_info(
        [dg.AssetCheckKey(dg.AssetKey("frame_samples"), "frame_samples_expectations")], partition_keys=KEYS)
    assert {i.partition_key: i.latest_execution_status.value for i in infos} == {
        KEYS[0]: "SUCCEEDED", KEYS[1]: "SUCCEEDED", broken: "FAILED"}
    assert not (out / "videos").exists()  # nothing downstream of the failed check ran, for any scan of the run


def test_survivor_ranges_are_the_stretches_between_failed_scans():
    from assets.batch_rerun import survivor_ranges

    keys = list("abcdefg")
    assert survivor_ranges(keys, set()) == [("a", "g")]
    assert survivor_ranges(keys, {"a", "d", "e"}) == [("b", "c"), ("f", "g")]
    assert survivor_ranges(keys, {"g"}) == [("a", "f")]
    assert survivor_ranges(keys, set(keys)) == []
