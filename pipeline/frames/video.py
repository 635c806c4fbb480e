"""MP4 videos of a scan's frame budgets, written and read with OpenCV.

Harnesses (lmms-eval ``revsi``, VLMEvalKit) take one video per scan and
budget, so the frames a budget's ground truth was computed on must be exactly
the frames of its video: budget videos hold one frame per sample (1 fps, a
repeated sample repeats its frame) and the all-frame video plays the whole
sequence at its rate. Frames are rotated sky-up and resized to 640x480 or
480x640 by orientation. All videos of a scan are written in one pass over the
all-frame sequence, so each source image is decoded once.

Videos go to a local temporary file first and are then moved into place (or
uploaded for ``s3://`` outputs), so a failed write never leaves a truncated
video under its final name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import polars as pl

from pipeline.errors import ScanError
from pipeline.frames.budgets import ALL, output_size
from pipeline.frames.frame_cache import FrameCache, Identity, entry_key
from pipeline.config import FramesConfig
from pipeline.storage import is_local, make_shareable, upath
from pipeline.frames.video_paths import budget_video_path

FOURCC = "mp4v"
BUDGET_VIDEO_FPS = 1.0


def rotate_image(image: np.ndarray, degrees: int) -> np.ndarray:
    """Rotate by a multiple of 90 degrees clockwise."""
    d = degrees % 360
    if d == 0:
        return image
    codes = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
    if d not in codes:
        raise ValueError(f"image rotation must be a multiple of 90 degrees, got {degrees}")
    return cv2.rotate(image, codes[d])


def resized(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A source image at the frame size its camera was scaled to (``pipeline.frames.budgets.scale_intrinsics``)."""
    if (image.shape[1], image.shape[0]) == tuple(size):
        return image
    return cv2.resize(image, tuple(size), interpolation=cv2.INTER_AREA)


def video_frame(image: np.ndarray, size: tuple[int, int], rotation: int = 0) -> np.ndarray:
    """A source image as a video frame: 3-channel uint8 BGR, rotated sky-up, resized to ``size`` (w, h)."""
    if image is None or not isinstance(image, np.ndarray) or image.size == 0:
        raise ValueError("image is empty or unreadable")
    if image.dtype != np.uint8:
        raise ValueError(f"image has dtype {image.dtype}, expected uint8")
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    elif image.ndim == 3 and image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    elif image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image has shape {image.shape}, expected (H, W, 3)")
    image = rotate_image(image, rotation)
    if (image.shape[1], image.shape[0]) != tuple(size):
        shrink = image.shape[1] > size[0] or image.shape[0] > size[1]
        image = cv2.resize(image, tuple(size), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    return np.ascontiguousarray(image)


class VideoWriter:
    """An mp4v writer at a fixed size; frames must already be that size."""

    def __init__(self, path: str | os.PathLike, fps: float, size: tuple[int, int]):
        self.path = str(path)
        self.size = (int(size[0]), int(size[1]))
        self.frames = 0
        self._writer = cv2.VideoWriter(self.path, cv2.VideoWriter_fourcc(*FOURCC), float(fps), self.size)
        if not self._writer.isOpened():
            raise OSError(f"{self.path}: OpenCV cannot open an {FOURCC} video writer")

    def write(self, frame: np.ndarray, times: int = 1) -> None:
        if (frame.shape[1], frame.shape[0]) != self.size:
            raise ValueError(f"frame is {frame.shape[1]}x{frame.shape[0]}, video is {self.size[0]}x{self.size[1]}")
        for _ in range(times):
            self._writer.write(frame)
        self.frames += times

    def close(self) -> None:
        self._writer.release()


@contextmanager
def video_output(output_root: str, relative: str, fps: float, size: tuple[int, int], storage_options: dict | None = None):
    """Yield a ``VideoWriter`` on a temporary file that replaces ``output_root/relative`` on success."""
    target = upath(f"{str(output_root).rstrip('/')}/{relative}", storage_options)
    local = is_local(target)
    if local:
        Path(target.path).parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".mp4", prefix=f".{target.name}.", dir=str(Path(target.path).parent))
    else:
        fd, tmp = tempfile.mkstemp(suffix=".mp4")
    os.close(fd)
    writer = VideoWriter(tmp, fps, size)
    try:
        yield writer
        writer.close()
        if local:
            make_shareable(tmp)  # mkstemp made it owner-only; a released video is for others to read
            os.replace(tmp, target.path)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(Path(tmp).read_bytes())
    finally:
        writer.close()
        if os.path.exists(tmp):
            os.remove(tmp)


def write_video(
    output_root: str,
    relative: str,
    frames: Iterable[np.ndarray],
    fps: float,
    size: tuple[int, int],
    storage_options: dict | None = None,
) -> int:
    """Write already-sized frames to ``output_root/relative``; returns the frame count."""
    with video_output(output_root, relative, fps, size, storage_options) as writer:
        for frame in frames:
            writer.write(frame)
    return writer.frames


def load_frame(key: str, load_image: Callable[[int], np.ndarray] | None, frame_index: int) -> np.ndarray:
    """A source image or a ScanError naming the frame and the problem."""
    if load_image is None:
        raise ScanError(key, f"frame {frame_index}", "scan has no frame images to write videos from")
    try:
        image = load_image(frame_index)
    except ScanError:
        raise
    except Exception as exc:  # readers raise OSError, ValueError, KeyError... for a missing or corrupt image
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ScanError(key, f"frame {frame_index}", f"image missing or unreadable ({problem})") from None
    if image is None or not isinstance(image, np.ndarray) or image.size == 0:
        raise ScanError(key, f"frame {frame_index}", "image missing or unreadable")
    return image


def scan_video_size(frames: pl.DataFrame, frames_config: FramesConfig, rotation: int = 0) -> tuple[int, int]:
    """Output (w, h) of a scan's videos, from the first frame's stored size and the sky-up rotation."""
    if frames.height == 0:
        return output_size(frames_config.width, frames_config.height, frames_config)
    width, height = int(frames["width"][0]), int(frames["height"][0])
    if rotation % 180 == 90:
        width, height = height, width
    return output_size(width, height, frames_config)


def write_scan_videos(
    key: str,
    frame_samples: pl.DataFrame,
    frames: pl.DataFrame,
    load_image: Callable[[int], np.ndarray] | None,
    output_root: str,
    *,
    fps: float,
    frames_config: FramesConfig | None = None,
    image_rotation: int = 0,
    storage_options: dict | None = None,
    image_identity: Identity | None = None,
    frame_cache: FrameCache | None = None,
) -> dict[str, Any]:
    """Write the all-frame and budget videos of one scan; returns paths, frame counts and skipped frames.

    ``frame_samples`` holds the scan's budgets (``pipeline.frames.budgets.sample_frames``).
    Frames with an invalid pose never enter the all-frame sequence, so they are
    never written; they are counted in ``skipped_invalid_pose``. With a
    ``frame_cache`` and an ``image_identity`` (``pipeline.frames.frame_cache``)
    the decoded frames are left there for the scan's dummy videos.
    """
    frames_config = frames_config or FramesConfig()
    samples = frame_samples.filter(pl.col("key") == key)
    scan_frames = frames.filter(pl.col("key") == key)
    size = scan_video_size(scan_frames, frames_config, image_rotation)
    order = samples.filter(pl.col("budget") == ALL).sort("rank")["frame_index"].to_list()
    budgets = sorted(b for b in set(samples["budget"].to_list()) if b != ALL)
    repeats: dict[str, dict[int, int]] = {}
    for budget in budgets:
        picked = samples.filter(pl.col("budget") == budget).sort("rank")["frame_index"].to_list()
        position = {fi: i for i, fi in enumerate(order)}
        if any(fi not in position for fi in picked) or any(
            position[a] > position[b] for a, b in zip(picked, picked[1:])
        ):
            raise ScanError(key, "frame_samples", f"budget {budget} is not an ordered subset of the all-frame sequence")
        counts: dict[int, int] = {}
        for fi in picked:
            counts[fi] = counts.get(fi, 0) + 1
        repeats[budget] = counts
    result: dict[str, Any] = {
        "size": list(size),
        "videos": {},
        "frames": {},
        "skipped_invalid_pose": int((~scan_frames["valid"].fill_null(False)).sum()) if scan_frames.height else 0,
    }
    if not order:
        return result
    paths = {b: budget_video_path(b, key) for b in [*budgets, ALL]}
    keep_every = 0  # 0: nothing kept
    if frame_cache is not None and image_identity is not None:
        frame_cache.start_scan(key)
        keep_every = frame_cache.keep_every(len(order), size[0] * size[1] * 3)
    with _all_writers(output_root, paths, fps, size, storage_options) as writers:
        for position, frame_index in enumerate(order):
            frame = None
            try:
                frame = video_frame(load_frame(key, load_image, frame_index), size, image_rotation)
            except ValueError as exc:
                raise ScanError(key, f"frame {frame_index}", str(exc)) from None
            if keep_every and position % keep_every == 0:
                frame_cache.put(key, entry_key(image_identity, frame_index, size, image_rotation), frame)
            writers[ALL].write(frame)
            for budget in budgets:
                times = repeats[budget].get(frame_index, 0)
                if times:
                    writers[budget].write(frame, times)
    for budget, writer in writers.items():
        result["videos"][budget] = paths[budget]
        result["frames"][budget] = writer.frames
    return result


@contextmanager
def _all_writers(output_root: str, paths: dict[str, str], fps: float, size: tuple[int, int], storage_options):
    """Open one temporary writer per budget; all are committed only if every frame was written."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        writers = {
            budget: stack.enter_context(
                video_output(output_root, rel, fps if budget == ALL else BUDGET_VIDEO_FPS, size, storage_options)
            )
            for budget, rel in paths.items()
        }
        yield writers


def video_info(path: str | os.PathLike) -> dict[str, Any]:
    """Decoded frame count, size and nominal fps of a video (counts by decoding, not by header)."""
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise OSError(f"{path}: OpenCV cannot open the video")
    try:
        fps = float(cap.get(cv2.CAP_PROP_FPS))
        count, width, height = 0, 0, 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            count += 1
            height, width = frame.shape[:2]
        return {"frames": count, "width": width, "height": height, "fps": fps}
    finally:
        cap.release()


class VideoFrameSource:
    """Frame ``i`` of an mp4/mkv as a BGR image, for readers whose colour stream is a video file.

    Sequential access decodes forward; a jump seeks (OpenCV seeks to the
    previous keyframe and decodes up to the frame). Usable as a
    ``ParsedScan.load_image``: ``source = VideoFrameSource(path); source.read``.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._cap = cv2.VideoCapture(self.path)
        if not self._cap.isOpened():
            raise OSError(f"{self.path}: OpenCV cannot open the video")
        self._next = 0
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS))
        self.width = int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self.frame_count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))

    def __len__(self) -> int:
        return self.frame_count

    def read(self, index: int) -> np.ndarray:
        if index < 0:
            raise IndexError(f"{self.path}: frame {index} does not exist")
        if index != self._next:
            if index > self._next and index - self._next <= 30:
                while self._next < index:  # short forward hop: decoding is cheaper than a seek
                    if not self._cap.grab():
                        raise IndexError(f"{self.path}: frame {index} does not exist")
                    self._next += 1
            else:
                self._cap.set(cv2.CAP_PROP_POS_FRAMES, index)
                self._next = index
        ok, frame = self._cap.read()
        if not ok or frame is None:
            raise IndexError(f"{self.path}: frame {index} does not exist or cannot be decoded")
        self._next = index + 1
        return frame

    __call__ = read

    def close(self) -> None:
        self._cap.release()

    def __enter__(self) -> VideoFrameSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
