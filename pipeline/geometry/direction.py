"""Egocentric direction of an object for "standing by A, facing B, where is C?" questions.

The observer stands at A's centre and faces B's centre (or the opposite way
for the "backward" variants); C's direction is its angle in the floor plane,
measured counter-clockwise from the facing direction seen from above (z up),
so counter-clockwise is the observer's left. Angles are degrees in [0, 360).

Bins (half-open, as SPEC §4 states them; a bin boundary itself never survives
a positive margin, so the half-open choice only matters with margin 0):

* ``easy`` (ReVSI easy, VSI-Bench "medium"): left [0, 135), back [135, 225),
  right [225, 360). This is ReVSI's template: "to my back if I would have to
  turn at least 135 degrees" -- a turn of >= 135 either way is back. The facing
  direction itself (0) is the left/right boundary.
* ``hard`` (quadrants): front-left [0, 90), back-left [90, 180),
  back-right [180, 270), front-right [270, 360).
* ``left_right`` (VSI-Bench "easy": "to the left or the right of B"):
  left [0, 180), right [180, 360).

Each mode's boundaries are the edges of its own bins (easy: 0, 135, 225;
hard: 0, 90, 180, 270; left_right: 0, 180). ReVSI B.8 lists the union
(0, 90, 135, 180, 225, 270) in one sentence; applying the union to the easy
question would also reject angles near 90 and 180, which are unambiguous
there, so the margin is applied to the boundaries of the question's own bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.scene import OrientedBox


@dataclass(frozen=True)
class DirectionMode:
    """Bin edges (ascending, starting at 0) and their labels; bin k is [edges[k], edges[k+1])."""

    edges: tuple[float, ...]
    labels: tuple[str, ...]


MODES: dict[str, DirectionMode] = {
    "easy": DirectionMode((0.0, 135.0, 225.0), ("left", "back", "right")),
    "hard": DirectionMode((0.0, 90.0, 180.0, 270.0), ("front-left", "back-left", "back-right", "front-right")),
    "left_right": DirectionMode((0.0, 180.0), ("left", "right")),
}


def _mode(mode: str) -> DirectionMode:
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"unknown direction mode {mode!r}; known: {sorted(MODES)}") from None


def facing_angles(a_center, b_center, c_points, backward: bool) -> np.ndarray:
    """Angles (degrees, [0, 360)) of each of ``c_points`` (..., 2 or 3) seen from A facing B (or away)."""
    a = np.asarray(a_center, dtype=float)[:2]
    facing = np.asarray(b_center, dtype=float)[:2] - a
    if backward:
        facing = -facing
    if not np.any(facing):
        raise ValueError("facing direction undefined: A and B share the same floor position")
    v = np.asarray(c_points, dtype=float)[..., :2] - a
    cross = facing[0] * v[..., 1] - facing[1] * v[..., 0]
    dot = facing[0] * v[..., 0] + facing[1] * v[..., 1]
    angles = np.degrees(np.arctan2(cross, dot)) % 360.0
    # -0.0 % 360 and tiny negatives can round to exactly 360.0.
    return np.where(angles >= 360.0, 0.0, angles)


def facing_angle(a_center, b_center, c_center, backward: bool) -> float:
    """Angle (degrees in [0, 360)) of C's centre, counter-clockwise (= left) from facing B (or away from B)."""
    if not np.any(np.asarray(c_center, dtype=float)[:2] - np.asarray(a_center, dtype=float)[:2]):
        raise ValueError("direction undefined: C shares A's floor position")
    return float(facing_angles(a_center, b_center, c_center, backward))


def classify_direction(angle: float, mode: str) -> str:
    """The bin label of an angle (degrees) under ``mode`` ("easy", "hard" or "left_right")."""
    spec = _mode(mode)
    a = float(angle) % 360.0
    if a >= 360.0:  # tiny negative angles round up to 360
        a = 0.0
    k = int(np.searchsorted(np.asarray(spec.edges), a, side="right")) - 1
    return spec.labels[k]


def boundary_distance(angle: float, mode: str) -> float:
    """Smallest angular distance (degrees) from ``angle`` to any bin boundary of ``mode``."""
    edges = np.asarray(_mode(mode).edges)
    diff = np.abs((float(angle) - edges + 180.0) % 360.0 - 180.0)
    return float(diff.min())


def direction_answer(
    a: OrientedBox,
    b: OrientedBox,
    c: OrientedBox,
    backward: bool,
    mode: str,
    margin_deg: float = 35.0,
    max_corner_outliers: int = 2,
) -> tuple[str, dict] | None:
    """The answer label for C, or None where ReVSI would drop the question as ambiguous.

    Rejections: C's centre angle within ``margin_deg`` of a bin boundary of
    ``mode``; more than ``max_corner_outliers`` of C's 8 box corners in a bin
    other than the centre's (a large or near object straddles two answers);
    undefined geometry (A and B, or A and C, at the same floor position).
    ``info`` holds the measurements for auditing.
    """
    try:
        angle = facing_angle(a.center, b.center, c.center, backward)
    except ValueError:
        return None
    margin = boundary_distance(angle, mode)
    if margin < margin_deg:
        return None
    label = classify_direction(angle, mode)
    corners = c.corners()
    corner_offsets = corners[:, :2] - np.asarray(a.center, dtype=float)[:2]
    if np.any(np.all(np.abs(corner_offsets) < 1e-12, axis=1)):
        return None  # a corner at the observer's position has no direction
    corner_angles = facing_angles(a.center, b.center, corners, backward)
    corner_labels = [classify_direction(x, mode) for x in corner_angles]
    outliers = sum(1 for x in corner_labels if x != label)
    if outliers > max_corner_outliers:
        return None
    info = {
        "angle_deg": angle,
        "boundary_margin_deg": margin,
        "corner_angles_deg": [float(x) for x in corner_angles],
        "corner_outliers": outliers,
        "backward": bool(backward),
        "mode": mode,
    }
    return label, info
