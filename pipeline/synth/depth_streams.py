"""Depth frames of a synthetic scene in the encodings the datasets ship, rendered with the shared ray caster.

Phone datasets record depth at the LiDAR's 256 x 192 while colour is larger;
their toolkits get the depth camera by scaling the colour intrinsics by the
size ratio (ScanNet++ ``iphone/arkit_pcl.py`` ``backproject``: ``fx, fy, cx, cy
*= depth_w / colour_w``; MultiScan ``reconstruction/scripts/bridge.py``
``all_cameras``: ``diag(dw / cw, dh / ch, 1) @ K``). The synthetic depth is ray
cast with exactly that camera, so the toolkits' back-projection
``K_depth^-1 [u d, v d, d]`` at integer pixels lands on the mesh.

Encodings (what the official decoders read):

* ScanNet++ ``iphone/depth.bin``: one record per video frame, a little-endian
  uint32 byte count then the frame as raw-deflate float32 metres, 192 x 256
  (``iphone/prepare_iphone_data.py`` ``extract_depth``, per-frame branch; its
  zlib fallback for records that are not LZ4). Per-frame records let a frame
  held for 6 video frames be compressed once.
* MultiScan ``<scan>.depth.zlib``: one raw-deflate stream of float16 metres
  frames (``depth_unit`` ``m``), and ``<scan>.confidence.zlib`` of uint8
  frames (ARKit levels 0-2; 2 where there is depth), both read by
  ``server/scripts/depth_decode.py`` and ``bridge.py``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

import numpy as np

from pipeline.geometry.raycast import MeshRaycaster

LIDAR_SIZE = (256, 192)  # (width, height) of iPhone/iPad LiDAR depth
CONFIDENCE_HIGH = 2  # ARKit ARConfidenceLevel.high
DEFLATE_LEVEL = 6


def depth_camera(intrinsics: np.ndarray, colour_size: tuple[int, int], depth_size: tuple[int, int] = LIDAR_SIZE) -> np.ndarray:
    """The toolkits' depth intrinsics: the colour K with rows scaled by the width and height ratios."""
    k = np.asarray(intrinsics, dtype=float).copy()
    k[0, :] *= depth_size[0] / colour_size[0]
    k[1, :] *= depth_size[1] / colour_size[1]
    k[2, :] = (0.0, 0.0, 1.0)
    return k


def render_depth(raycaster: MeshRaycaster, intrinsics: np.ndarray, pose: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w) float32 z-depth in metres, 0 where nothing was hit (the datasets' missing-depth value)."""
    depth = raycaster.render(intrinsics, pose, size[0], size[1]).depth.reshape(size[1], size[0])
    return np.where(np.isfinite(depth), depth, 0.0).astype(np.float32)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def scannetpp_depth_records(frames: Iterable[np.ndarray], repeats: int) -> Iterable[bytes]:
    """``depth.bin`` records: each float32 metre frame compressed once and written ``repeats`` times."""
    for depth in frames:
        payload = _raw_deflate(np.ascontiguousarray(depth, dtype="<f4").tobytes())
        record = struct.pack("<I", len(payload)) + payload
        for _ in range(repeats):
            yield record


class DeflateStream:
    """A raw-deflate file written frame by frame (MultiScan's ``.depth.zlib`` / ``.confidence.zlib``)."""

    def __init__(self, path):
        self._fh = open(path, "wb")
        self._packer = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)

    def write(self, frame: np.ndarray, times: int = 1) -> None:
        data = np.ascontiguousarray(frame).tobytes()
        for _ in range(times):
            self._fh.write(self._packer.compress(data))

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.write(self._packer.flush())
            self._fh.close()


def multiscan_depth(depth_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float16 metres, uint8 confidence) of one frame, little-endian as the iOS app stores them."""
    depth = depth_m.astype("<f2")
    confidence = np.where(depth_m > 0, CONFIDENCE_HIGH, 0).astype(np.uint8)
    return depth, confidence
