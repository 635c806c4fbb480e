"""A build of what is already built says it is up to date and does no per-scan work; a changed scan rebuilds.

Like a second ``make demo``: the same scans built twice into one persistent
Dagster instance. The second build runs no scan and no dataset-wide run (the
instance's run records say so, not a clock), prints "up to date" and exits 0.
A scan whose files change, and a config change that moves the code version of
a step (Dagster calls its materializations stale), are built again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from scan2qa import main
from tests.real_scans import write_scan

pytestmark = pytest.mark.slow  # four in-process builds of two tiny scans: about two minutes on 2 busy cores

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("synthetic/synth0000_00", "synthetic/synth0001_00")


def runs_by_job(home) -> dict[str, int]:
    with dg.DagsterInstance.get() as instance:
        counts: dict[str, int] = {}
        for run in instance.get_runs():
            counts[run.job_name] = counts.get(run.job_name, 0) + 1
        return counts


def test_an_up_to_date_build_says_so_and_builds_nothing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("SCAN2QA_CONFIG", raising=False)
    scans, out = tmp_path / "scans", tmp_path / "out"
    for index in range(2):
        write_scan(scans, f"synth{index:04d}_00", frames=9)
    argv = ["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]

    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "up to date" not in first and "summary: 2 ok, 0 failed" in first
    latest = (out / "releases" / "LATEST").read_text().strip()
    runs = runs_by_job(home)
    assert runs.get("scan_job") == 2 and runs.get("dataset_job") == 1, runs

    assert main(argv) == 0
    second = capsys.readouterr().out
    lines = second.splitlines()
    assert lines[0] == "up to date: 2 of 2 scans were built from the same files, code and config (not built again)"
    assert lines[1] == (f"up to date: the dataset-wide assets and release {latest} (latest) were built from these "
                        f"scans, code and config (not built again)")
    for key in KEYS:  # no scan started, no step ran
        assert f"] {key}" not in second and f"{key}: scene" not in second, second
    assert "dataset-wide (" not in second
    assert "summary: 2 ok, 0 failed" in second and f"release: {out / 'releases' / latest} (latest)" in second
    assert {job: n for job, n in runs_by_job(home).items() if job in ("scan_job", "dataset_job")} == {
        "scan_job": 2, "dataset_job": 1}

    shutil.rmtree(scans / "synth0001_00")
    write_scan(scans, "synth0001_00", objects=4, frames=9)  # a wall added: new files, a new fingerprint
    assert main(argv) == 0
    third = capsys.readouterr().out
    assert third.splitlines()[0] == "up to date: 1 of 2 scans were built from the same files, code and config (not built again)"
    assert "[1/1] synthetic/synth0001_00 ... ok" in third and "] synthetic/synth0000_00" not in third, third
    assert "dataset-wide (" in third and "summary: 2 ok, 0 failed" in third
    assert (out / "releases" / "LATEST").read_text().strip() != latest  # the new scan's objects are released

    # A threshold the visibility step reads: its code version moves. Code versions are taken when the code
    # location is imported, so this build runs in a process of its own, as every scan2qa build does.
    changed = tmp_path / "changed.yaml"
    changed.write_text(f"scans_root: {scans}\noutput_root: {out}\nvisibility:\n  fraction_threshold: 0.2\n")
    fourth = subprocess.run([sys.executable, "-m", "scan2qa", "build", "--config", str(changed), "--workers", "1"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=600)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert "up to date" not in fourth.stdout, fourth.stdout
    assert "[1/2] synthetic/synth0000_00" in fourth.stdout and "[2/2] synthetic/synth0001_00" in fourth.stdout
