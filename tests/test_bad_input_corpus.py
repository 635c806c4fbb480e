"""Issue 16's malformed-input corpus (``tests.bad_input_corpus``): no hang, no crash, nothing silent, nothing outside.

Three levels, cheapest first:

* every case read in this process (``read_scan`` / ``discover``), under an alarm so a regression that
  opens a FIFO fails the test instead of hanging it;
* one ``scan2qa build`` in a subprocess (with a timeout) of one case per kind beside a good scan: no
  traceback, the good scan built and released, every bad scan failing or warning with one line naming
  scan, file and problem, the release manifest listing what was excluded, and an audit hook on ``open``
  in the build process showing nothing outside the scans root was read;
* the same build over every case (slow).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from scan2qa import main
from pipeline.config import Config, load_config
from pipeline.errors import ScanError
from pipeline.scene.discovery import discover
from pipeline.scene.readers import read_scan
from tests.bad_input_corpus import CASES, HOSTNAME, QUICK, kinds, place
from tests.real_scans import scene_graph_only

REPO = Path(__file__).resolve().parents[1]
GOOD = "synthetic/synth0000_00"
BUILD_TIMEOUT = 900  # seconds; a hang is a failure, never a stuck suite


@contextlib.contextmanager
def bounded(seconds: int):
    """Raise TimeoutError in this thread if the block runs longer than ``seconds`` (an open() on a FIFO included)."""

    def expire(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _skipped_line(lines: list[str], target: str) -> str | None:
    return next((line for line in lines if line.startswith(f"{target}: ")), None)


def test_every_case_is_refused_or_warned_in_process(tmp_path):
    root, outside = tmp_path / "scans", tmp_path / "outside"
    placed = place(CASES, root, outside)
    found = discover(str(root))
    uris = dict(found.scans)
    assert GOOD in uris
    outcomes: dict[str, str] = {}
    for p in placed:
        case = p.case
        if case.expect == "skip":
            line = _skipped_line(found.skipped, p.target)
            assert line and case.file in line and case.problem in line, (case.name, found.skipped)
            assert p.target not in {uri.rsplit("/", 1)[-1] for uri in uris.values()}
            outcomes[case.name] = line
            continue
        assert p.target in uris, (case.name, found.skipped)
        with bounded(60):
            if case.expect == "fail":
                with pytest.raises(ScanError) as info:
                    read_scan(uris[p.target], Config(scans_root=str(root)))
                message = str(info.value)
                assert "\n" not in message and message.startswith(f"{p.target}: "), (case.name, message)
                file = message.removeprefix(f"{p.target}: ").split(": ")[0]
                assert case.file in file and case.problem in message, (case.name, message)
                outcomes[case.name] = message
            else:
                parsed = read_scan(uris[p.target], Config(scans_root=str(root)))
                if case.expect == "warn":
                    hits = [w for w in parsed.warnings if case.file in w and case.problem in w]
                    assert hits, (case.name, parsed.warnings)
                    outcomes[case.name] = hits[0]
    assert set(outcomes) == {c.name for c in CASES if c.expect != "ok"}
    assert set(kinds(CASES)) == {2, 3, 4, 5, 6, 7, 8}


def test_links_outside_the_root_are_read_when_the_config_allows_them(tmp_path):
    [case] = [c for c in CASES if c.name == "aggregation_linked_outside"]
    root = tmp_path / "scans"
    [p] = place([case], root, tmp_path / "outside")
    uri = dict(discover(str(root)).scans)[p.target]
    with pytest.raises(ScanError, match="outside the scans root"):
        read_scan(uri, Config(scans_root=str(root)))
    parsed = read_scan(uri, Config(scans_root=str(root), allow_links_outside_root=True))
    assert parsed.objects
    [linked] = [c for c in CASES if c.name == "scan_folder_linked_outside"]
    [q] = place([linked], tmp_path / "scans2", tmp_path / "outside2")
    assert q.target in {u.rsplit("/", 1)[-1] for _, u in discover(str(tmp_path / "scans2"), allow_links_outside_root=True).scans}


BUILD_SCRIPT = r"""
import json, os, sys
outside = [os.path.realpath(p) for p in sys.argv[1].split(os.pathsep)]
touched = []

def watch(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if any(path == o or path.startswith(o + os.sep) for o in outside):
            touched.append(path)

sys.addaudithook(watch)
from scan2qa import main
status = main(sys.argv[2:])
print("READ-OUTSIDE-ROOT: " + json.dumps(sorted(set(touched))), flush=True)
sys.exit(status)
"""


def build_corpus(tmp_path: Path, cases) -> dict:
    """Place ``cases`` beside the good scan and build them in one ``scan2qa build`` subprocess; check every case."""
    root, outside, out = tmp_path / "scans", tmp_path / "outside", tmp_path / "out"
    placed = place(cases, root, outside)
    outside.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), SCAN2QA_WORKERS="1")
    done = subprocess.run(
        [sys.executable, "-c", BUILD_SCRIPT, os.pathsep.join([str(outside), HOSTNAME]),
         "build", "--scans", str(root), "--out", str(out), "--workers", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
    )
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed, printed[-4000:]
    assert done.returncode == 0, printed[-4000:]
    lines = done.stdout.splitlines()
    [touched] = [line for line in lines if line.startswith("READ-OUTSIDE-ROOT: ")]
    assert json.loads(touched.removeprefix("READ-OUTSIDE-ROOT: ")) == []
    assert any(line.startswith(f"[") and f"] {GOOD} ... ok" in line for line in lines)
    skipped = [line.removeprefix("skipped under the scans root: ") for line in lines if line.startswith("skipped under")]
    failed = {line.split(": ", 1)[0].removeprefix("  FAILED "): line.split(": ", 1)[1] for line in lines if line.startswith("  FAILED ")}
    counts = {}
    for p in placed:
        case = p.case
        if case.expect == "skip":
            line = _skipped_line(skipped, p.target)
            assert line and case.file in line and case.problem in line, (case.name, skipped)
        elif case.expect == "fail":
            error = failed.get(p.target, "")
            assert error.startswith(f"{p.target}: ") and case.file in error.split(": ")[1], (case.name, error)
            assert case.problem in error, (case.name, error)
        else:
            assert any(f"] {p.target} ... ok" in line for line in lines), (case.name, lines)
            if case.expect == "warn":
                warned = [line for line in lines if line.strip().startswith(f"WARNING {p.target}: ")]
                assert any(case.file in w and case.problem in w for w in warned), (case.name, warned)
        counts.setdefault(case.kind, {}).setdefault(case.expect, 0)
        counts[case.kind][case.expect] += 1
    # The release is built from the good scans and lists what it left out.
    version = (out / "releases" / "LATEST").read_text().strip()
    manifest = json.loads((out / "releases" / version / "manifest.json").read_text())
    excluded = manifest["checks"]["excluded_scans"]
    assert sorted(f["key"] for f in excluded["failed_scans"]) == sorted(failed)
    assert len(excluded["skipped_folders"]) == len(skipped)
    released = pl.read_parquet(out / "releases" / version / "tables" / "qa.parquet")
    assert GOOD in set(released["key"])
    assert not set(released["key"]) & set(failed)
    report = (out / "releases" / version / "report" / "index.html").read_text()
    assert "Excluded scans" in report
    return {"counts": dict(sorted(counts.items())), "stdout": done.stdout}


def test_one_case_per_kind_beside_a_good_scan_builds_and_releases(tmp_path):
    cases = [c for c in CASES if c.name in QUICK]
    assert {c.kind for c in cases} == {2, 3, 4, 5, 6, 7, 8}
    result = build_corpus(tmp_path, cases)
    print("per-kind counts (quick):", result["counts"])


@pytest.mark.slow
def test_every_case_beside_a_good_scan_builds_and_releases(tmp_path):
    result = build_corpus(tmp_path, CASES)
    print("per-kind counts (all):", result["counts"])


# --- 1. ScanNet's own download layout, and the generate command's annotation folders (3) ----------------------------


def test_real_scannet_download_layout_builds_with_no_configuration(tmp_path, fixtures_dir, monkeypatch):
    """``ROOT/scannetv2-labels.combined.tsv`` beside ``ROOT/scans/scene0000_00/``, as ScanNet's script downloads it."""
    scene_graph_only(monkeypatch)
    from runs.build import build

    root = tmp_path / "ScanNet"
    shutil.copytree(fixtures_dir / "scannet" / "scene0000_00", root / "scans" / "scene0000_00")
    shutil.copyfile(fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv", root / "scannetv2-labels.combined.tsv")
    monkeypatch.chdir(tmp_path)  # no scan2qa.yaml: nothing configured but the two locations
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report = build(load_config(None, scans_root=str(root), output_root=str(tmp_path / "out")))
    assert report.ok == ["scannet/scene0000_00"], report.failed
    objects = pl.read_parquet(tmp_path / "out" / "tables" / "objects" / "scannet" / "scene0000_00.parquet")
    assert objects["label_mapped"].sum() > 0.9 * objects.height

    # Without the label map, the error says where it looked: beside the scene's folder and at the download's top.
    (root / "scannetv2-labels.combined.tsv").unlink()
    with contextlib.redirect_stdout(io.StringIO()):
        report = build(load_config(None, scans_root=str(root), output_root=str(tmp_path / "out2")))
    error = report.failed["scannet/scene0000_00"]
    assert "label map not found; looked at" in error
    assert str(root / "scans" / "scannetv2-labels.combined.tsv") in error and str(root / "scannetv2-labels.combined.tsv") in error


def test_generate_reads_the_good_files_of_a_folder_with_bad_ones(tmp_path, fixtures_dir, capsys):
    folder = tmp_path / "annotations"
    folder.mkdir()
    shutil.copyfile(fixtures_dir / "revsi" / "scene0088_01_boxes.json", folder / "scene0088_01_boxes.json")
    (folder / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (folder / "scenes.json").write_text(json.dumps(["scene0088_01", "scene0196_00"]))
    out = tmp_path / "qa.parquet"
    with bounded(120):
        status = main(["generate", "--annotations", str(folder), "--profile", "revsi", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert f"skipped: deep: {folder / 'deep.json'}: not readable JSON: nested too deeply" in printed
    assert f"skipped: scenes: {folder / 'scenes.json'}: neither a ReVSI annotation" in printed
    assert set(pl.read_parquet(out)["key"]) == {"scannet/scene0088_01"}
    # Alone, a bad file is still an error naming it (the command exits non-zero, no traceback).
    assert main(["generate", "--annotations", str(folder / "deep.json"), "--profile", "revsi", "--out", str(out)]) != 0


def test_image_check_reads_only_headers_and_finds_a_frame_header_behind_exif(tmp_path):
    import struct

    import cv2
    import numpy as np

    from pipeline.frames.frame_checks import image_problem

    jpeg = cv2.imencode(".jpg", np.full((96, 128, 3), 120, np.uint8))[1].tobytes()
    exif = b"\xff\xe1" + struct.pack(">H", 10_002) + b"E" * 10_000  # an APP1 segment pushing the header past 4 KiB
    path = tmp_path / "exif.jpg"
    path.write_bytes(jpeg[:2] + exif + jpeg[2:])
    assert cv2.imread(str(path)) is not None and image_problem(path) is None
    path.write_bytes(jpeg[:2] + exif + jpeg[2:-2])
    assert image_problem(path) == "truncated JPEG (no end-of-image marker)"
    png = tmp_path / "frame.png"
    cv2.imwrite(str(png), np.zeros((4, 4, 3), np.uint8))
    assert image_problem(png) is None
