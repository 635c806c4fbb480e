"""One small gated release for the browser tests: the reviewer report and the Data Docs it wrote."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Offline pages: Chromium must not fetch anything of its own (updates, first-run pages) while a test counts requests.
OFFLINE_LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]


def small_release(out):
    """``build_release`` over the quality-gate test tables, into ``out``; the outcome names report and Data Docs."""
    from pipeline.config import Config
    from pipeline.release.build import build_release
    from tests.test_quality_gate import _tables

    return build_release(Config(output_root=str(out)), tables=_tables())
