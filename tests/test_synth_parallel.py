"""``scan2qa synth --workers N`` writes the serial run's files, byte for byte, and reports progress per scene."""

from __future__ import annotations

import argparse
import hashlib

import pytest

from pipeline.synth import command


def _run(out, fmt: str, workers: int, scenes: int = 2, frames: int = 4) -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    argv = ["--out", str(out), "--scenes", str(scenes), "--frames", str(frames), "--format", fmt, "--workers", str(workers)]
    assert command.run(parser.parse_args(argv)) == 0


def _digest(root) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# The demo's layout by default; arkitscenes (every scene adds its row to one shared metadata.csv) when slow runs.
@pytest.mark.parametrize("fmt", ["scannet", pytest.param("arkitscenes", marks=pytest.mark.slow)])
def test_parallel_synth_writes_the_serial_files(tmp_path, fmt, capsys):
    _run(tmp_path / "serial", fmt, workers=1)
    serial = capsys.readouterr().out
    _run(tmp_path / "parallel", fmt, workers=2)
    parallel = capsys.readouterr().out
    assert _digest(tmp_path / "parallel") == _digest(tmp_path / "serial")
    assert not [p for p in (tmp_path / "parallel").iterdir() if p.name.startswith(".")]  # no staging left behind
    for out in (serial, parallel):
        for scene in ("synth0000_00", "synth0001_00"):
            assert f"{scene}: 1/4 frames" in out and f"{scene}: 3/4 frames" in out  # quarters while rendering
            assert f"{scene} -> " in out and "CPU-s" in out
    assert "on 2 worker processes" in parallel
