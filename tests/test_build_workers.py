"""``scan2qa build --workers N``: the same bytes as a serial build, failures isolated, a killed worker costs a rerun.

Real synthetic scans through the whole asset graph (the spawned workers load
the real code location, so nothing here narrows the graph).
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scan2qa import main
from tests.real_scans import break_nan_alignment, write_scan

ROOT = Path(__file__).resolve().parents[1]
BROKEN = "synthetic/synth0005_00"


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scans")
    assert main(["synth", "--out", str(root), "--scenes", "2", "--frames", "24", "--seed", "3"]) == 0
    break_nan_alignment(write_scan(root, "synth0005_00", frames=9))
    return root


def table_digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "tables").rglob("*.parquet"))}


def progress(lines: list[str]) -> set[str]:
    """Per-scan outcome lines without their counters and timings (a parallel build prints them in completion order)."""
    return {re.sub(r"\(\d+\.\d s\)", "(s)", re.sub(r"^\[\d+/", "[", line))
            for line in lines if line.startswith("[") and " ... " in line}


def steps(lines: list[str]) -> set[str]:
    """The lines printed while scans build: ``  <key>: <step>`` and frames done at each quarter of the long steps
    (the lines a slow step adds after ``assets.progress.INTERVAL_S`` seconds, between quarters or as the scene
    step's heartbeat, depend on the load)."""
    from assets.progress import quarter_marks

    def at_quarter(line: str) -> bool:
        counted = re.search(r" (\d+)/(\d+) frames$", line)
        if counted is None:
            return re.search(r", \d+ s$", line) is None
        return int(counted[1]) in quarter_marks(int(counted[2]))

    return {line for line in lines if re.match(r"^  synthetic/\S+: ", line) and at_quarter(line)}


def test_parallel_build_writes_the_serial_builds_bytes(tmp_path, scans, capfd):
    outs = {}
    printed = {}
    for workers in (1, 2):
        outs[workers] = tmp_path / f"out{workers}"
        assert main(["build", "--scans", str(scans), "--out", str(outs[workers]), "--workers", str(workers)]) == 0
        printed[workers] = capfd.readouterr().out.splitlines()  # fd-level: the worker processes print too
    assert "building 3 scans on 2 worker processes" in printed[2]
    assert progress(printed[1]) == progress(printed[2])
    assert len(progress(printed[2])) == 3
    # The same steps and frame counts are reported whichever process builds a scan.
    assert steps(printed[1]) == steps(printed[2])
    assert {"  synthetic/synth0000_00: visibility", "  synthetic/synth0000_00: visibility 24/24 frames",
            "  synthetic/synth0000_00: scan_videos 12/24 frames"} <= steps(printed[2])
    failure = [line for line in printed[2] if line.startswith(f"  FAILED {BROKEN}: ")]
    assert failure and "synth0005_00.txt: axisAlignment" in failure[0]
    assert "summary: 2 ok, 1 failed" in printed[2]
    assert table_digests(outs[1]) == table_digests(outs[2]) and table_digests(outs[1])
    latest = [(outs[w] / "releases" / "LATEST").read_text() for w in (1, 2)]
    assert latest[0] == latest[1]


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_killed_worker_process_costs_a_rerun_not_the_build(tmp_path, scans):
    out = tmp_path / "out"
    env = {**os.environ, "SCAN2QA_WORKERS": "2"}
    build = subprocess.Popen([sys.executable, "-m", "scan2qa", "build", "--scans", str(scans), "--out", str(out)],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    victims: list[int] = []
    while time.monotonic() < deadline and not victims:
        # Spawned workers are the build's children running multiprocessing's spawn entry point.
        victims = [c for c in children(build.pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
        time.sleep(0.2)
    assert victims, "the build started no worker processes"
    time.sleep(8)  # past the imports, inside a scan
    os.kill(victims[0], signal.SIGKILL)
    printed, _ = build.communicate(timeout=600)
    assert "summary: 2 ok, 1 failed" in printed, printed
    assert "a worker process died; rebuilding alone what it had in flight: " in printed, printed
    assert f"FAILED {BROKEN}" in printed and "also when built alone" not in printed, printed
    for scene in ("synth0000_00", "synth0001_00"):
        assert (out / "tables" / "visibility" / "synthetic" / f"{scene}.parquet").exists()
    assert (out / "releases" / "LATEST").exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
