"""A killed ``scan2qa synth`` resumes: its staging is removed (said in one line), the missing scans written.

The synth runs in a subprocess on two workers and is sent SIGKILL (no clean-up
of its own) once its first scene is in place; its workers must die with it.
The next run of the same command removes the staging folders, writes only the
scenes that are missing, leaves nothing hidden behind, and the scans root ends
byte-identical to an uninterrupted run's. ``scan2qa build``'s demo finishes
such a root too, instead of building the scans that happened to be finished.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.synth import command
from tests.test_build_interrupts import descendants, running

ROOT = Path(__file__).resolve().parents[1]
SCENES, FRAMES = 3, 4


def synth_argv(out: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "synth", "--out", str(out), "--scenes", str(SCENES),
            "--frames", str(FRAMES), "--seed", "0", "--workers", str(workers)]


def digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)}


def kill_after_first_scene(out: Path) -> set[int]:
    """Start a two-worker synth, SIGKILL it once one scene is in place; returns its processes."""
    synth = subprocess.Popen(synth_argv(out, workers=2), cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    printed, processes = [], {synth.pid}
    assert synth.stdout is not None
    for line in synth.stdout:
        printed.append(line)
        processes |= descendants(synth.pid)
        if " -> " in line:  # "[1/3] synth0000_00 -> <folder> (...)": a scene moved into place
            break
    else:
        pytest.fail("the synth ended before any scene was written:\n" + "".join(printed))
    processes |= descendants(synth.pid)
    os.kill(synth.pid, signal.SIGKILL)
    synth.wait(timeout=60)
    synth.stdout.close()
    return processes


# Three tiny scenes rendered about twice (interrupted and resumed, then the reference): 45 s on 2 busy cores.
def test_a_killed_synth_resumes_with_its_staging_removed(tmp_path):
    out = tmp_path / "scans"
    processes = kill_after_first_scene(out)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(running(pid) for pid in processes):
        time.sleep(0.2)
    assert not [pid for pid in processes if running(pid)], "the killed synth's workers outlived it"
    left = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
    assert command.UNFINISHED_NAME in left
    staging = [name for name in left if command.STAGING_NAME.match(name)]
    assert staging, f"expected the killed run's staging folders, found {left}"
    # The scenes the record says landed (a scene folder killed half-moved is not among them: it is written again).
    recorded = json.loads((out / command.UNFINISHED_NAME).read_text())["written"]
    finished_before = sorted(Path(folder).name for folder in recorded.values())

    resumed = subprocess.run(synth_argv(out, workers=2), cwd=ROOT, env=env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = resumed.stdout.splitlines()
    assert lines[0].startswith(f"removed {len(staging)} staging folder(s) (") and lines[0].endswith(
        f"an interrupted scan2qa synth left under {out}"), resumed.stdout
    found = re.fullmatch(rf"resuming an interrupted scan2qa synth: (\d) of {SCENES} scans already written, "
                         r"writing the other (\d)", lines[1])
    assert found, resumed.stdout
    assert int(found[1]) == len(finished_before) and int(found[1]) + int(found[2]) == SCENES
    for name in finished_before:  # what the killed run finished is not rendered again
        assert f"{name}: " not in resumed.stdout, resumed.stdout
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "staging or the record left behind"

    reference = tmp_path / "reference"
    whole = subprocess.run(synth_argv(reference, workers=1), cwd=ROOT, env=env(), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "resuming" not in whole.stdout and "removed" not in whole.stdout
    assert digest(out) == digest(reference)


def test_a_second_synth_into_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "scans"
    out.mkdir()
    holder = command.UnfinishedRecord(out)  # a live run holds the lock
    try:
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        with pytest.raises(command.ConfigError, match="another scan2qa synth is writing here"):
            command.run(parser.parse_args(["--out", str(out), "--scenes", "1", "--frames", "2"]))
    finally:
        holder.close(finished=False)


def test_the_demo_build_finishes_an_interrupted_synth(tmp_path, monkeypatch, capsys):
    """``make demo`` after a killed one: the record is found and the synth finished before anything is built."""
    from assets.build import finish_interrupted_synth
    from pipeline.config import load_config

    scans = tmp_path / "scans"
    scans.mkdir()
    record = command.UnfinishedRecord(scans)
    request = {"frames": 2, "seed": 0, "format": "scannet", "sens": False, "sky_direction": "Up"}
    record.start(request, 2, {})
    record.close(finished=False)  # as a killed run leaves it
    (scans / ".synth-0001-abcd1234").mkdir()  # and a staging folder
    monkeypatch.setenv("SCAN2QA_WORKERS", "1")
    config = load_config(None, scans_root=str(scans), output_root=str(tmp_path / "out"))
    assert finish_interrupted_synth(config) is None
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"an interrupted scan2qa synth left {scans} unfinished: writing the rest of its 2 scans"
    assert "removed 1 staging folder(s)" in printed
    assert sorted(p.name for p in scans.iterdir()) == ["scannetv2-labels.combined.tsv", "synth0000_00", "synth0001_00"]
    assert finish_interrupted_synth(config) is None  # finished: nothing more to do
    assert capsys.readouterr().out == ""
