"""The release's report and Data Docs are one click from the UI: HTTP links under the served releases folder, and a
Markdown summary embedded on the materialization (a browser refuses ``file://`` links from the UI's page)."""

from __future__ import annotations

import functools
import threading
import urllib.parse
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

from tests.test_release_exclusions import materialize_release


def _materialize_release(tmp_path) -> dict:
    [materialization] = materialize_release(tmp_path).asset_materializations_for_node("release")
    return materialization.metadata


@pytest.fixture
def releases_server(tmp_path):
    """The releases folder served on loopback, as ``make ui`` serves it beside ``dagster dev``."""
    folder = tmp_path / "out" / "releases"
    folder.mkdir(parents=True)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_report_and_data_docs_links_open_over_http(tmp_path, releases_server, monkeypatch):
    monkeypatch.setenv("SCAN2QA_RELEASE_URL", releases_server + "/")
    metadata = _materialize_release(tmp_path)
    report, docs = metadata["report"], metadata["data_docs"]
    assert isinstance(report, dg.UrlMetadataValue) and report.url.startswith(releases_server + "/")
    version = metadata["version"].value
    assert report.url == f"{releases_server}/{version}/report/index.html"
    page = _get(report.url)
    assert "<title>scan2qa release review" in page and "Partial release: 1 of 3 registered scans released" in page
    assert "<html" in _get(docs.url)
    # The report's own link to the Data Docs is relative, so it opens from the served page too.
    assert _get(urllib.parse.urljoin(report.url, "../data_docs/index.html")) == _get(docs.url)


def test_without_a_served_url_the_catalog_gets_paths_and_an_embedded_summary(tmp_path, monkeypatch):
    monkeypatch.delenv("SCAN2QA_RELEASE_URL", raising=False)
    metadata = _materialize_release(tmp_path)
    assert isinstance(metadata["report"], dg.PathMetadataValue)  # copyable, never a dead file:// link
    assert metadata["report"].path.endswith("report/index.html")
    summary = metadata["summary"]
    assert isinstance(summary, dg.MarkdownMetadataValue)
    text = summary.md_str
    assert text.index("Partial release: 1 of 3 registered scans released, 2 left out.") < text.index("quality gate")
    assert "`synthetic/synth0001_00` (failed): synth0001_00_vh_clean_2.ply: early end-of-file" in text
    assert "- questions: 12 over 1 of 3 registered scans" in text
    assert "| revsi | object_rel_distance_closest | all | 12 |" in text  # the baselines table
