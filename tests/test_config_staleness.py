"""A threshold changed in the deployment's config marks exactly the assets that read it, and their downstream, stale.

One tiny scan is built into a Dagster instance with the default config; then the
code location is loaded again, as ``dagster dev`` reloads it, in a fresh process
whose ``SCAN2QA_CONFIG`` raises ``visibility.fraction_threshold``, and that
process asks the instance for every asset's stale status (Dagster's own
``CachingStaleStatusResolver``, what the UI's GraphQL resolves).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.catalog import CONFIG_READ, asset_version
from scan2qa import main
from resources.run_config import RunConfigResource
from tests.real_scans import write_scan

ROOT = Path(__file__).resolve().parents[1]
KEY = "synthetic/synth0000_00"

STATUS_SCRIPT = """
import json, sys
import dagster as dg
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver
from dagster._time import get_current_datetime
from assets.catalog import asset_version, CONFIG_READ
from assets.definitions import defs

graph = defs.resolve_asset_graph()
instance = dg.DagsterInstance.get()
view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                      instance=instance, asset_graph=graph)
resolver = CachingStaleStatusResolver(instance, graph, loading_context=view)
status = {}
for key in graph.materializable_asset_keys:
    partition = sys.argv[1] if graph.get(key).partitions_def is not None else None
    status[key.to_user_string()] = resolver.get_status(key, partition).value
print(json.dumps({"status": status, "versions": {m: asset_version(m) for m in CONFIG_READ}}))
"""


@pytest.mark.slow  # a real build and a second load of the code location: 256 s measured on 2 shared, busy cores
def test_changed_visibility_threshold_marks_visibility_and_downstream_stale(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("SCAN2QA_CONFIG", raising=False)
    write_scan(tmp_path / "scans", "synth0000_00", objects=4, frames=12)
    out = tmp_path / "out"
    assert main(["build", "--scans", str(tmp_path / "scans"), "--out", str(out), "--workers", "1"]) == 0

    # Each materialization records the config its step read.
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("visibility"))
    recorded = event.asset_materialization.metadata
    assert recorded["run_config"].value == {"visibility": RunConfigResource().values()["visibility"]}
    assert recorded["run_config_digest"].value

    changed = tmp_path / "changed.yaml"
    changed.write_text("visibility:\n  fraction_threshold: 0.2\n")
    env = {**os.environ, "SCAN2QA_CONFIG": str(changed), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", STATUS_SCRIPT, KEY], env=env, cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    # The changed field is read by the visibility steps (and recorded by the release's manifest): only their
    # code versions moved.
    moved = {m for m, v in seen["versions"].items() if v != asset_version(m)}
    assert moved == {"assets.visibility", "assets.release"}

    from assets.definitions import all_assets

    downstream = {k.to_user_string() for k in dg.AssetSelection.assets("visibility").downstream().resolve(all_assets)}
    stale = {k for k, s in seen["status"].items() if s == "STALE"}
    assert "visibility" in stale and "release" in stale
    assert stale == downstream
    assert {s for k, s in seen["status"].items() if k not in downstream} == {"FRESH"}
