"""ScanNet's binary sensor stream (``.sens``), written and read.

Real ScanNet ships its RGB-D frames only in this format, so the synthetic
generator writes it too and both go through the same reader. Layout (version
4, little-endian, ScanNet's ``sensorData.h``):

    uint32 version (4) | uint64 name length | name bytes
    float32[16] x 4    colour intrinsic, colour extrinsic, depth intrinsic, depth extrinsic (row-major 4x4)
    int32 colour compression (-1 unknown, 0 raw, 1 png, 2 jpeg)
    int32 depth compression (-1 unknown, 0 raw ushort, 1 zlib ushort, 2 occi ushort)
    uint32 colour width, colour height, depth width, depth height | float32 depth shift
    uint64 frame count, then per frame:
        float32[16] camera-to-world | uint64 colour timestamp, depth timestamp (microseconds)
        uint64 colour bytes, depth bytes | colour data | depth data
    uint64 IMU frame count, then IMU frames (not used here)

The reader indexes frame offsets by hopping over the per-frame headers, so a
multi-gigabyte stream is never held in memory; each access opens, seeks and
reads one frame.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import cv2
import numpy as np

SENS_VERSION = 4
COLOR_COMPRESSION = {-1: "unknown", 0: "raw", 1: "png", 2: "jpeg"}
DEPTH_COMPRESSION = {-1: "unknown", 0: "raw_ushort", 1: "zlib_ushort", 2: "occi_ushort"}
_COLOR_JPEG = 2
_DEPTH_ZLIB = 1

_MAT = struct.Struct("<16f")
_FRAME_HEADER = struct.Struct("<16f4Q")  # pose, colour ts, depth ts, colour bytes, depth bytes


class SensFormatError(ValueError):
    pass


def _as_float32_matrix(matrix: np.ndarray, what: str) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float32)
    if m.shape != (4, 4):
        raise ValueError(f"{what} must be 4x4, got shape {m.shape}")
    return m


def write_sens(
    path,
    *,
    colors_jpeg: Sequence[bytes],
    depths_mm: Sequence[np.ndarray],
    poses: Sequence[np.ndarray],
    intrinsic_color: np.ndarray,
    intrinsic_depth: np.ndarray,
    color_size: tuple[int, int],
    depth_size: tuple[int, int],
    timestamps_us: Sequence[int] | None = None,
    depth_shift: float = 1000.0,
    sensor_name: str = "StructureSensor",
) -> None:
    """Write a version-4 stream: JPEG colour bytes as given, uint16 depth zlib-compressed, poses as float32."""
    n = len(colors_jpeg)
    if len(depths_mm) != n or len(poses) != n:
        raise ValueError(f"frame lists differ in length: {n} colours, {len(depths_mm)} depths, {len(poses)} poses")
    if timestamps_us is not None and len(timestamps_us) != n:
        raise ValueError(f"{len(timestamps_us)} timestamps for {n} frames")
    depth_w, depth_h = (int(v) for v in depth_size)
    color_w, color_h = (int(v) for v in color_size)
    name = sensor_name.encode("utf-8")
    identity = np.eye(4, dtype=np.float32)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IQ", SENS_VERSION, len(name)))
        fh.write(name)
        for matrix, what in (
            (intrinsic_color, "intrinsic_color"),
            (identity, "extrinsic_color"),
            (intrinsic_depth, "intrinsic_depth"),
            (identity, "extrinsic_depth"),
        ):
            fh.write(_MAT.pack(*_as_float32_matrix(matrix, what).ravel()))
        fh.write(struct.pack("<ii", _COLOR_JPEG, _DEPTH_ZLIB))
        fh.write(struct.pack("<IIIIf", color_w, color_h, depth_w, depth_h, float(depth_shift)))
        fh.write(struct.pack("<Q", n))
        for i in range(n):
            depth = np.asarray(depths_mm[i])
            if depth.dtype != np.uint16 or depth.shape != (depth_h, depth_w):
                raise ValueError(
                    f"frame {i}: depth must be uint16 of shape {(depth_h, depth_w)}, got {depth.dtype} {depth.shape}"
                )
            color = bytes(colors_jpeg[i])
            depth_bytes = zlib.compress(np.ascontiguousarray(depth, dtype="<u2").tobytes())
            ts = int(timestamps_us[i]) if timestamps_us is not None else 0
            pose = _as_float32_matrix(poses[i], f"pose {i}")
            fh.write(_FRAME_HEADER.pack(*pose.ravel(), ts, ts, len(color), len(depth_bytes)))
            fh.write(color)
            fh.write(depth_bytes)
        fh.write(struct.pack("<Q", 0))  # no IMU frames


@dataclass(frozen=True)
class _FrameRecord:
    pose: np.ndarray  # (4, 4) float32
    timestamp_color: int
    timestamp_depth: int
    color_offset: int
    color_bytes: int
    depth_offset: int
    depth_bytes: int


class SensReader:
    """Header fields plus lazy per-frame access to a ``.sens`` stream.

    ``opener`` returns a fresh binary file object for the stream (``open(path,
    "rb")`` by default); pass an fsspec opener to read from object storage.
    """

    def __init__(self, path, opener: Callable[[], BinaryIO] | None = None):
        self.path = str(path)
        self._open = opener or (lambda: open(self.path, "rb"))
        with self._open() as fh:
            self._read_header(fh)
            self._frames = self._index_frames(fh)

    def _read_exact(self, fh: BinaryIO, size: int, what: str) -> bytes:
        data = fh.read(size)
        if len(data) != size:
            raise SensFormatError(f"truncated .sens file while reading {what}")
        return data

    def _read_header(self, fh: BinaryIO) -> None:
        (version,) = struct.unpack("<I", self._read_exact(fh, 4, "version"))
        if version != SENS_VERSION:
            raise SensFormatError(f"unsupported .sens version {version} (expected {SENS_VERSION})")
        (name_len,) = struct.unpack("<Q", self._read_exact(fh, 8, "sensor name length"))
        if name_len > 4096:
            raise SensFormatError(f"implausible sensor name length {name_len}")
        self.sensor_name = self._read_exact(fh, name_len, "sensor name").decode("utf-8", "replace")
        mats = [
            np.array(_MAT.unpack(self._read_exact(fh, _MAT.size, "calibration")), dtype=np.float32).reshape(4, 4)
            for _ in range(4)
        ]
        self.intrinsic_color, self.extrinsic_color, self.intrinsic_depth, self.extrinsic_depth = mats
        color_c, depth_c = struct.unpack("<ii", self._read_exact(fh, 8, "compression types"))
        if color_c not in COLOR_COMPRESSION or depth_c not in DEPTH_COMPRESSION:
            raise SensFormatError(f"unknown compression types colour={color_c} depth={depth_c}")
        self.color_compression = COLOR_COMPRESSION[color_c]
        self.depth_compression = DEPTH_COMPRESSION[depth_c]
        cw, ch, dw, dh, shift = struct.unpack("<IIIIf", self._read_exact(fh, 20, "image sizes"))
        self.color_width, self.color_height, self.depth_width, self.depth_height = cw, ch, dw, dh
        self.depth_shift = float(shift)
        (self.frame_count,) = struct.unpack("<Q", self._read_exact(fh, 8, "frame count"))

    def _index_frames(self, fh: BinaryIO) -> list[_FrameRecord]:
        frames = []
        pos = fh.tell()
        for i in range(self.frame_count):
            values = _FRAME_HEADER.unpack(self._read_exact(fh, _FRAME_HEADER.size, f"frame {i} header"))
            pose = np.array(values[:16], dtype=np.float32).reshape(4, 4)
            ts_c, ts_d, n_color, n_depth = values[16:]
            color_offset = pos + _FRAME_HEADER.size
            depth_offset = color_offset + n_color
            pos = depth_offset + n_depth
            fh.seek(pos)
            frames.append(_FrameRecord(pose, ts_c, ts_d, color_offset, n_color, depth_offset, n_depth))
        if frames:
            # A stream cut inside the last frame's data would otherwise only fail on access.
            fh.seek(pos - 1)
            if len(fh.read(1)) != 1:
                raise SensFormatError(f"truncated .sens file: frame {self.frame_count - 1} data incomplete")
        return frames

    def _read_at(self, offset: int, size: int, what: str) -> bytes:
        with self._open() as fh:
            fh.seek(offset)
            return self._read_exact(fh, size, what)

    def pose(self, i: int) -> np.ndarray:
        """Camera-to-world 4x4 as stored (float32, may hold -inf/NaN for lost tracking)."""
        return self._frames[i].pose.copy()

    def timestamp(self, i: int) -> int:
        """Colour timestamp in microseconds (0 when the recorder did not set it)."""
        return int(self._frames[i].timestamp_color)

    def color_bytes(self, i: int) -> bytes:
        rec = self._frames[i]
        return self._read_at(rec.color_offset, rec.color_bytes, f"frame {i} colour")

    def color(self, i: int) -> np.ndarray:
        """(H, W, 3) uint8 BGR."""
        data = self.color_bytes(i)
        if self.color_compression in ("jpeg", "png"):
            image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
            if image is None:
                raise SensFormatError(f"frame {i}: colour image does not decode")
            return image
        if self.color_compression == "raw":
            rgb = np.frombuffer(data, dtype=np.uint8).reshape(self.color_height, self.color_width, 3)
            return np.ascontiguousarray(rgb[:, :, ::-1])
        raise SensFormatError(f"frame {i}: unsupported colour compression {self.color_compression}")

    def depth(self, i: int) -> np.ndarray:
        """(H, W) uint16 depth in units of 1/depth_shift metres."""
        rec = self._frames[i]
        data = self._read_at(rec.depth_offset, rec.depth_bytes, f"frame {i} depth")
        if self.depth_compression == "zlib_ushort":
            try:
                data = zlib.decompress(data)
            except zlib.error as exc:
                raise SensFormatError(f"frame {i}: depth does not decompress ({exc})") from None
        elif self.depth_compression != "raw_ushort":
            raise SensFormatError(f"frame {i}: unsupported depth compression {self.depth_compression}")
        expected = self.depth_width * self.depth_height * 2
        if len(data) != expected:
            raise SensFormatError(f"frame {i}: depth has {len(data)} bytes, expected {expected}")
        return np.frombuffer(data, dtype="<u2").reshape(self.depth_height, self.depth_width).astype(np.uint16)
