"""The Dagster catalog (issue 17 item 7), one gate per release (13.4), the demo instance and build progress (17.2, 17.9)."""

from __future__ import annotations

import subprocess
import sys

import dagster as dg
import polars as pl
import pytest

from assets.definitions import defs
from assets.jobs import SCAN_JOB
from assets.partitions import FINGERPRINT_TAG
from expectations.suites import build_suites
from pipeline import schemas
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import write_scan
from tests.test_quality_gate import BUDGETS

PER_SCAN_SUITES = ("scans", "objects", "rooms", "frames", "frame_samples", "object_visibility", "dummy_videos",
                   "pinpoint_targets", "pinpoint_neighbors")


def test_every_suite_is_a_blocking_check_on_its_own_table():
    graph = defs.resolve_asset_graph()
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys}
    expected = {(table, f"{table}_expectations") for table in PER_SCAN_SUITES}
    expected |= {("qa", "qa_expectations"), ("qa", "qa_distribution_expectations"),
                 ("qa_distribution_drops", "qa_distribution_drops_expectations")}
    assert expected <= checks
    # Every suite of the release gate is attached somewhere, and nothing is left on qa that belongs elsewhere.
    attached = {name.removesuffix("_expectations") for _, name in checks}
    assert {suite.table for suite in build_suites(budgets=BUDGETS)} <= attached
    assert {name for asset, name in checks if asset == "qa"} == {"qa_expectations", "qa_distribution_expectations"}
    for key in graph.asset_check_keys:  # every suite blocks; the release's warnings (scans left out, the blind adversary) do not
        assert graph.get_check_spec(key).blocking == key.name.endswith("_expectations"), key


def test_table_assets_declare_schema_kinds_owner_and_code_version():
    graph = defs.resolve_asset_graph()
    for name in ("scans", "objects", "rooms", "frames", "frame_samples", "visibility", "object_visibility", "qa"):
        node = graph.get(dg.AssetKey(name))
        schema = node.metadata["dagster/column_schema"]
        assert [c.name for c in schema.columns] == schemas.SCHEMAS[name].names
        assert {"polars", "parquet"} <= set(node.kinds)
        assert node.owners == ["team:scan2qa"] and node.tags.get("stage")
        assert node.code_version and len(node.code_version) == 12
    # Column notes written in pipeline/schemas.py become column descriptions.
    columns = {c.name: c for c in graph.get(dg.AssetKey("scans")).metadata["dagster/column_schema"].columns}
    assert "sha256" in columns["checksum"].description


def test_code_version_follows_the_modules_an_asset_imports(tmp_path, monkeypatch):
    import assets.catalog as catalog

    before = catalog.code_version("assets.scene")
    assert before == catalog.code_version("assets.scene")  # stable
    assert catalog.code_version("assets.scene") != catalog.code_version("assets.qa")
    # A copy of the tree where a module the scene step imports changed: a different version.
    import shutil

    root = tmp_path / "tree"
    for package in catalog.PROJECT_PACKAGES:
        shutil.copytree(catalog.ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pipeline" / "scene" / "tables.py").write_text((root / "pipeline" / "scene" / "tables.py").read_text() + "\n# edit\n")
    monkeypatch.setattr(catalog, "ROOT", root)
    catalog.code_version.cache_clear()
    catalog._imports.cache_clear()
    catalog._module_file.cache_clear()
    try:
        assert catalog.code_version("assets.scene") != before
    finally:
        monkeypatch.setattr(catalog, "ROOT", catalog.Path(catalog.__file__).resolve().parents[1])
        catalog.code_version.cache_clear()
        catalog._imports.cache_clear()
        catalog._module_file.cache_clear()


def test_io_manager_records_row_count_path_and_preview(tmp_path):
    from resources.parquet_io import ParquetIOManager

    table = schemas.from_rows("scans", [{"key": "synthetic/s", "dataset": "synthetic", "scene_id": "s", "checksum": "c"}])
    context = dg.build_output_context(asset_key=dg.AssetKey("scans"))
    ParquetIOManager(root=str(tmp_path)).handle_output(context, table)
    metadata = context.get_logged_metadata()
    assert metadata["dagster/row_count"] == dg.MetadataValue.int(1)
    assert isinstance(metadata["path"], dg.PathMetadataValue) and metadata["path"].path.endswith("scans.parquet")
    assert "| key |" in metadata["preview"].md_str and "synthetic/s" in metadata["preview"].md_str


def test_runs_launched_by_the_ui_and_sensors_execute_in_process():
    assert defs.resolve_job_def(SCAN_JOB).executor_def.name == "in_process"
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"


def test_table_checks_decide_in_polars_without_great_expectations():
    code = (
        "import sys\n"
        "from tests.test_quality_gate import BUDGETS, _tables\n"
        "from expectations.runner import decide_suites\n"
        "report = decide_suites(_tables(), ['objects', 'qa', 'object_visibility'], budgets=BUDGETS)\n"
        "assert report.success and len(report.results) > 10, report.summary()\n"
        "assert 'great_expectations' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_scan_breaking_a_suite_stops_at_its_own_partition(tmp_path, monkeypatch):
    """frame_samples with two frames at one rank: its check fails, nothing downstream of it runs for that scan."""
    import pipeline.frames.budgets as budgets
    from runs.in_process import materialize_quietly
    from assets.frames import frame_samples, scan_videos
    from assets.scene import scene
    from assets.table_checks import frame_samples_expectations

    original = budgets.sample_frames
    monkeypatch.setattr(budgets, "sample_frames", lambda *a, **k: pl.concat([original(*a, **k)] * 2))
    write_scan(tmp_path / "scans", "synth0000_00", frames=3)
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scans", ["synthetic/synth0000_00"])
    details: list[str] = []
    ok, error = materialize_quietly(
        [scene, frame_samples, scan_videos, frame_samples_expectations], None, default_resources(storage), instance,
        partition_key="synthetic/synth0000_00", details=details,
    )
    assert not ok
    assert error.startswith("expectations failed: frame_samples (") and "frame_samples.key_budget_rank_unique" in error
    assert any("two frames at one rank of a budget" in line for line in details)
    assert not (tmp_path / "out" / "videos").exists()  # scan_videos, downstream of the check, did not run


def test_sensor_does_not_rebuild_a_scan_built_from_the_same_files(tmp_path):
    from assets.sensors import scan_discovery
    from pipeline.scene.discovery import scan_fingerprint

    folder = write_scan(tmp_path / "scans", "synth0000_00")
    key = "synthetic/synth0000_00"
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scans", [key])
    # What scan2qa build records: the scene step's scans materialization carries the discovery fingerprint.
    instance.report_runless_asset_event(dg.AssetMaterialization(
        "scans", partition=key, metadata={"fingerprint": scan_fingerprint(str(folder))}))

    def tick(cursor=None):
        return scan_discovery(dg.build_sensor_context(instance=instance, cursor=cursor, resources=default_resources(storage)))

    first = tick()  # a fresh cursor, as on the first tick after make demo
    assert not first.run_requests and "1 already built from the same files" in first.skip_reason.skip_message
    assert not tick(first.cursor).run_requests
    (folder / "synth0000_00.txt").write_text((folder / "synth0000_00.txt").read_text() + "\n")
    changed = tick(first.cursor)
    [request] = changed.run_requests
    assert request.partition_key == key and request.tags[FINGERPRINT_TAG] == scan_fingerprint(str(folder))


def test_demo_instance_queues_runs_with_a_limit(tmp_path, monkeypatch):
    from runs.demo_instance import main, write_demo_instance

    home = tmp_path / "home"
    monkeypatch.setenv("SCAN2QA_MAX_CONCURRENT_RUNS", "2")
    assert main([str(home)]) == 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        assert coordinator.get_run_queue_config().max_concurrent_runs == 2
    # A dagster.yaml the user wrote is theirs.
    own = tmp_path / "own"
    own.mkdir()
    (own / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert "kept" in write_demo_instance(own, 1)
    assert (own / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def logging_context(logged: list) -> object:
    """A stand-in for a step's context whose ``log.info`` lines land in ``logged``."""
    return type("Context", (), {"log": type("Log", (), {"info": lambda self, m: logged.append(m)})()})()


def test_progress_lines_per_step_and_per_quarter_of_frames():
    from assets.progress import MARK, CountingRaycaster, FrameCounter
    from runs.step_lines import listener

    logged = []
    context = logging_context(logged)
    counter = FrameCounter(context, "visibility", 300, clock=lambda: 0.0)  # the clock never moves
    caster = CountingRaycaster(counter, type("Caster", (), {"cast_triangle_ids": lambda self, rays: rays,
                                                             "triangle_count": 7})())
    for _ in range(300):
        caster.cast_triangle_ids(1)
    assert caster.triangle_count == 7
    assert logged == [f"{MARK}visibility {n}/300 frames" for n in (75, 150, 225, 300)]
    printed = []
    on_event = listener("synthetic/x", printed.append)
    step = dg.DagsterEvent(event_type_value="STEP_START", job_name="j", step_key="visibility")
    check = dg.DagsterEvent(event_type_value="STEP_START", job_name="j", step_key="frame_samples_expectations")

    def entry(event=None, message=""):
        return dg.EventLogEntry(error_info=None, level=20, user_message=message, run_id="r", timestamp=0.0,
                                step_key="visibility", dagster_event=event)

    for item in (entry(step), entry(check), entry(message=logged[0]), entry(message="unrelated")):
        on_event(item)
    assert printed == ["  synthetic/x: visibility", "  synthetic/x: visibility 75/300 frames"]


class SteppedClock:
    """A clock that advances ``step`` seconds each time it is read: a frame that takes ``step`` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_long_step_logs_frames_done_at_least_every_interval_naming_the_scene():
    """Issue 27.5: a 50,000-frame ray cast went silent for minutes between quarters. With frames of 0.4 s and
    the 5 s interval, a line comes every 13 frames (5.2 s), and the quarter lines still come whatever the clock."""
    from assets.progress import INTERVAL_S, MARK, FrameCounter, quarter_marks
    from runs.step_lines import listener

    assert INTERVAL_S <= 5.0  # half the 10 s the issue allows, so one slow frame cannot push a gap past 10 s
    logged = []
    clock = SteppedClock(0.4)
    counter = FrameCounter(logging_context(logged), "visibility", 1000, scene="scannet/scene0000_00", clock=clock)
    started, times = clock.now, []
    for _ in range(1000):
        counter.add()
        if len(logged) > len(times):
            times.append(clock.now)
    done = [int(line.rsplit(" ", 2)[1].split("/")[0]) for line in logged]
    assert all(line.startswith(f"{MARK}scannet/scene0000_00: visibility ") for line in logged)
    assert all(line.endswith("/1000 frames") for line in logged)
    assert set(quarter_marks(1000)) <= set(done) and done == sorted(done) and done[-1] == 1000
    gaps = [b - a for a, b in zip([started, *times], times)]
    assert max(gaps) <= INTERVAL_S + 0.4 + 1e-9  # never more than the interval plus one frame
    assert len(logged) == len(set(done)) and 70 <= len(logged) <= 85  # 400 s of frames: a line every ~5 s
    # On the console the scan is named once, as for the quarter lines.
    printed = []
    on_event = listener("scannet/scene0000_00", printed.append)
    on_event(dg.EventLogEntry(error_info=None, level=20, user_message=logged[0], run_id="r", timestamp=0.0,
                              step_key="visibility", dagster_event=None))
    assert printed == [f"  scannet/scene0000_00: visibility {done[0]}/1000 frames"]


def test_fast_frames_log_only_the_quarters_and_an_empty_step_logs_nothing():
    from assets.progress import FrameCounter, quarter_marks

    logged = []
    counter = FrameCounter(logging_context(logged), "scan_videos", 24, clock=SteppedClock(0.001))
    for _ in range(24):
        counter.add()
    assert logged == [f"progress: scan_videos {n}/24 frames" for n in (6, 12, 18, 24)] and quarter_marks(24) == [6, 12, 18, 24]
    assert quarter_marks(3) == [1, 2, 3] and quarter_marks(0) == []
    empty = FrameCounter(logging_context(logged), "visibility", 0, clock=SteppedClock(100.0))
    empty.add()
    assert len(logged) == 4


@pytest.mark.parametrize("value", ["0", "x"])
def test_sensor_interval_must_be_a_positive_number(monkeypatch, value):
    from assets.deployment import sensor_interval

    monkeypatch.setenv("SCAN2QA_SENSOR_INTERVAL", value)
    with pytest.raises(ValueError, match="SCAN2QA_SENSOR_INTERVAL"):
        sensor_interval(120)


VERSIONS_SCRIPT = """
import json, warnings
warnings.filterwarnings("ignore")
from assets.definitions import defs
graph = defs.resolve_asset_graph()
versions = {k.to_user_string(): graph.get(k).code_version for k in graph.get_all_asset_keys() if graph.get(k).is_materializable}
downstream = {k.to_user_string(): sorted(d.to_user_string() for d in graph.get(k).child_keys) for k in graph.get_all_asset_keys()}
print(json.dumps({"versions": versions, "children": downstream}))
"""


def _versions(tmp_path, config_text: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    config = tmp_path / f"config{abs(hash(config_text))}.yaml"
    config.write_text(config_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCAN2QA_")}
    env["SCAN2QA_CONFIG"] = str(config)
    done = subprocess.run([sys.executable, "-c", VERSIONS_SCRIPT], capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_changed_threshold_changes_the_version_of_exactly_the_assets_that_read_it(tmp_path):
    """Dagster marks an asset stale only when its own code version changed or an input has newer data, so the
    version of each asset covers the config read by it and by everything upstream of it (assets.catalog)."""
    before = _versions(tmp_path, "visibility:\n  fraction_threshold: 0.05\n")
    after = _versions(tmp_path, "visibility:\n  fraction_threshold: 0.08\n")
    changed = {k for k, v in after["versions"].items() if before["versions"][k] != v}
    readers = {"visibility", "object_visibility", "dummy_videos", "release"}  # assets/visibility.py + the manifest
    affected, todo = set(readers), list(readers)
    while todo:
        for child in before["children"][todo.pop()]:
            if child not in affected:
                affected.add(child)
                todo.append(child)
    assert changed == affected, changed
    assert {"qa_candidates", "qa", "release", "scan_membership"} <= changed
    assert not changed & {"scans", "objects", "frames", "frame_samples", "scan_videos", "pinpoint_targets"}
    same = _versions(tmp_path, "visibility:\n  fraction_threshold: 0.05\n")
    assert same["versions"] == before["versions"]  # the version is the config's content, not the file


def test_the_scene_steps_heartbeat_says_what_it_does_and_for_how_long():
    """The scene step reads every pose and image header (about 20 s at 50,000 frames) with no frame loop of its
    own: a heartbeat thread logs meanwhile. ``wait`` stands in for the stop event's timed wait: three intervals
    pass, then the block ends; nothing sleeps."""
    from assets.progress import MARK, Heartbeat

    logged = []
    clock = SteppedClock(5.0)
    intervals = iter([False, False, False, True])
    with Heartbeat(logging_context(logged), "scene", scene="scannet/scene0000_00", doing="reading the scan",
                   clock=clock, wait=lambda seconds: next(intervals)) as heartbeat:
        heartbeat._thread.join()  # the fake intervals run out at once
    assert logged == [f"{MARK}scannet/scene0000_00: scene reading the scan, {s} s" for s in (5, 10, 15)]
    # With the real wait, leaving the block stops the thread at once, whatever the interval.
    with Heartbeat(logging_context(logged), "scene", interval=3600.0) as heartbeat:
        heartbeat.doing = "storing the mesh"
    assert not heartbeat._thread.is_alive() and len(logged) == 3
