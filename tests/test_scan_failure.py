"""A bad scan's step failure reads its one line first: the ``dg.Failure``'s description is the ``ScanError`` line,
with scan, file and problem as metadata and the trace below; the readers of run errors print the same line."""

import dagster as dg

from runs.in_process import run_failure
from assets.run_errors import stored_run_failure
from assets.scene import scene
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.real_scans import break_truncated_ply, write_scan

KEY = "synthetic/synth0000_00"


def test_a_truncated_mesh_fails_its_step_with_the_scan_line_as_description(tmp_path):
    break_truncated_ply(write_scan(tmp_path / "scans", "synth0000_00"))
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("scans", [KEY])
        result = dg.materialize([scene], partition_key=KEY, instance=instance, resources=default_resources(storage),
                                raise_on_error=False)
        assert not result.success
        [failure] = [event for event in result.all_events if event.is_step_failure]
        data = failure.step_failure_data
        line = data.user_failure_data.description
        assert line.startswith(f"{KEY}: ") and "_vh_clean_2.ply" in line and "\n" not in line, line
        assert data.error.message.startswith(f"dagster._core.definitions.events.Failure: {line}"), data.error.message
        metadata = data.user_failure_data.metadata
        assert metadata["scan"].value == KEY and metadata["file"].value.endswith("_vh_clean_2.ply")
        assert line == f"{KEY}: {metadata['file'].value}: {metadata['problem'].value}"
        assert data.error.cause is not None and data.error.cause.cls_name == "ScanError"  # the trace below it
        # scan2qa build, the release's membership and scan2qa backfill print the same line.
        assert run_failure(result) == line
        assert stored_run_failure(instance, result.run_id, KEY) == line
