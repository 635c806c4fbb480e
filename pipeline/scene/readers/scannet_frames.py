"""Camera frames of a ScanNet scene: the exported stream layout or the ``.sens`` file.

ScanNet ships frames inside ``<scene>.sens``; most users export them once with
ScanNet's SensReader into ``color/<i>.jpg``, ``depth/<i>.png``,
``pose/<i>.txt`` and ``intrinsic/intrinsic_color.txt``. Both give the same
``Frame`` list: poses moved into the axis-aligned world frame, intrinsics
rescaled to the output image size, timestamps in seconds from the first frame
(the stream layout has none, so frame i is at i/fps s with ScanNet's 30 fps
recording rate unless ``<scene>.txt`` declares another ``fps``, as the
synthetic generator's 10 fps scans do). When both exist the ``.sens`` file wins:
it is the canonical source and carries real timestamps. Images are loaded
lazily, one frame at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from pipeline.errors import ScanError
from pipeline.formats.sens import SensFormatError, SensReader
from pipeline.frames.budgets import scale_intrinsics
from pipeline.frames.frame_checks import MAX_IMAGE_PIXELS, image_problem
from pipeline.scene.parsed import Frame, ImageLoader, dropped_pose_warnings
from pipeline.frames.video import resized

SCANNET_FPS = 30.0


@dataclass
class FrameSource:
    frames: list[Frame]
    load_image: ImageLoader | None
    source_fps: float
    files: list[Path]  # input files the frames were read from (for the checksum)
    warnings: list[str]


def _read_matrix(path: Path, key: str, shape: tuple[int, int]) -> np.ndarray:
    name = f"{path.parent.name}/{path.name}"  # relative to the scan folder: pose/1.txt, intrinsic/...
    try:
        values = np.array(path.read_text().split(), dtype=float)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ScanError(key, name, f"unreadable matrix ({type(exc).__name__})") from None
    if values.size != shape[0] * shape[1]:
        raise ScanError(key, name, f"expected {shape[0] * shape[1]} numbers, found {values.size}")
    return values.reshape(shape)


def _drop_corrupt_images(frames: list[Frame], color_files: dict[int, Path]) -> list[str]:
    """Drop (as an invalid pose does) every frame whose colour file is corrupt; one warning naming the first."""
    bad = []
    for frame in frames:
        problem = image_problem(color_files[frame.frame_index])
        if problem:
            bad.append((frame.frame_index, problem))
            frame.pose = np.full((4, 4), np.nan)
    if not bad:
        return []
    index, problem = bad[0]
    return [f"{len(bad)} of {len(frames)} colour images are unusable and their frames are dropped "
            f"(first: color/{index}.jpg: {problem})"]


def _make_frames(
    indices: list[int],
    poses: list[np.ndarray],
    timestamps: list[float],
    k_color: np.ndarray,
    color_size: tuple[int, int],
    out_size: tuple[int, int],
    alignment: np.ndarray,
) -> list[Frame]:
    k_out = scale_intrinsics(np.asarray(k_color, dtype=float)[:3, :3], color_size, out_size)
    frames = []
    for index, pose, ts in zip(indices, poses, timestamps):
        pose = np.asarray(pose, dtype=np.float64)
        if np.all(np.isfinite(pose)):
            pose = alignment @ pose
        frames.append(Frame(int(index), float(ts), pose, k_out.copy(), out_size[0], out_size[1]))
    return frames


def read_stream_frames(
    folder: Path,
    key: str,
    alignment: np.ndarray,
    out_size: tuple[int, int],
    color_size: tuple[int, int] | None,
    fps: float = SCANNET_FPS,
) -> FrameSource:
    """Frames from an exported stream layout (``pose/``, ``color/``, ``intrinsic/``)."""
    pose_dir, color_dir = folder / "pose", folder / "color"
    pose_files = {}
    for p in pose_dir.glob("*.txt"):
        if p.stem.isdigit():
            pose_files[int(p.stem)] = p
    indices = sorted(pose_files)
    color_files = {int(p.stem): p for p in color_dir.glob("*.jpg") if p.stem.isdigit()}
    unposed = sorted(set(color_files) - set(pose_files))
    if unposed:
        raise ScanError(key, f"pose/{unposed[0]}.txt", f"pose file missing for {len(unposed)} colour frames")
    missing = [i for i in indices if i not in color_files]
    if missing:
        raise ScanError(key, f"color/{missing[0]}.jpg", f"colour image missing for {len(missing)} posed frames")
    intrinsic_file = folder / "intrinsic" / "intrinsic_color.txt"
    if not intrinsic_file.exists():
        raise ScanError(key, "intrinsic/intrinsic_color.txt", "missing colour intrinsics for the stream layout")
    k_color = _read_matrix(intrinsic_file, key, (4, 4))[:3, :3]
    usable = [i for i in indices if image_problem(color_files[i]) is None]
    if color_size is None and usable:
        first = cv2.imread(str(color_files[usable[0]]), cv2.IMREAD_COLOR)
        if first is None:
            raise ScanError(key, f"color/{usable[0]}.jpg", "colour image does not decode")
        color_size = (first.shape[1], first.shape[0])
    poses = [_read_matrix(pose_files[i], key, (4, 4)) for i in indices]
    timestamps = [i / fps for i in indices]
    frames = _make_frames(indices, poses, timestamps, k_color, color_size or out_size, out_size, alignment)
    nan_poses = [f.frame_index for f in frames if not f.valid]
    warnings = [w + f" (first: pose/{nan_poses[0]}.txt)" for w in dropped_pose_warnings(frames)]
    warnings += _drop_corrupt_images(frames, color_files)
    for frame in frames:
        frame.image_file = color_files[frame.frame_index].relative_to(folder).as_posix()

    def load_image(frame_index: int) -> np.ndarray:
        path = color_files.get(int(frame_index))
        image = cv2.imread(str(path), cv2.IMREAD_COLOR) if path is not None else None
        if image is None:
            raise ScanError(key, f"color/{frame_index}.jpg", "colour image missing or does not decode")
        return resized(image, out_size)

    files = [intrinsic_file] + [pose_files[i] for i in indices] + [color_files[i] for i in indices]
    return FrameSource(frames, load_image, fps, files, warnings)


def read_sens_frames(
    path: Path, key: str, alignment: np.ndarray, out_size: tuple[int, int], fps: float = SCANNET_FPS
) -> FrameSource:
    """Frames from ``<scene>.sens``; microsecond timestamps are used when the recorder set them, else i/fps."""
    try:
        reader = SensReader(path)
    except (SensFormatError, OSError) as exc:
        raise ScanError(key, path.name, str(exc)) from None
    n = reader.frame_count
    indices = list(range(n))
    raw_ts = np.array([reader.timestamp(i) for i in indices], dtype=np.float64)
    source_fps = fps
    if n and np.any(raw_ts != 0):
        timestamps = list((raw_ts - raw_ts[0]) / 1e6)
        steps = np.diff(raw_ts)
        steps = steps[steps > 0]
        if len(steps):
            source_fps = float(1e6 / np.median(steps))
    else:
        timestamps = [i / fps for i in indices]
    color_size = (reader.color_width, reader.color_height)
    if not (0 < color_size[0] * color_size[1] <= MAX_IMAGE_PIXELS):
        raise ScanError(key, path.name, f"header claims {color_size[0]}x{color_size[1]} colour pixels "
                        f"(limit {MAX_IMAGE_PIXELS})")
    poses = [reader.pose(i) for i in indices]
    frames = _make_frames(
        indices, poses, timestamps, reader.intrinsic_color[:3, :3], color_size, out_size, alignment
    )
    for frame in frames:
        frame.image_file, frame.image_member = path.name, frame.frame_index

    def load_image(frame_index: int) -> np.ndarray:
        try:
            return resized(reader.color(int(frame_index)), out_size)
        except (SensFormatError, OSError, IndexError) as exc:
            raise ScanError(key, path.name, f"frame {frame_index}: {exc}") from None

    return FrameSource(frames, load_image, source_fps, [path], dropped_pose_warnings(frames))


def read_scannet_frames(
    folder: Path,
    key: str,
    alignment: np.ndarray,
    out_size: tuple[int, int],
    color_size: tuple[int, int] | None,
    stream_fps: float = SCANNET_FPS,
) -> FrameSource | None:
    """The ``.sens`` file, else the exported stream layout, else None (a scan without frames)."""
    sens = folder / f"{folder.name}.sens"
    if sens.exists():
        return read_sens_frames(sens, key, alignment, out_size, stream_fps)
    if (folder / "pose").is_dir() and (folder / "color").is_dir():
        return read_stream_frames(folder, key, alignment, out_size, color_size, stream_fps)
    return None
