"""A build whose output disk fills up: one line naming the path and "No space left on device", exit 1.

On a real 8 MB tmpfs (root can mount one; skipped with the reason otherwise):
a first build publishes a release of one scan, a second scan is added and the
disk is filled to a few levels below what the next build needs, so the disk
runs out in different steps (the mesh artifact, a table, the release). Each
time the build stops at the first write that fails, prints one line, exits 1
(never 134, SIGABRT), and the earlier release stays ``latest``, with no new
release folder or staging left beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_scans import write_scan

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # four builds of tiny scans: about a minute and a half on 2 busy cores


@pytest.fixture
def small_disk(tmp_path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def build(scans: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out), "--workers", "1"],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(scans.parent)},
        capture_output=True, text=True, timeout=600,
    )


def fill(disk: Path, leave_kib: int) -> Path:
    """A file taking all of ``disk``'s free space but ``leave_kib`` KiB."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        size = max(0, free - leave_kib * 1024)
        if size:
            os.posix_fallocate(fh.fileno(), 0, size)
    return filler


def test_a_full_output_disk_stops_the_build_with_one_line_and_keeps_latest(tmp_path, small_disk):
    scans = tmp_path / "scans"
    write_scan(scans, "synth0000_00", frames=9)
    first = build(scans, small_disk)
    assert first.returncode == 0, first.stdout + first.stderr
    releases = small_disk / "releases"
    latest = (releases / "LATEST").read_text().strip()
    write_scan(scans, "synth0001_00", frames=9)  # the next release would hold two scans: a new version

    for leave_kib in (0, 100, 200):  # a full disk, then room for some of the per-scan and release files
        filler = fill(small_disk, leave_kib)
        try:
            done = build(scans, small_disk)
        finally:
            filler.unlink()
        printed = done.stdout + done.stderr
        assert done.returncode == 1, f"left {leave_kib} KiB: exit {done.returncode}\n{printed}"
        assert "Traceback" not in printed, printed
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"scan2qa build: error: {small_disk}/"), printed
        assert ": No space left on device" in last, printed
        assert last.endswith("the build stopped: nothing published, latest unchanged"), printed
        assert "summary:" not in done.stdout, "a build that ran out of space does not go on to a summary"
        assert (releases / "LATEST").read_text().strip() == latest
        assert os.readlink(releases / "latest") == latest
        assert sorted(p.name for p in releases.iterdir()) == sorted(["LATEST", "latest", latest]), printed
