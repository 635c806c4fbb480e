"""Geometry that every dataset layout stores without loss.

Each layout keeps the same scene in its own frame and precision: float32 PLY
vertices (ScanNet's in an unaligned frame), camera poses in text or JSON,
MultiScan's camera stream in a shifted ARKit world. A synthetic scene is only a
fair test of the readers if what they read back is the scene itself, bit for
bit, so that any difference between layouts is a convention bug and not
rounding. That holds when

- every vertex and camera centre lies on a binary grid fine enough to be
  invisible (``GRID`` = 2^-18 m, about 4 micrometres) and small enough that
  float32 holds it exactly (24 significant bits cover |x| < 64 m), and
- every frame change between layouts is a quarter turn about the vertical
  plus a shift on that grid: it moves grid points to grid points, and its
  inverse is exact (transpose and negated shift, no rounding).

Arbitrary yaws, as real ScanNet alignments have, would round every vertex
stored in the turned frame; the readers' handling of general matrices is
tested on hand-built scans instead.
"""

from __future__ import annotations

import numpy as np

GRID = 2.0**-18  # metres
SHIFT_STEP = 1.0 / 64.0  # shifts print exactly with 6 decimals, as ScanNet's axisAlignment is written


def snap(values: np.ndarray) -> np.ndarray:
    """``values`` moved to the nearest multiple of ``GRID`` (exactly representable in float32)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size and float(np.abs(values).max()) >= 64.0:
        raise ValueError("synthetic coordinates must stay within 64 m of the origin to be exact in float32")
    return np.round(values / GRID) * GRID + 0.0  # + 0.0 turns -0.0 into 0.0


def quarter_turn(rng: np.random.Generator, xy_shift: float, z_shift: tuple[float, float]) -> np.ndarray:
    """A seeded 4x4 rigid transform: yaw of k x 90 degrees, then a shift on the ``SHIFT_STEP`` grid."""
    turns = int(rng.integers(1, 4))  # never the identity: the stored frame must differ from the world
    c, s = [(1, 0), (0, 1), (-1, 0), (0, -1)][turns]
    transform = np.eye(4)
    transform[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    shift = [rng.uniform(-xy_shift, xy_shift), rng.uniform(-xy_shift, xy_shift), rng.uniform(*z_shift)]
    transform[:3, 3] = np.round(np.asarray(shift) / SHIFT_STEP) * SHIFT_STEP
    return transform + 0.0


def rigid_inverse(transform: np.ndarray) -> np.ndarray:
    """Inverse of a rigid 4x4 transform as transpose and negated shift (exact for quarter turns)."""
    transform = np.asarray(transform, dtype=np.float64)
    out = np.eye(4)
    out[:3, :3] = transform[:3, :3].T
    out[:3, 3] = -(transform[:3, :3].T @ transform[:3, 3])
    return out + 0.0
