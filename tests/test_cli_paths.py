"""Impossible output paths get one line and a non-zero exit, before any work and with no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scan2qa(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scan2qa", *argv], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, timeout=300)


def test_export_into_a_file_or_under_one_is_one_line(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("a file\n")
    for out, problem in ((file, f"--out {file}: is a file, not a folder"),
                         (file / "export", f"--out {file / 'export'}: {file} is a file, not a folder")):
        done = scan2qa("export", "--format", "revsi", "--out", str(out), "--release", str(tmp_path / "no-release"))
        assert done.returncode == 1
        assert done.stderr.strip() == f"scan2qa export: error: {problem}", done.stderr
        assert "Traceback" not in done.stdout + done.stderr


def test_build_into_a_file_under_a_file_or_a_read_only_folder_is_one_line(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("a file\n")
    scans = tmp_path / "scans"
    scans.mkdir()
    cases = [(file, f"--out {file}: is a file, not a folder"),
             (file / "out", f"--out {file / 'out'}: {file} is a file, not a folder")]
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(read_only), str(read_only)], capture_output=True).returncode == 0
    if mounted:  # root on Linux: a real read-only mount
        subprocess.run(["mount", "-o", "remount,bind,ro", str(read_only)], capture_output=True)
        cases.append((read_only / "out", f"--out {read_only / 'out'}: {read_only} cannot be written (read-only file system)"))
    try:
        for out, problem in cases:
            done = scan2qa("build", "--scans", str(scans), "--out", str(out), "--workers", "1")
            assert done.returncode == 1
            assert done.stderr.strip() == f"scan2qa build: error: {problem}", done.stderr
            assert "Traceback" not in done.stdout + done.stderr
    finally:
        if mounted:
            subprocess.run(["umount", str(read_only)], capture_output=True)
