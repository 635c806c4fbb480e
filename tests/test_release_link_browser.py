"""From the Dagster UI to the reviewer report in one click, as ``make demo`` then ``make ui`` set it up.

Two tiny scans are built into a demo instance with ``SCAN2QA_RELEASE_URL``
pointing at the releases folder served over HTTP on loopback (what ``make
ui`` starts beside ``dagster dev``); ``dagster dev`` then runs on that
instance. The release's ``report`` metadata read through the UI's GraphQL is
an HTTP URL under the served folder, and headless Chromium (Debian's
``chromium``, driven by playwright) opens the release asset's page, clicks the
link and lands on the report, whose Data Docs link opens too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_dagster_dev import ROOT, free_port, graphql, stop, wait_for_location

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RELEASE_QUERY = """{ assetNodeOrError(assetKey: {path: ["release"]}) { ... on AssetNode {
  assetMaterializations(limit: 1) { metadataEntries { label
    ... on UrlMetadataEntry { url } ... on MarkdownMetadataEntry { mdStr } ... on PathMetadataEntry { path } } } } } }"""


@pytest.fixture(scope="module")
def served_demo(tmp_path_factory):
    """Two scans built into a demo instance with the releases folder served on loopback (``make demo``, ``make ui``)."""
    from runs.demo_instance import write_demo_instance
    from tests.real_scans import write_scan

    root = tmp_path_factory.mktemp("served_demo")
    home, scans, out = root / "dagster_home", root / "scans", root / "out"
    write_demo_instance(home, 1)
    write_scan(scans, "synth0000_00", objects=3, frames=3)
    write_scan(scans, "synth0002_00", objects=4, frames=3)
    (out / "releases").mkdir(parents=True)
    http_port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--directory", str(out / "releases"), "--bind", "127.0.0.1", str(http_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    env = {**os.environ, "DAGSTER_HOME": str(home), "SCAN2QA_SCANS": str(scans), "SCAN2QA_OUT": str(out),
           "SCAN2QA_RELEASE_URL": f"http://127.0.0.1:{http_port}"}
    try:
        build = subprocess.run([sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out),
                                "--workers", "1"], cwd=ROOT, env=env, capture_output=True, text=True)
        assert build.returncode == 0, build.stdout + build.stderr
        yield env, http_port
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make test-browser installs it)")
def test_the_release_report_link_opens_from_the_ui(served_demo, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    env, http_port = served_demo
    port = free_port()
    dagster = Path(sys.executable).parent / "dagster"
    process = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_location(port, process, timeout=240)
        [materialization] = graphql(port, RELEASE_QUERY)["assetNodeOrError"]["assetMaterializations"]
        entries = {e["label"]: e for e in materialization["metadataEntries"]}
        report_url = entries["report"]["url"]
        assert report_url.startswith(f"http://127.0.0.1:{http_port}/") and report_url.endswith("/report/index.html")
        assert entries["data_docs"]["url"].endswith("/data_docs/index.html")
        assert "quality gate passed" in entries["summary"]["mdStr"]

        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/assets/release")
            link = page.locator(f'a[href="{report_url}"]').first
            link.wait_for(timeout=120_000)
            try:  # the UI's first-visit dialog ("Join the Dagster community") opens a moment after the page
                page.get_by_role("button", name="Skip").first.click(timeout=15_000)
            except playwright.TimeoutError:
                pass
            page.screenshot(path=str(tmp_path / "release_asset.png"))
            if link.get_attribute("target") == "_blank":
                with page.context.expect_page() as opened:
                    link.click()
                report = opened.value
            else:
                link.click()
                report = page
            report.wait_for_load_state()
            assert report.url == report_url
            assert report.title().startswith("scan2qa release review")
            assert report.locator("h2", has_text="Sample questions").count() == 1
            report.get_by_role("link", name="Data Docs").first.click()
            report.wait_for_load_state()
            assert report.url.endswith("/data_docs/index.html") and "Not Found" not in report.inner_text("body")
            browser.close()
    finally:
        stop(process)
