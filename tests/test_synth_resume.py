"""A killed ``scan2qa synth`` resumes: its staging is removed (said in one line), the missing scans written.

The synth runs in a subprocess on two workers and is sent SIGKILL (no clean-up
of its own) once its first scene is in place; its workers must die with it.
Even then the scans root holds only complete scans: the record and the staging
are beside it (``pipeline.synth.workspace``). The next run of the same command
removes the staging folders, writes only the scenes that are missing, leaves
nothing behind, and the scans root ends byte-identical to an uninterrupted
run's. ``scan2qa build``'s demo finishes such a root too, instead of building
the scans that happened to be finished.
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

from pipeline.errors import ConfigError
from pipeline.synth import command, workspace
from tests.test_build_interrupts import descendants, running

ROOT = Path(__file__).resolve().parents[1]
SCENES, FRAMES = 3, 4


def synth_argv(out: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "scan2qa", "synth", "--out", str(out), "--scenes", str(SCENES),
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
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "the root holds more than scans"
    work = workspace.work_folder(out)
    staging = sorted((work / workspace.STAGING_NAME).iterdir())
    assert staging, f"expected the killed run's staging folders beside the root, found {sorted(work.iterdir())}"
    # Each scene folder arrives in one rename, so every folder there is whole (the record may lag one behind).
    recorded = json.loads((work / workspace.RECORD_NAME).read_text())["written"]
    finished_before = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert {Path(folder).name for folder in recorded.values()} <= set(finished_before) and finished_before

    resumed = subprocess.run(synth_argv(out, workers=2), cwd=ROOT, env=env(), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    lines = resumed.stdout.splitlines()
    assert lines[0].startswith(f"removed {len(staging)} staging folder(s) (") and lines[0].endswith(
        f"an interrupted scan2qa synth left for {out}"), resumed.stdout
    found = re.fullmatch(rf"resuming an interrupted scan2qa synth: (\d) of {SCENES} scans already written, "
                         r"writing the other (\d)", lines[1])
    assert found, resumed.stdout
    assert int(found[1]) == len(finished_before) and int(found[1]) + int(found[2]) == SCENES
    for name in finished_before:  # what the killed run finished is not rendered again
        assert f"{name}: " not in resumed.stdout, resumed.stdout
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "staging or the record left behind"
    assert not work.exists(), f"{work} outlived the finished run"

    reference = tmp_path / "reference"
    whole = subprocess.run(synth_argv(reference, workers=1), cwd=ROOT, env=env(), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "resuming" not in whole.stdout and "removed" not in whole.stdout
    assert digest(out) == digest(reference)


def test_a_second_synth_into_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "scans"
    out.mkdir()
    holder = workspace.Workspace(out)  # a live run holds the lock
    try:
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        with pytest.raises(ConfigError, match="another scan2qa synth is writing here"):
            command.run(parser.parse_args(["--out", str(out), "--scenes", "1", "--frames", "2"]))
    finally:
        holder.close(finished=False)


def test_the_demo_build_finishes_an_interrupted_synth(tmp_path, monkeypatch, capsys):
    """``make demo`` after a killed one: the record is found and the synth finished before anything is built."""
    from runs.build import finish_interrupted_synth
    from pipeline.config import load_config

    scans = tmp_path / "scans"
    scans.mkdir()
    record = workspace.Workspace(scans)
    request = {"frames": 2, "seed": 0, "format": "scannet", "sens": False, "sky_direction": "Up"}
    record.start(request, 2, 0, {})
    record.close(finished=False)  # as a killed run leaves it
    (workspace.work_folder(scans) / workspace.STAGING_NAME / "0001-abcd1234").mkdir(parents=True)  # and staging
    monkeypatch.setenv("SCAN2QA_WORKERS", "1")
    config = load_config(None, scans_root=str(scans), output_root=str(tmp_path / "out"))
    assert finish_interrupted_synth(config) is None
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"an interrupted scan2qa synth left {scans} unfinished: writing the rest of its 2 scans"
    assert "removed 1 staging folder(s)" in printed
    assert sorted(p.name for p in scans.iterdir()) == ["scannetv2-labels.combined.tsv", "synth0000_00", "synth0001_00"]
    assert not workspace.work_folder(scans).exists()
    assert finish_interrupted_synth(config) is None  # finished: nothing more to do
    assert capsys.readouterr().out == ""


def _run(out: Path, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    assert command.run(parser.parse_args(["--out", str(out), "--frames", "3", "--seed", "0", "--workers", "1", *argv])) == 0
    return ""


def _files(root: Path) -> dict[str, tuple[int, str]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


# Four 3-frame scenes: about 20 s on 2 busy cores.
def test_adding_scenes_leaves_the_existing_ones_untouched_and_writes_what_a_fresh_run_writes(tmp_path, capsys):
    out = tmp_path / "scans"
    _run(out, "--scenes", "2")
    before = _files(out)
    _run(out, "--add", "--scenes", "1")  # after the highest scene there: synth0002_00
    _run(out, "--scenes", "3")  # the three are there: nothing is written again
    printed = capsys.readouterr().out
    assert "3 of the 3 scans (synth0000_00 ...) are already under" in printed and "writing the other 0" in printed
    after = _files(out)
    assert {name: after[name] for name in before} == before  # same bytes, same modification times
    assert sorted(p.name for p in out.iterdir()) == [
        "scannetv2-labels.combined.tsv", "synth0000_00", "synth0001_00", "synth0002_00"]
    assert not workspace.work_folder(out).exists()

    fresh = tmp_path / "fresh"
    _run(fresh, "--start", "2", "--scenes", "1")  # the same scene written alone, by index
    assert digest(fresh) == {name: sha for name, sha in digest(out).items()
                             if not name.startswith(("synth0000_00/", "synth0001_00/"))}


def _scan_files(folder: Path) -> list[str]:
    """The scan's file names, its scene id written as ``ID``."""
    return sorted(p.relative_to(folder).as_posix().replace(folder.name, "ID") for p in folder.rglob("*") if p.is_file())


def stopped_synth(out: Path, signum: int, to_group: bool) -> tuple[int, str, set[int], list[str]]:
    """A two-worker synth of 6 long scenes, signalled as a third scene starts rendering (one scene in place).

    Returns its status, output, processes and the scene ids that had started rendering when it was signalled.
    """
    argv = [sys.executable, "-m", "scan2qa", "synth", "--out", str(out), "--scenes", "6", "--frames", "120",
            "--seed", "0", "--workers", "2"]
    synth = subprocess.Popen(argv, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    printed, processes, started, landed = [], {synth.pid}, [], 0
    assert synth.stdout is not None
    for line in synth.stdout:
        printed.append(line)
        processes |= descendants(synth.pid)
        landed += " -> " in line
        found = re.match(r"\[\d+/6\] (synth\d{4}_00): .* rendering 120 frames", line)
        if found:
            started.append(found[1])
        if landed and len(started) == 3:
            break
    else:
        pytest.fail("the synth ended before a third scene started:\n" + "".join(printed))
    processes |= descendants(synth.pid)
    if to_group:
        os.killpg(synth.pid, signum)  # a terminal's Ctrl-C reaches the whole process group
    else:
        os.kill(synth.pid, signum)
    rest, _ = synth.communicate(timeout=300)
    return synth.returncode, "".join(printed) + rest, processes, started


# One 120-frame scene rendered (then stopped mid-way through two more): about 40 s on 2 busy cores.
@pytest.mark.parametrize("signum,to_group", [(signal.SIGTERM, False),
                                             pytest.param(signal.SIGINT, True, marks=pytest.mark.slow)])
def test_a_signal_stops_synth_mid_scene_with_only_complete_scans_left(tmp_path, signum, to_group):
    """The scene that had just started rendering is abandoned, not waited for (a full scene's rendering away),
    its worker ended, its staging removed; the root holds the label map and whole scenes only."""
    out = tmp_path / "scans"
    status, printed, processes, started = stopped_synth(out, signum, to_group)
    assert status == 128 + signum, printed
    name = signal.Signals(signum).name
    assert re.search(rf"scan2qa synth: stopped by {name}; \d of 6 scans are under {re.escape(str(out))}, nothing "
                     r"else; the same command writes the rest", printed), printed
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(running(pid) for pid in processes):
        time.sleep(0.2)
    assert not [pid for pid in processes if running(pid)], "a worker outlived the stopped synth"
    scenes = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert started[2] not in scenes, "the scene that had just started was rendered to the end instead of stopped"
    assert scenes and set(scenes) <= set(started[:2])
    assert sorted(p.name for p in out.iterdir() if not p.is_dir()) == ["scannetv2-labels.combined.tsv"]
    expected = _scan_files(out / scenes[0])  # every scene has the same files (120 frames each)
    assert len(expected) > 3 * 120 and all(_scan_files(out / scene) == expected for scene in scenes)
    work = workspace.work_folder(out)
    assert not (work / workspace.STAGING_NAME).exists(), "staging left behind"
    assert command.unfinished_request(out) == {"frames": 120, "seed": 0, "format": "scannet", "sens": False,
                                               "sky_direction": "Up", "scenes": 6, "start": 0}
