"""The .sens stream: exact round trip of poses and depth, close colour, lazy access, and reading through the reader."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.sens import SensFormatError, SensReader, write_sens
from pipeline.scene.readers import read_scan
from pipeline.scene.tables import scene_tables
from tests.scannet_factory import make_box_room


def _stream(tmp_path, n=4, timestamps_us=None):
    gen = np.random.default_rng(7)
    colors = [gen.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(n)]
    # Smooth images so JPEG stays close; random noise is JPEG's worst case.
    colors = [cv2.GaussianBlur(c, (9, 9), 3) for c in colors]
    depths = [gen.integers(0, 65535, (24, 32), dtype=np.uint16) for _ in range(n)]
    poses = []
    for _ in range(n):
        pose = np.eye(4)
        pose[:3, :3] = np.linalg.qr(gen.normal(size=(3, 3)))[0]
        pose[:3, 3] = gen.normal(size=3)
        poses.append(pose)
    if n > 2:
        poses[2] = np.full((4, 4), -np.inf)  # lost tracking, as ScanNet writes it
    k_color = np.array([[50.3, 0, 31.5, 0], [0, 50.1, 23.5, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    path = tmp_path / "s.sens"
    write_sens(
        path,
        colors_jpeg=[cv2.imencode(".jpg", c, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes() for c in colors],
        depths_mm=depths,
        poses=poses,
        intrinsic_color=k_color,
        intrinsic_depth=k_color / 2,
        color_size=(64, 48),
        depth_size=(32, 24),
        timestamps_us=timestamps_us,
    )
    return path, colors, depths, poses, k_color


def test_round_trip(tmp_path):
    path, colors, depths, poses, k_color = _stream(tmp_path, timestamps_us=[5, 33338, 66671, 100004])
    r = SensReader(path)
    assert (r.frame_count, r.sensor_name, r.depth_shift) == (4, "StructureSensor", 1000.0)
    assert (r.color_width, r.color_height, r.depth_width, r.depth_height) == (64, 48, 32, 24)
    assert (r.color_compression, r.depth_compression) == ("jpeg", "zlib_ushort")
    np.testing.assert_array_equal(r.intrinsic_color, k_color.astype(np.float32))
    np.testing.assert_array_equal(r.extrinsic_color, np.eye(4, dtype=np.float32))
    for i in range(4):
        np.testing.assert_array_equal(r.pose(i), poses[i].astype(np.float32))  # exact in float32
        np.testing.assert_array_equal(r.depth(i), depths[i])
        color = r.color(i)
        assert color.shape == (48, 64, 3) and color.dtype == np.uint8
        assert np.abs(color.astype(int) - colors[i]).mean() < 3.0
    assert [r.timestamp(i) for i in range(4)] == [5, 33338, 66671, 100004]


def test_header_layout_is_scannets(tmp_path):
    path, *_ = _stream(tmp_path, n=1)
    data = path.read_bytes()
    version, name_len = struct.unpack_from("<IQ", data, 0)
    assert (version, name_len, data[12:27]) == (4, 15, b"StructureSensor")
    off = 27 + 4 * 64
    assert struct.unpack_from("<iiIIIIfQ", data, off) == (2, 1, 64, 48, 32, 24, 1000.0, 1)
    assert struct.unpack_from("<Q", data, len(data) - 8) == (0,)  # no IMU frames


def test_reader_reads_frames_lazily(tmp_path):
    path, colors, *_ = _stream(tmp_path)
    opened = []

    def opener():
        opened.append(1)
        return open(path, "rb")

    r = SensReader(path, opener=opener)
    assert len(opened) == 1  # the index is built in one pass
    r.color(3)
    assert len(opened) == 2
    assert not hasattr(r, "frames")  # no decoded frame list kept in memory


def test_truncated_stream_is_an_error(tmp_path):
    path, *_ = _stream(tmp_path)
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(SensFormatError, match="truncated"):
        SensReader(path)


def test_wrong_version_is_an_error(tmp_path):
    path, *_ = _stream(tmp_path, n=1)
    data = bytearray(path.read_bytes())
    data[0] = 3
    path.write_bytes(bytes(data))
    with pytest.raises(SensFormatError, match="version 3"):
        SensReader(path)


def test_scene_with_sens_frames(tmp_path):
    folder = make_box_room(tmp_path, frames="sens", n_frames=9, nan_frames=(4,))
    parsed = read_scan(folder, Config())
    assert parsed.has_frames and len(parsed.frames) == 9
    assert [f.valid for f in parsed.frames].count(False) == 1
    assert any("1 of 9 frames have a NaN/inf pose" in w for w in parsed.warnings)
    f0 = parsed.frames[0]
    assert (f0.width, f0.height) == (640, 480)
    # 128x96 upscaled 5x, pixel centres at integer coordinates: c -> (c + 0.5) * 5 - 0.5
    np.testing.assert_allclose(f0.intrinsics, [[500, 0, 322], [0, 500, 242], [0, 0, 1]])
    assert [round(f.timestamp * 30) for f in parsed.frames] == list(range(9))  # zero timestamps -> i/30 s
    image = parsed.load_image(3)
    assert image.shape == (480, 640, 3) and image.dtype == np.uint8
    tables = scene_tables(parsed, Config())
    frames = tables["frames"]
    assert frames["valid"].to_list().count(False) == 1
    invalid_pose = frames.filter(~frames["valid"])["pose"].to_list()[0]
    assert len(invalid_pose) == 16 and all(np.isnan(invalid_pose))
    assert tables["scans"]["dropped_frames"][0] == 1


def test_sens_timestamps_are_used(tmp_path):
    ts = [1_000_000 + 100_000 * i for i in range(5)]  # 10 fps recording
    folder = make_box_room(tmp_path, frames="sens", n_frames=5, timestamps_us=ts)
    parsed = read_scan(folder, Config())
    assert [f.timestamp for f in parsed.frames] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert parsed.source_fps == pytest.approx(10.0)


def test_corrupt_sens_in_scene_names_the_file(tmp_path):
    folder = make_box_room(tmp_path, frames="sens", n_frames=3)
    sens = folder / f"{folder.name}.sens"
    sens.write_bytes(sens.read_bytes()[:100])
    with pytest.raises(ScanError) as err:
        read_scan(folder, Config())
    assert f"{folder.name}.sens" in str(err.value) and "\n" not in str(err.value)
