"""Video frames one step decoded, kept in this process for the next step of the same scan.

``scan_videos`` decodes every image of the all-frame sequence (JPEG decode,
sky-up rotation, resize: 2-3 CPU-ms a frame at 640x480) and ``dummy_videos``, a
few steps later in the same run and usually the same process (``scan2qa build``
runs a scan's steps in one process), decodes most of them again for its 16-frame
videos. So ``scan_videos`` leaves its frames here and ``dummy_videos`` takes
them; a step in another process (a Celery worker) just decodes, as before.

An entry is keyed by what its pixels come from: the scan, the image file's
absolute local path, the member inside a container, the file's size, mtime and
inode, and the output size and rotation. A file changed since is a miss, and so
is anything not on a local disk (no key: always decoded). The cache holds the
scan last written (a new scan replaces it) and at most ``MAX_BYTES``; a longer
sequence keeps a uniform subset (every k-th frame). Frames are stored read-only,
so no caller can change what another is served. Hits return exactly the array a
decode would give, so videos are byte-identical with or without it.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import polars as pl

from pipeline.frames.image_locations import image_locations

MAX_BYTES = 256 * 1024 * 1024  # ~270 frames of 640x480 BGR

Identity = Callable[[int], Hashable | None]


def local_image_identity(key: str, scan_dir: str | None, frames: pl.DataFrame) -> Identity:
    """``frame_index -> key`` of the image file a ``frames`` row names, or None (not local, no file, no row)."""
    if not scan_dir or ("://" in str(scan_dir) and not str(scan_dir).startswith("file://")):
        return lambda index: None
    root = os.path.abspath(str(scan_dir).removeprefix("file://"))
    where = image_locations(key, frames)

    def identity(index: int) -> Hashable | None:
        found = where.get(int(index))
        if found is None:
            return None
        file, member, size = found
        path = os.path.join(root, file)
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return (key, path, member, size, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev)

    return identity


class FrameCache:
    """Video frames of one scan, by source identity, output size and rotation (see module doc)."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = int(max_bytes)
        self._scan: str | None = None
        self._frames: dict[Hashable, np.ndarray] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def start_scan(self, key: str) -> None:
        """Forget every other scan's frames."""
        with self._lock:
            if self._scan != key:
                self._scan, self._frames, self._bytes = key, {}, 0

    def get(self, entry: Hashable | None) -> np.ndarray | None:
        if entry is None:
            return None
        with self._lock:
            frame = self._frames.get(entry)
            if frame is None:
                self.misses += 1
            else:
                self.hits += 1
            return frame

    def put(self, key: str, entry: Hashable | None, frame: np.ndarray) -> np.ndarray:
        """Keep ``frame`` (read-only from now on) if it fits; returns it."""
        if entry is None:
            return frame
        frame.flags.writeable = False
        with self._lock:
            if self._scan == key and entry not in self._frames and self._bytes + frame.nbytes <= self.max_bytes:
                self._frames[entry] = frame
                self._bytes += frame.nbytes
        return frame

    def keep_every(self, count: int, frame_bytes: int) -> int:
        """The stride that lets ``count`` frames of ``frame_bytes`` each fit: 1 if all fit."""
        if count <= 0 or frame_bytes <= 0:
            return 1
        fits = max(self.max_bytes // frame_bytes, 1)
        return max(1, math.ceil(count / fits))

    def clear(self) -> None:
        with self._lock:
            self._scan, self._frames, self._bytes = None, {}, 0


SHARED = FrameCache()


def entry_key(identity: Identity | None, index: int, size: Sequence[int], rotation: int) -> Hashable | None:
    source = identity(index) if identity is not None else None
    return None if source is None else (source, int(size[0]), int(size[1]), int(rotation) % 360)
