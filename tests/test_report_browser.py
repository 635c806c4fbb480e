"""The reviewer report of a small built release, in headless Chromium: offline, and enough to check each answer.

One synthetic scan goes through ``scan2qa synth`` and ``scan2qa build``; its
report must open with no console error and no network request, name the
release at the top (version, code revision, config digest, date, gate, working
links to the Data Docs and the manifest), show a top-down plan for distance,
direction and route questions with the question's geometry drawn, and draw the
boxes of a frame in distinct colours, each the colour of its legend entry.
Screenshots go to the test's folder, or to ``SCAN2QA_SCREENSHOTS`` when set
(``SCAN2QA_SCREENSHOTS=docs`` refreshes ``docs/report.png`` and
``docs/report_plan.png``).

Needs Debian's ``chromium`` package and the ``playwright`` Python package
(driver only; it launches the system Chromium). CI runs it in its own step:
``make test-browser``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.browser_release import CHROMIUM, OFFLINE_LAUNCH_ARGS, synthetic_release

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed (make test-browser installs it)"),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return synthetic_release(tmp_path_factory.mktemp("report"))


@pytest.fixture
def page(release):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    console_errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=OFFLINE_LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: console_errors.append(str(exc)))
        page.on("request", lambda req: requests.append(req.url) if not req.url.startswith(("file:", "data:")) else None)
        page.goto((release / "report" / "index.html").as_uri())
        page.wait_for_load_state("networkidle")
        yield page
        browser.close()
    assert console_errors == []
    assert requests == []


def _shots(tmp_path) -> Path:
    shots = Path(os.environ.get("SCAN2QA_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def test_report_names_the_release_and_links_its_files(page, release, tmp_path):
    manifest = json.loads((release / "manifest.json").read_text())
    stamp = page.inner_text("dl.stamp")
    assert manifest["version"] in stamp and manifest["code_revision"] in stamp and manifest["config_digest"] in stamp
    assert "2026-12-01 00:00 UTC" in stamp and "passed" in stamp
    for text in ("Data Docs", "manifest.json"):
        href = page.eval_on_selector(f"dl.stamp a:text('{text}')", "a => a.href")
        assert Path(unquote(urlparse(href).path)).is_file(), href
    # Text columns left-aligned, number columns right-aligned; every histogram bar carries its count.
    aligned = page.eval_on_selector_all(
        "table:first-of-type tr:nth-child(2) td", "tds => tds.map(td => getComputedStyle(td).textAlign)"
    )
    assert aligned[:2] == ["left", "left"] and set(aligned[2:]) == {"right"}
    bars = page.eval_on_selector_all(".chart svg", "svgs => svgs.map(s => [s.querySelectorAll('rect').length, "
                                     "s.querySelectorAll('text.count').length])")
    assert bars and all(rects == counts for rects, counts in bars if rects <= 24)
    page.screenshot(path=str(_shots(tmp_path) / "report.png"))


def test_plans_show_the_geometry_of_distance_direction_and_route_questions(page, tmp_path):
    kinds = page.eval_on_selector_all("svg.plan", "svgs => svgs.map(s => s.dataset.kind)")
    assert {"direction", "route"} <= set(kinds) and {"distance", "rel_distance"} & set(kinds)
    for kind, parts in (("direction", ["polygon.sector", "polygon.object.used"]),
                        ("route", ["polyline", "polygon.object.used"]),
                        ("distance", ["line", "polygon.object.used"])):
        plans = page.query_selector_all(f'svg.plan[data-kind="{kind}"]')
        if not plans:
            continue
        plan = plans[0]
        assert plan.bounding_box()["width"] > 200
        for selector in ["path.floor", "polygon.object", "polyline.camera-path", "path.budget-frames", *parts]:
            assert plan.query_selector(selector) is not None, (kind, selector)
    used = page.eval_on_selector('svg.plan[data-kind="direction"]', "s => s.querySelectorAll('polygon.used').length")
    assert used == 3  # A, B and C
    question = page.query_selector('div.q:has(svg.plan[data-kind="route"])')
    question.scroll_into_view_if_needed()
    question.screenshot(path=str(_shots(tmp_path) / "report_plan.png"))


def test_boxes_of_a_frame_have_distinct_colours_matching_the_legend(page):
    frames = page.eval_on_selector_all(
        "div.q",
        """qs => qs.flatMap(q => {
            const legend = Object.fromEntries([...q.querySelectorAll('.legend [data-object]')].map(
                s => [s.dataset.object, getComputedStyle(s.querySelector('.swatch')).borderTopColor]));
            return [...q.querySelectorAll('figure.shot')].map(f => [...f.querySelectorAll('rect')].map(
                r => [r.dataset.object, getComputedStyle(r).stroke, legend[r.dataset.object]]));
        })""",
    )
    boxed = [boxes for boxes in frames if boxes]
    assert boxed and any(len(boxes) >= 2 for boxes in boxed)
    for boxes in boxed:
        colours = [stroke for _, stroke, _ in boxes]
        assert len(set(colours)) == len(colours), boxes
        assert all(stroke == swatch for _, stroke, swatch in boxes), boxes
