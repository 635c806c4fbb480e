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
    from expectations.release_gate import release_gate
    from tests.test_quality_gate import _tables

    return build_release(Config(output_root=str(out)), tables=_tables(), gate=release_gate)


def synthetic_release(work):
    """One synthetic scan (40 frames) through ``scan2qa synth`` and ``scan2qa build``: its release folder.

    A real built release: frames rendered from the scene, its own visibility, questions of every type (distance,
    direction and route among them) and a report with frames and plans. The build date is pinned with
    ``SOURCE_DATE_EPOCH`` so the page is the same on every run. About 30 CPU-seconds.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    work = Path(work)
    home, scans, out = work / "dagster_home", work / "scans", work / "out"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SOURCE_DATE_EPOCH": "1796083200", "SCAN2QA_WORKERS": "1"}
    for args in (["synth", "--out", str(scans), "--scenes", "1", "--frames", "40", "--seed", "0", "--workers", "1"],
                 ["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]):
        done = subprocess.run([sys.executable, "-m", "scan2qa", *args], cwd=root, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return (out / "releases" / "latest").resolve()
