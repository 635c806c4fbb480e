"""A partial release says so: first in its report, in a warning check on the release asset, in its catalog metadata."""

from __future__ import annotations

import re

import dagster as dg
import polars as pl

from pipeline import storage
from pipeline.config import Config
from pipeline.release.membership import ScanState, membership_table
from tests.test_quality_gate import _tables

KEY = "synthetic/synth0000_00"
LEFT_OUT = [ScanState("synthetic/synth0001_00", "failed", "synth0001_00_vh_clean_2.ply: early end-of-file"),
            ScanState("synthetic/synth0002_00", "stale", "dummy_videos was built before its input visibility")]


def _membership() -> pl.DataFrame:
    return membership_table([ScanState(KEY, "built"), *LEFT_OUT])


def _out_root(tmp_path) -> Config:
    config = Config(output_root=str(tmp_path / "out"))
    for name, df in _tables(12).items():
        storage.write_table(storage.upath(f"{config.tables_root}/{name}.parquet"), name, df)
    return config


def test_the_report_opens_with_the_scans_left_out(tmp_path):
    from pipeline.release.build import build_release
    from expectations.release_gate import release_gate

    outcome = build_release(_out_root(tmp_path), membership=_membership(), gate=release_gate)
    page = outcome.report.read_text()
    body = page[page.index("<body>"):]
    first = body[: body.index("<h2>")]  # everything above the first section
    assert "Partial release: 1 of 3 registered scans released, 2 left out." in first
    assert re.findall(r'data-excluded="([^"]+)"', first) == [s.key for s in LEFT_OUT]
    assert "(failed): synth0001_00_vh_clean_2.ply: early end-of-file" in first
    assert first.index("Partial release") < first.index('class="stamp"')  # before the gate's "passed"
    assert "12 questions over the 1 released scans of 3 registered." in first


def test_a_complete_release_has_no_exclusion_lines(tmp_path):
    from pipeline.release.build import build_release
    from expectations.release_gate import release_gate

    outcome = build_release(_out_root(tmp_path), membership=membership_table([ScanState(KEY, "built")]), gate=release_gate)
    page = outcome.report.read_text()
    assert "Partial release" not in page and 'id="excluded-scans"' not in page
    assert "12 questions over 1 scans." in page


def materialize_release(tmp_path):
    """The release asset materialized in process over the output root ``_out_root`` writes, with a stub
    ``scan_membership`` (one scan built, two left out): its ``ExecuteInProcessResult``."""
    from assets.release import release
    from resources.defaults import default_resources
    from resources.storage import StorageResource

    _out_root(tmp_path)

    @dg.asset(name="scan_membership")
    def membership_stub() -> pl.DataFrame:
        return _membership()

    storage_resource = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    return dg.materialize([membership_stub, release], resources=default_resources(storage_resource),
                          instance=dg.DagsterInstance.ephemeral())


def test_the_release_asset_warns_and_counts_the_scans_left_out(tmp_path):
    from assets.release import ALL_SCANS_CHECK

    result = materialize_release(tmp_path)
    assert result.success
    [materialization] = [m for m in result.asset_materializations_for_node("release")]
    metadata = materialization.metadata
    assert metadata["excluded scans"] == dg.MetadataValue.int(2)
    assert metadata["scans released"] == dg.MetadataValue.text("1 of 3")
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == ALL_SCANS_CHECK]
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert set(check.metadata["scans"].value) == {s.key for s in LEFT_OUT}
