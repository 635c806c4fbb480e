"""SIGINT and SIGTERM stop ``scan2qa build``: one line, 130/143, nothing published, no process left behind.

Real builds in a subprocess of their own session, signalled in the middle of a
scan's ``visibility`` step (inside a Dagster run, where Dagster's own handler
is in charge), with one worker and with two. Slow: each build imports the
whole code location and gets into a scan before the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.real_scans import write_scan

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scans")
    for index in range(3):
        write_scan(root, f"scene{index:04d}_00", frames=9)
    return root


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def interrupted_build(scans: Path, out: Path, signum: int, workers: int) -> tuple[int, str, set[int]]:
    """Start a build, signal it once a scan is inside ``visibility``; returns (status, output, its processes)."""
    build = subprocess.Popen(
        [sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out),
         "--workers", str(workers)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    seen: set[int] = set()
    printed = []
    assert build.stdout is not None
    for line in build.stdout:
        printed.append(line)
        seen |= descendants(build.pid)
        if ": visibility" in line:
            break
    else:
        pytest.fail("the build ended before any scan reached visibility:\n" + "".join(printed))
    seen |= descendants(build.pid)
    build.send_signal(signum)
    rest, _ = build.communicate(timeout=120)
    return build.returncode, "".join(printed) + rest, seen | {build.pid}


def assert_nothing_left(processes: set[int]) -> None:
    deadline = time.monotonic() + 30  # the resource tracker ends once its last writer is gone
    while time.monotonic() < deadline and any(running(pid) for pid in processes):
        time.sleep(0.2)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in processes if running(pid)}
    assert not left, f"processes left behind: {left}"


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_build_and_publishes_nothing(tmp_path, scans, signum, workers):
    out = tmp_path / "out"
    status, printed, processes = interrupted_build(scans, out, signum, workers)
    assert status == 128 + signum, printed
    name = signal.Signals(signum).name
    last = printed.strip().splitlines()[-1]
    assert last == f"scan2qa build: stopped by {name}: nothing published, latest unchanged; the next build starts again"
    assert "Traceback" not in printed and "KeyboardInterrupt" not in printed, printed
    assert "summary:" not in printed and "FAILED" not in printed, printed
    assert not (out / "releases").exists() or not (out / "releases" / "LATEST").exists()
    assert_nothing_left(processes)
    if signum == signal.SIGINT and workers == 2:  # the next build starts again and completes every scan
        done = subprocess.run(
            [sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out), "--workers", "2"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=900,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "summary: 3 ok, 0 failed" in done.stdout
        assert (out / "releases" / "LATEST").exists()
