"""The scan_discovery sensor at scale: bounded ticks rotating through the scans, local and on S3.

Files are changed the way another process would change them: on S3 through a
separate s3fs instance, so the sensor's own listings cache cannot see the
writes (a long-lived Dagster code server never shares a process with the
uploader).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.sensors import scan_discovery
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import write_scan


class LocalRoot:
    def __init__(self, tmp_path: Path):
        self.root = tmp_path / "scans"
        self.uri, self.options = str(self.root), {}

    def add(self, local: Path, rel: str) -> None:
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        local.rename(self.root / rel)

    def touch(self, rel: str) -> None:
        path = self.root / rel
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


class S3Root:
    def __init__(self, bucket):
        import fsspec

        self.uri, self.options = bucket.uri("scans"), bucket.options
        self.prefix = f"{bucket.name}/scans"
        self.other = fsspec.filesystem("s3", skip_instance_cache=True, **bucket.options)  # "another process"

    def add(self, local: Path, rel: str) -> None:
        for f in sorted(local.rglob("*")):
            if f.is_file():
                self.other.pipe(f"{self.prefix}/{rel}/{f.relative_to(local).as_posix()}", f.read_bytes())

    def touch(self, rel: str) -> None:
        path = f"{self.prefix}/{rel}"
        self.other.pipe(path, self.other.cat(path) + b"\n")  # a re-upload with new content


@pytest.fixture(params=["local", "s3"])
def scans_root(request, tmp_path):
    if request.param == "local":
        return LocalRoot(tmp_path)
    return S3Root(request.getfixturevalue("s3_bucket"))


def storage_for(tmp_path: Path, root, max_scans: int) -> StorageResource:
    config = tmp_path / "scan2qa.yaml"
    config.write_text(yaml.safe_dump({"discovery": {"max_scans_per_tick": max_scans}}))
    return StorageResource(scans_root=root.uri, output_root=str(tmp_path / "out"), storage_options=root.options,
                           config_file=str(config))


class Sensor:
    def __init__(self, storage: StorageResource):
        self.instance = dg.DagsterInstance.ephemeral()
        self.storage, self.cursor, self.run_keys = storage, None, []

    def tick(self) -> tuple[list[str], list[str], dg.SensorResult]:
        """(partitions added, partitions run) by one evaluation, which is applied as the daemon would."""
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursor, resources=default_resources(self.storage))
        result = scan_discovery(context)
        added = [k for r in result.dynamic_partitions_requests for k in r.partition_keys]
        if added:
            self.instance.add_dynamic_partitions("scans", added)
        self.cursor = result.cursor
        self.run_keys += [r.run_key for r in result.run_requests]
        return added, sorted(r.partition_key for r in result.run_requests), result


def test_sensor_rotates_bounded_ticks_and_reruns_only_changes(tmp_path, scans_root):
    local = tmp_path / "local"
    for i in range(3):
        write_scan(local, f"synth{i:04d}_00", frames=3)
        scans_root.add(local / f"synth{i:04d}_00", f"synth{i:04d}_00")
    sensor = Sensor(storage_for(tmp_path, scans_root, max_scans=2))
    keys = [f"synthetic/synth{i:04d}_00" for i in range(4)]

    # New scans: every partition at once, runs two per tick.
    added, runs, _ = sensor.tick()
    assert added == keys[:3] and runs == keys[:2]
    added, runs, _ = sensor.tick()
    assert added == [] and runs == keys[2:3]
    added, runs, result = sensor.tick()
    assert added == runs == [] and "at most 2 scans" in result.skip_reason.skip_message

    # A touched pose file and a touched mesh: each scan runs again once, within one pass of the rotation.
    scans_root.touch("synth0001_00/pose/2.txt")
    scans_root.touch("synth0002_00/synth0002_00_vh_clean_2.ply")
    rerun = [key for _ in range(2) for key in sensor.tick()[1]]
    assert sorted(rerun) == keys[1:3]
    assert sensor.tick()[1] == [] and sensor.tick()[1] == []

    # A new scan folder, written by another process, in a dataset folder: partition and run on the next tick.
    write_scan(local / "more", "synth0003_00", frames=3)
    scans_root.add(local / "more" / "synth0003_00", "synthetic/synth0003_00")
    added, runs, _ = sensor.tick()
    assert added == runs == keys[3:]
    assert len(set(sensor.run_keys)) == len(sensor.run_keys) == 6
    assert sorted(sensor.instance.get_dynamic_partitions("scans")) == keys


def test_sensor_takes_over_a_first_format_cursor(tmp_path):
    """Upgrading keeps built scans built: the old {key: fingerprint} cursor requests no runs for them."""
    import json

    root = LocalRoot(tmp_path)
    write_scan(root.root, "synth0000_00")
    write_scan(root.root, "synth0001_00")
    sensor = Sensor(storage_for(tmp_path, root, max_scans=100))
    sensor.instance.add_dynamic_partitions("scans", ["synthetic/synth0000_00", "synthetic/synth0001_00"])
    sensor.cursor = json.dumps({"synthetic/synth0000_00": "aaaa", "synthetic/synth0001_00": "bbbb"})
    added, runs, result = sensor.tick()
    assert added == runs == [] and result.skip_reason is not None
    root.touch("synth0001_00/synth0001_00.txt")
    assert sensor.tick()[1] == ["synthetic/synth0001_00"]


def record_run(instance, key: str, fingerprint: str, succeeded: bool) -> None:
    """What a scan run leaves in the instance that the sensor reads: the run, and on success the fingerprint
    ``scans`` recorded."""
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.utils import make_new_run_id

    status = dg.DagsterRunStatus.SUCCESS if succeeded else dg.DagsterRunStatus.FAILURE
    instance.add_run(DagsterRun(job_name="scan_job", run_id=make_new_run_id(), status=status,
                                tags={"dagster/partition": key}))
    if succeeded:
        instance.report_runless_asset_event(dg.AssetMaterialization(
            "scans", partition=key, metadata={"fingerprint": fingerprint}))


def test_a_scan_repaired_back_to_its_built_files_runs_again(tmp_path):
    """A failed rerun, then the old bytes back (on S3 a re-upload keeps its ETag, so the fingerprint is the last
    good build's): the scan must run again, under a run key of its own, or the release never gets it back."""
    root = LocalRoot(tmp_path)
    write_scan(root.root, "synth0000_00", frames=3)
    sensor = Sensor(storage_for(tmp_path, root, max_scans=100))
    key = "synthetic/synth0000_00"
    first = sensor.tick()[2].run_requests
    good_fingerprint = first[0].tags["scan2qa/fingerprint"]
    record_run(sensor.instance, key, good_fingerprint, succeeded=True)

    mesh = root.root / "synth0000_00" / "synth0000_00_vh_clean_2.ply"
    good, stat = mesh.read_bytes(), mesh.stat()
    mesh.write_bytes(good[: len(good) // 3])
    assert sensor.tick()[1] == [key]
    record_run(sensor.instance, key, "", succeeded=False)

    mesh.write_bytes(good)
    os.utime(mesh, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the very files of the good build
    added, runs, result = sensor.tick()
    assert runs == [key], result.skip_reason
    assert result.run_requests[0].tags["scan2qa/fingerprint"] == good_fingerprint
    assert len(set(sensor.run_keys)) == len(sensor.run_keys) == 3
