"""After a demo-like build into a persistent instance, ``dagster dev`` shows it built and starts no runs.

What ``make demo`` then ``make ui`` does, on two tiny scans: ``scan2qa build``
into a ``DAGSTER_HOME`` whose ``dagster.yaml`` ``runs.demo_instance`` wrote,
then ``dagster dev`` on loopback with the sensors running. Headless Chromium
(Debian's ``chromium`` package, driven by playwright) opens the UI and finds
every partition materialized and the tables' checks passed; the
``scan_discovery`` sensor ticks at least twice (its interval shortened through
``SCAN2QA_SENSOR_INTERVAL``) and no run starts. Screenshots go to the test's
folder, or to ``SCAN2QA_SCREENSHOTS`` when set. CI runs it with the other
browser tests (``make test-browser``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_dagster_dev import ROOT, free_port, graphql, stop, wait_for_location

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SENSOR_INTERVAL = 10  # seconds
KEYS = ["synthetic/synth0000_00", "synthetic/synth0002_00"]
RUNS_QUERY = "{ runsOrError { ... on Runs { count results { runId jobName status } } } }"
TICKS_QUERY = """{ sensorOrError(sensorSelector: {repositoryName: "__repository__",
    repositoryLocationName: "scan2qa", sensorName: "scan_discovery"}) {
  ... on Sensor { sensorState { status ticks(limit: 20) { status timestamp skipReason runIds } } } } }"""
STATS_QUERY = '{ assetNodeOrError(assetKey: {path: ["%s"]}) { ... on AssetNode { partitionStats { numMaterialized } } } }'


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Two scans built by ``scan2qa build`` into a demo instance, as ``make demo`` does."""
    from runs.demo_instance import write_demo_instance
    from tests.real_scans import write_scan

    root = tmp_path_factory.mktemp("demo")
    home, scans, out = root / "dagster_home", root / "scans", root / "out"
    write_demo_instance(home, 1)
    write_scan(scans, "synth0000_00", objects=3, frames=3)
    write_scan(scans, "synth0002_00", objects=4, frames=3)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SCAN2QA_SCANS": str(scans), "SCAN2QA_OUT": str(out)}
    build = subprocess.run([sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out),
                            "--workers", "1"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "summary: 2 ok, 0 failed" in build.stdout
    return env


def sensor_ticks(port: int) -> list[dict]:
    """The sensor's finished ticks, newest first (a tick in progress is left out)."""
    state = graphql(port, TICKS_QUERY)["sensorOrError"]["sensorState"]
    assert state["status"] == "RUNNING"
    return [tick for tick in state["ticks"] if tick["status"] != "STARTED"]


def dismiss_dialogs(page) -> None:
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make test-browser installs it)")
def test_dagster_dev_shows_the_demo_built_and_starts_no_runs(demo, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    shots = Path(os.environ.get("SCAN2QA_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**demo, "SCAN2QA_SENSOR_INTERVAL": str(SENSOR_INTERVAL)}
    dagster = Path(sys.executable).parent / "dagster"
    process = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_location(port, process, timeout=240)
        built_runs = graphql(port, RUNS_QUERY)["runsOrError"]["count"]
        assert built_runs >= 3  # two scans and the dataset-wide run (and the verdicts' observation)
        # Two sensor intervals after the first tick: at least two more ticks, none of which requested a run.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            ticks = sensor_ticks(port)
            if len(ticks) >= 3:
                break
            time.sleep(2)
        ticks = sensor_ticks(port)
        assert len(ticks) >= 3, ticks
        assert all(t["status"] == "SKIPPED" and not t["runIds"] for t in ticks), ticks
        assert "already built from the same files" in ticks[-1]["skipReason"]  # the first tick recognised them
        assert graphql(port, RUNS_QUERY)["runsOrError"]["count"] == built_runs
        for table in ("scans", "objects", "rooms", "frames", "object_visibility", "qa_candidates"):
            stats = graphql(port, STATS_QUERY % table)["assetNodeOrError"]["partitionStats"]
            assert stats["numMaterialized"] == len(KEYS), table

        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/assets/objects?view=partitions")
            page.get_by_text(f"Materialized ({len(KEYS)})").first.wait_for(timeout=60_000)
            dismiss_dialogs(page)
            for key in KEYS:
                assert page.get_by_text(key).count()
            page.screenshot(path=str(shots / "dagster_partitions.png"))
            page.goto(f"http://127.0.0.1:{port}/assets/objects?view=checks")
            page.get_by_text("objects_expectations").first.wait_for(timeout=60_000)
            page.get_by_text("Passed").first.wait_for(timeout=60_000)
            dismiss_dialogs(page)
            page.screenshot(path=str(shots / "dagster_checks.png"))
            page.goto(f"http://127.0.0.1:{port}/assets")
            page.get_by_text("reviewer_verdicts").first.wait_for(timeout=60_000)
            dismiss_dialogs(page)
            for _ in range(60):  # the status column fills in asynchronously (the UI forbids evaluated scripts)
                if "Loading" not in page.inner_text("body"):
                    break
                page.wait_for_timeout(1000)
            page.screenshot(path=str(shots / "dagster_catalog.png"), full_page=True)
            browser.close()
        # Still nothing launched while the UI was open.
        assert graphql(port, RUNS_QUERY)["runsOrError"]["count"] == built_runs
    finally:
        stop(process)
    for name in ("dagster_partitions.png", "dagster_checks.png", "dagster_catalog.png"):
        assert (shots / name).stat().st_size > 0
