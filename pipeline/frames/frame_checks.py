"""Camera and image checks on a parsed scan's frames, before any ray is cast or video written.

Bad cameras do not fail loudly downstream: a zero or negative focal length
makes NaN rays and the ray caster stalls; a principal point far outside the
image casts every ray past the scene; a pose that is not a rigid transform
(singular, scaled, projective) puts the camera nowhere meaningful. Corrupt
images (truncated, empty, an HTML error page saved as ``.jpg``, a header that
claims 65000x65000 pixels) either do not decode or decode to garbage that would
end up in a video. So, right after a reader returns:

* intrinsics must be finite with positive focal lengths and the principal
  point inside the image, and the image size must be positive and below
  ``MAX_IMAGE_PIXELS`` — else the scan fails with a ``ScanError`` naming the
  intrinsics file;
* a finite pose that is not rigid drops its frame like a NaN pose does (SPEC
  §1: dropped, counted), with one warning naming the first such pose file;
* so does a rigid pose whose camera lies more than ``MAX_CAMERA_DISTANCE_M``
  (1 km) outside the scene's bounding box (its mesh, else its objects' boxes):
  finite but absurd (a translation of 1e308 m) it would be kept as a valid
  frame, sampled into every budget, and overflow the distances computed from it;
* colour image files are checked from their header and tail (no decode):
  ``image_problem`` says what is wrong, and the reader drops that frame with a
  warning (``pipeline.scene.readers.scannet_frames``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import ScanError

# Larger than any scanner's colour camera (ScanNet 1296x968, ARKit 1920x1440); a header claiming more is corrupt
# or hostile, and OpenCV would try to allocate it.
MAX_IMAGE_PIXELS = 50_000_000
ROTATION_TOLERANCE = 1e-2  # largest |RᵀR - I| of a rigid pose (stored poses carry ~6 decimals)
# Farthest a camera may be from the scene's bounding box: an indoor scan's camera is inside it or a few metres out,
# so anything beyond a kilometre is a corrupt pose, not a camera that saw the scene.
MAX_CAMERA_DISTANCE_M = 1000.0
HEAD_BYTES = 1 << 12  # enough for the frame header of a JPEG without EXIF (ScanNet's exports) ...
LONG_HEAD_BYTES = 1 << 16  # ... and with EXIF/APP segments in front of it


@dataclass(frozen=True)
class FrameFiles:
    """Where a reader's cameras come from, to name them in errors."""

    intrinsics: Callable[[int], str]  # frame index -> file holding its intrinsics
    pose: Callable[[int], str]  # frame index -> file holding its pose


def frame_file_namer(reader: str, folder: Path) -> FrameFiles:
    """ScanNet-layout scans name their stream files; other layouts are named by frame index."""
    if reader == "scannet":
        sens = f"{folder.name}.sens"
        if (folder / sens).exists():
            return FrameFiles(lambda i: sens, lambda i: f"{sens} (frame {i})")
        return FrameFiles(lambda i: "intrinsic/intrinsic_color.txt", lambda i: f"pose/{i}.txt")
    return FrameFiles(lambda i: f"intrinsics of frame {i}", lambda i: f"pose of frame {i}")


def intrinsics_problem(k: np.ndarray, width: int, height: int) -> str | None:
    """Why a camera cannot be cast or None: finite, positive focal, principal point inside a sane image."""
    k = np.asarray(k, dtype=float)
    if k.shape != (3, 3) or not np.all(np.isfinite(k)):
        return "intrinsics are not finite numbers"
    if not (width > 0 and height > 0) or width * height > MAX_IMAGE_PIXELS:
        return f"image size {width}x{height} is not a positive size of at most {MAX_IMAGE_PIXELS} pixels"
    fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    if fx <= 0 or fy <= 0:
        return f"focal length must be positive, got fx={fx:g}, fy={fy:g}"
    if not (0 < cx < width and 0 < cy < height):
        return f"principal point ({cx:g}, {cy:g}) is outside the {width}x{height} image"
    return None


def rigid_problem(pose: np.ndarray) -> str | None:
    """Why a finite camera-to-world matrix is not a rigid transform, or None."""
    pose = np.asarray(pose, dtype=float)
    if pose.shape != (4, 4):
        return f"shape {pose.shape}, expected 4x4"
    if np.abs(pose[3] - [0, 0, 0, 1]).max() > 1e-6:
        return "projective (last row is not 0 0 0 1)"
    rotation = pose[:3, :3]
    with np.errstate(over="ignore", invalid="ignore"):  # huge entries overflow to inf or NaN: not rigid either way
        deviation = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
    if not deviation <= ROTATION_TOLERANCE:
        return f"not a rotation plus translation (max |RᵀR - I| = {deviation:.3g}: singular, scaled or sheared)"
    if np.linalg.det(rotation) < 0:
        return "a reflection (det < 0)"
    return None


def scene_bounds(parsed) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo, hi) corners of the scene's axis-aligned bounding box: its mesh's finite vertices, else its objects' boxes."""
    points = parsed.mesh.vertices if parsed.mesh is not None else np.zeros((0, 3))
    if len(points) == 0:
        corners = [obj.box.corners() for obj in parsed.objects if obj.box is not None]
        points = np.concatenate(corners) if corners else np.zeros((0, 3))
    points = np.asarray(points, dtype=float).reshape(-1, 3)
    points = points[np.all(np.isfinite(points), axis=1)]
    if len(points) == 0:
        return None
    return points.min(axis=0), points.max(axis=0)


def distance_outside(position: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]) -> float:
    """Metres from ``position`` to the box ``bounds`` (0 inside); inf when that overflows."""
    lo, hi = bounds
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.maximum(np.maximum(lo - position, position - hi), 0.0)
        distance = float(np.sqrt(np.sum(gap * gap)))
    return distance if np.isfinite(distance) else float("inf")


def far_camera_problem(pose: np.ndarray, bounds: tuple[np.ndarray, np.ndarray] | None) -> str | None:
    """Why a rigid pose puts its camera beyond ``MAX_CAMERA_DISTANCE_M`` of the scene's box, or None."""
    if bounds is None:
        return None
    position = np.asarray(pose, dtype=float)[:3, 3]
    distance = distance_outside(position, bounds)
    if distance <= MAX_CAMERA_DISTANCE_M:
        return None
    at = ", ".join(f"{x:.4g}" for x in position)
    how_far = f"{distance:.4g} m" if np.isfinite(distance) else "too far to measure (the distance overflows)"
    return f"camera at ({at}) is {how_far} outside the scene's bounding box (limit {MAX_CAMERA_DISTANCE_M:g} m)"


def _drop_frames(parsed, files, problem_of, what: str) -> None:
    """Drop (NaN pose) each valid frame whose pose ``problem_of`` names a problem; one counted warning, the first
    named by its pose file, so a thousand bad poses are one line."""
    dropped: list[tuple[int, str]] = []
    for frame in parsed.frames:
        if not frame.valid:
            continue
        problem = problem_of(frame.pose)
        if problem:
            dropped.append((frame.frame_index, problem))
            frame.pose = np.full((4, 4), np.nan)
    if dropped:
        index, problem = dropped[0]
        parsed.warnings.append(
            f"{len(dropped)} of {len(parsed.frames)} frames {what} and are dropped (first: {files.pose(index)}: {problem})"
        )


def check_frames(parsed, files: FrameFiles) -> None:
    """Fail the scan on an unusable camera; drop frames whose finite pose is not rigid or puts the camera beyond
    ``MAX_CAMERA_DISTANCE_M`` of the scene, with one warning for each of the two."""
    key = parsed.key
    for frame in parsed.frames:
        problem = intrinsics_problem(frame.intrinsics, frame.width, frame.height)
        if problem:
            raise ScanError(key, files.intrinsics(frame.frame_index), problem)
    _drop_frames(parsed, files, rigid_problem, "have a pose that is not a rigid transform")
    bounds = scene_bounds(parsed) if any(frame.valid for frame in parsed.frames) else None
    _drop_frames(parsed, files, lambda pose: far_camera_problem(pose, bounds),
                 f"have a camera more than {MAX_CAMERA_DISTANCE_M:g} m outside the scene")


# --- colour image files, from their bytes --------------------------------------------------------------------------


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the first start-of-frame marker, or None when not found in ``head``."""
    i = 2
    while i + 9 < len(head):
        if head[i] != 0xFF:
            return None
        marker = head[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", head[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", head[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def image_problem(path: Path) -> str | None:
    """Why a colour image file is unusable (empty, truncated, not a JPEG/PNG, absurd size), or None; no decode."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
            if head.startswith(b"\xff\xd8\xff") and _jpeg_size(head) is None and size > HEAD_BYTES:
                head += fh.read(LONG_HEAD_BYTES - HEAD_BYTES)
            fh.seek(max(size - 64, 0))
            tail = fh.read()
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    if not head:
        return "empty file"
    if head.startswith(b"\xff\xd8\xff"):
        dims = _jpeg_size(head)
        if dims is None:
            return "JPEG without a readable frame header (corrupt)"
        if b"\xff\xd9" not in tail:
            return "truncated JPEG (no end-of-image marker)"
    elif head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        dims = struct.unpack(">II", head[16:24])
        if b"IEND" not in tail:
            return "truncated PNG (no IEND chunk)"
    else:
        return f"not a JPEG or PNG image (starts with {head[:12]!r})"
    width, height = dims
    if width <= 0 or height <= 0 or width * height > MAX_IMAGE_PIXELS:
        return f"header claims {width}x{height} pixels (limit {MAX_IMAGE_PIXELS})"
    return None
