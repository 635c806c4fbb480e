"""A camera turned with its image by a multiple of 90 degrees.

Datasets store frames the way the device was held (3RScan sideways,
ARKitScenes by sky direction); videos and questions are sky-up. Turning the
camera instead of the pixels lets visibility cast exactly the rays a sky-up
scan of the same scene would cast, so a stored orientation never changes which
triangle a pixel sees.
"""

from __future__ import annotations

import numpy as np


CAMERA_AXES_TURNED_CW = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # new x, y, z in old axes


def quarter_turns(degrees_cw: int) -> int:
    if int(degrees_cw) % 90:
        raise ValueError(f"camera rotation must be a multiple of 90 degrees, got {degrees_cw}")
    return (int(degrees_cw) // 90) % 4


def turned_pose(pose: np.ndarray, degrees_cw: int) -> np.ndarray:
    """Camera-to-world pose of the image turned ``degrees_cw`` clockwise: the new x axis is the old -y, y the old x.

    Each turn only permutes and negates columns, so the result is exact.
    """
    pose = np.asarray(pose, dtype=float).copy()
    for _ in range(quarter_turns(degrees_cw)):
        pose[:3, :3] = pose[:3, :3] @ CAMERA_AXES_TURNED_CW
    return pose


def turned_intrinsics(intrinsics: np.ndarray, width: int, height: int, degrees_cw: int) -> tuple[np.ndarray, int, int]:
    """K, width, height of the image turned ``degrees_cw`` clockwise: pixel (u, v) goes to (height - 1 - v, u).

    Pixel centres are at integer coordinates (``pipeline.geometry.raycast``), so
    the turn is exactly what ``cv2.rotate`` does to the pixel array: row ``v``
    of the old image becomes column ``height - 1 - v`` of the new one.
    """
    k = np.asarray(intrinsics, dtype=float).copy()
    for _ in range(quarter_turns(degrees_cw)):
        fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
        k = np.array([[fy, 0.0, height - 1 - cy], [0.0, fx, cx], [0.0, 0.0, 1.0]])
        width, height = height, width
    return k, width, height


def rotated_camera(
    pose: np.ndarray, intrinsics: np.ndarray, width: int, height: int, degrees_cw: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The camera of the image turned ``degrees_cw`` clockwise (a multiple of 90): pose, K, width, height."""
    k, width, height = turned_intrinsics(intrinsics, width, height, degrees_cw)
    return turned_pose(pose, degrees_cw), k, width, height
