"""FFmpeg's Matroska muxer draws random UIDs; ``make_deterministic`` makes two writes of one video the same bytes."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from pipeline.formats.matroska import SEGMENT, MatroskaError, _elements, make_deterministic
from pipeline.frames.video import VideoFrameSource, VideoWriter


def _write(path) -> None:
    writer = VideoWriter(path, 60.0, (64, 48))
    for i in range(12):
        writer.write(np.full((48, 64, 3), i * 20, np.uint8))
    writer.close()


def _crcs_hold(buf: bytes) -> bool:
    segment = next(e for e in _elements(bytearray(buf), 0, len(buf)) if e[0] == SEGMENT)
    checks = []
    for _, _, data, stop in _elements(bytearray(buf), segment[2], segment[3]):
        if buf[data] == 0xBF and buf[data + 1] == 0x84:
            checks.append(zlib.crc32(buf[data + 6 : stop]).to_bytes(4, "little") == buf[data + 2 : data + 6])
    return bool(checks) and all(checks)


def test_two_writes_become_byte_identical_and_still_decode(tmp_path):
    a, b = tmp_path / "a.mkv", tmp_path / "b.mkv"
    _write(a)
    _write(b)
    assert a.read_bytes() != b.read_bytes()  # the muxer's random UIDs
    for path in (a, b):
        make_deterministic(path, bytes(range(16)))
    assert a.read_bytes() == b.read_bytes()
    assert _crcs_hold(a.read_bytes())
    source = VideoFrameSource(a)
    assert len(source) == 12 and abs(float(source.read(5).mean()) - 100) < 8


def test_not_matroska_is_refused(tmp_path):
    path = tmp_path / "x.mkv"
    path.write_bytes(b"not a video")
    with pytest.raises(MatroskaError):
        make_deterministic(path, bytes(16))
