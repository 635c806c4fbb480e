"""Impossible output paths get one line and a non-zero exit, before any work and with no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scan2qa(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, timeout=300)


def test_export_into_a_file_or_under_one_is_one_line(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("a file\n")
    for out, problem in ((file, f"--out {file}: is a file, not a folder to export into"),
                         (file / "export", f"--out {file / 'export'}: {file} is a file, not a folder")):
        done = scan2qa("export", "--format", "revsi", "--out", str(out), "--release", str(tmp_path / "no-release"))
        assert done.returncode == 1
        assert done.stderr.strip() == f"scan2qa export: error: {problem}", done.stderr
        assert "Traceback" not in done.stdout + done.stderr
