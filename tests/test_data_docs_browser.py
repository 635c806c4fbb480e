"""Data Docs open in headless Chromium with the network blocked: styled, every validation listed, icons shown.

Needs Debian's ``chromium`` package and the ``playwright`` Python package
(driver only; it launches the system Chromium). CI runs it in its own step:
``make test-browser``.
"""

from __future__ import annotations

import pytest

from tests.browser_release import CHROMIUM, OFFLINE_LAUNCH_ARGS, small_release

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def data_docs(tmp_path_factory):
    return small_release(tmp_path_factory.mktemp("out")).data_docs


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make test-browser installs it)")
def test_data_docs_render_offline(data_docs, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    blocked, failed, errors = [], [], []

    def only_files(route):
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort("internetdisconnected")

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=OFFLINE_LAUNCH_ARGS)
        page = browser.new_page()
        page.route("**/*", only_files)
        page.on("requestfailed", lambda req: failed.append(req.url))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(data_docs.as_uri())
        page.wait_for_load_state("networkidle")
        # Styled: the stylesheet is applied (a coloured header, collapsed table borders), not browser defaults.
        assert page.eval_on_selector("header", "e => getComputedStyle(e).backgroundColor") == "rgb(31, 58, 95)"
        assert page.eval_on_selector("table", "e => getComputedStyle(e).borderCollapse") == "collapse"
        # Every validation is listed, each with a visible status icon.
        links = page.eval_on_selector_all("table a", "els => els.map(e => e.getAttribute('href'))")
        assert "validations/qa.html" in links and len(links) == 5
        icons = page.query_selector_all("td svg.icon")
        assert len(icons) == 5 and all(icon.bounding_box()["width"] >= 16 for icon in icons)
        page.screenshot(path=str(tmp_path / "index.png"), full_page=True)
        page.click("text=qa_distribution")  # a listed validation opens
        page.go_back()
        page.click("a[href='validations/qa.html']")
        page.wait_for_load_state("networkidle")
        assert "every question names only objects visible in its budget's frames" in page.inner_text("body")
        assert page.eval_on_selector(".meaning", "e => getComputedStyle(e).fontWeight") in ("600", "700")
        assert len(page.query_selector_all("td svg.icon")) >= 10
        page.screenshot(path=str(tmp_path / "qa.png"), full_page=True)
        browser.close()
    assert blocked == [] and failed == [] and errors == []
    assert (tmp_path / "index.png").stat().st_size > 0 and (tmp_path / "qa.png").stat().st_size > 0
