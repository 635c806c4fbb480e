"""Comparing boxes whose formats order (and orient) their axes differently."""

from __future__ import annotations

import numpy as np

from pipeline.scene.parsed import OrientedBox


def horizontal(extent, rotation) -> tuple[np.ndarray, float]:
    """(sorted horizontal side lengths, height): independent of which rotation column is vertical."""
    extent, rotation = np.asarray(extent, dtype=float), np.asarray(rotation, dtype=float).reshape(3, 3)
    vertical = int(np.argmax(np.abs(rotation[2, :])))
    return np.sort(np.delete(extent, vertical)), float(extent[vertical])


def box_error(center, extent, rotation, truth_box: dict) -> float:
    """Largest centre or side-length difference against a sidecar box."""
    xy, h = horizontal(extent, rotation)
    true_xy, true_h = horizontal(truth_box["extent"], truth_box["rotation"])
    return max(
        float(np.abs(np.asarray(center) - truth_box["center"]).max()),
        float(np.abs(xy - true_xy).max()),
        abs(h - true_h),
    )


def sorted_corners(center, extent, rotation) -> np.ndarray:
    """The 8 corners in a canonical order, so boxes with permuted axes compare equal."""
    box = OrientedBox(np.asarray(center), np.asarray(extent), np.asarray(rotation, dtype=float).reshape(3, 3))
    corners = box.corners()
    return corners[np.lexsort(np.round(corners, 4).T[::-1])]
