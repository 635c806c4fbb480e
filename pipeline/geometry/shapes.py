"""Plain geometry types every stage shares: boxes and room outlines, in the world frame of SPEC §1.

They live in ``geometry`` (below ``scene``) so that geometry code never reaches up into the scan model;
``pipeline.scene.parsed`` imports them for its ``ParsedScan``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OrientedBox:
    """Oriented box: ``rotation`` columns are the box axes in world coordinates."""

    center: np.ndarray  # (3,)
    extent: np.ndarray  # (3,) full side lengths along the rotation's columns
    rotation: np.ndarray  # (3, 3)

    @property
    def vertical_axis(self) -> int:
        """The rotation column most aligned with world z (formats put it anywhere)."""
        return int(np.argmax(np.abs(self.rotation[2, :])))

    @property
    def height(self) -> float:
        return float(self.extent[self.vertical_axis])

    @property
    def xy_extent(self) -> np.ndarray:
        """The two horizontal side lengths."""
        return np.delete(self.extent, self.vertical_axis)

    def corners(self) -> np.ndarray:
        """(8, 3) corners in world coordinates."""
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
        return self.center + (signs * (self.extent / 2.0)) @ self.rotation.T

    def to_local(self, points: np.ndarray) -> np.ndarray:
        return (np.asarray(points, dtype=float) - self.center) @ self.rotation

    def contains(self, points: np.ndarray, tol: float = 1e-6) -> np.ndarray:
        local = self.to_local(points)
        return np.all(np.abs(local) <= self.extent / 2.0 + tol, axis=-1)


@dataclass
class Room:
    polygon: object  # shapely Polygon or MultiPolygon in the xy plane
    kind: str  # "scene" | "main"
    source: str  # "annotated" | "derived"
