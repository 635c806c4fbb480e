"""Frame images loaded from what the ``frames`` table records, so no later step parses the scan again.

The scene step parses a scan once. Each ``frames`` row names where its colour
image is: ``image_file`` relative to the scan folder and, for a container
(a ScanNet ``.sens`` stream, an mp4/mkv), ``image_member``, the frame's index
inside it (-1 for a plain image file). ``FrameImages`` opens exactly those
files — on an object store it downloads only the files it is asked for, once —
and decodes and resizes as the readers do (``pipeline.frames.video.resized`` to
the row's ``width`` x ``height``), so a video written from it has the same
pixels as one written from the reader's own ``ParsedScan.load_image``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import cv2
import numpy as np
import polars as pl

from pipeline.errors import ScanError
from pipeline.frames.image_locations import image_locations
from pipeline.storage import local_file_getter, upath

CONTAINER_SUFFIXES = {".sens": "sens", ".mp4": "video", ".mkv": "video", ".mov": "video", ".avi": "video"}


def records_images(frames: pl.DataFrame) -> bool:
    """Whether the table says where its images are (tables written before the columns existed do not)."""
    if "image_file" not in frames.columns or frames.height == 0:
        return False
    return bool(frames["image_file"].fill_null("").str.len_chars().gt(0).any())


class FrameImages:
    """``frame_index -> (H, W, 3) uint8 BGR`` for one scan, from its ``frames`` rows; usable as ``load_image``.

    Open sources (a ``.sens`` index, a video decoder) are kept for the object's
    life; ``close()`` (or ``with``) releases them and any downloaded copies.
    """

    def __init__(self, key: str, scan_uri: str, frames: pl.DataFrame, storage_options: dict | None = None):
        self.key = key
        self._where = image_locations(key, frames)
        root = upath(scan_uri, storage_options)
        self._tmp = tempfile.mkdtemp(prefix="scan2qa_images_")
        self._local_file = local_file_getter(root, self._tmp)
        self._sources: dict[str, object] = {}

    def __call__(self, frame_index: int) -> np.ndarray:
        where = self._where.get(int(frame_index))
        if where is None:
            raise ScanError(self.key, f"frame {frame_index}", "the frames table names no image for this frame")
        file, member, size = where
        from pipeline.frames.video import resized

        return resized(self._decode(file, member), size)

    def _decode(self, file: str, member: int) -> np.ndarray:
        kind = CONTAINER_SUFFIXES.get(Path(file).suffix.lower()) if member >= 0 else None
        if kind is None:
            local = self._local_file(file)
            image = cv2.imread(str(local), cv2.IMREAD_COLOR) if local is not None else None
            if image is None:
                raise ScanError(self.key, file, "colour image missing or does not decode")
            return image
        source = self._open(file, kind)
        try:
            return source.color(member) if kind == "sens" else source.read(member)
        except (IndexError, OSError, ValueError) as exc:
            problem = str(exc).rsplit(": ", 1)[-1] if str(exc) else type(exc).__name__
            raise ScanError(self.key, file, f"frame {member}: {problem}") from None

    def _open(self, file: str, kind: str):
        if file not in self._sources:
            local = self._local_file(file)
            if local is None:
                raise ScanError(self.key, file, "colour stream missing")
            try:
                if kind == "sens":
                    from pipeline.formats.sens import SensReader

                    self._sources[file] = SensReader(local)
                else:
                    from pipeline.frames.video import VideoFrameSource

                    self._sources[file] = VideoFrameSource(local)
            except Exception as exc:  # SensFormatError, OSError: the stream does not open
                raise ScanError(self.key, file, f"colour stream does not open ({str(exc).splitlines()[0]})") from None
        return self._sources[file]

    def close(self) -> None:
        for source in self._sources.values():
            close = getattr(source, "close", None)
            if close is not None:
                close()
        self._sources.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> FrameImages:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
