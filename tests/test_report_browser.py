"""The reviewer report opens in headless Chromium with no console errors and no network requests.

Needs Debian's ``chromium`` package and the ``playwright`` Python package
(driver only; it launches the system Chromium). CI runs it in its own step:
``make test-browser``.
"""

from __future__ import annotations


import pytest

from tests.browser_release import CHROMIUM, OFFLINE_LAUNCH_ARGS, small_release

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return small_release(tmp_path_factory.mktemp("out")).report


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make test-browser installs it)")
def test_report_opens_offline_without_console_errors(report, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    console_errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=OFFLINE_LAUNCH_ARGS)
        page = browser.new_page()
        page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: console_errors.append(str(exc)))
        page.on("request", lambda req: requests.append(req.url) if not req.url.startswith(("file:", "data:")) else None)
        page.goto(report.as_uri())
        page.wait_for_load_state("networkidle")
        assert "Answer distributions" in page.content()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert console_errors == []
    assert requests == []
    assert (tmp_path / "report.png").stat().st_size > 0
