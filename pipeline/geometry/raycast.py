"""Pinhole ray casting of a triangle mesh with Open3D's RaycastingScene.

One renderer serves both the synthetic frame generator and the visibility
step, so what a synthetic frame shows and what visibility counts are the same
computation: each pixel's ray hits exactly one triangle (or nothing) and that
triangle's object id is the pixel's object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import open3d as o3d

INVALID_ID = int(o3d.t.geometry.RaycastingScene.INVALID_ID)


def pixel_rays(intrinsics: np.ndarray, pose: np.ndarray, width: int, height: int, scale: float = 1.0) -> np.ndarray:
    """(H', W', 6) float32 rays through pixel centres, camera-to-world ``pose`` in OpenCV axes.

    ``scale`` < 1 casts a reduced grid (each ray stands for 1/scale² pixels).
    """
    w = max(1, int(round(width * scale)))
    h = max(1, int(round(height * scale)))
    us = (np.arange(w) + 0.5) * (width / w)
    vs = (np.arange(h) + 0.5) * (height / h)
    uu, vv = np.meshgrid(us, vs)
    K = np.asarray(intrinsics, dtype=np.float64)
    x = (uu - K[0, 2]) / K[0, 0]
    y = (vv - K[1, 2]) / K[1, 1]
    dirs_cam = np.stack([x, y, np.ones_like(x)], axis=-1)
    R = pose[:3, :3]
    dirs = dirs_cam @ R.T
    origins = np.broadcast_to(pose[:3, 3], dirs.shape)
    return np.concatenate([origins, dirs], axis=-1).astype(np.float32)


@dataclass
class Hits:
    depth: np.ndarray  # (H, W) float32 z-depth in metres along the optical axis; inf where no hit
    triangle_ids: np.ndarray  # (H, W) int64; -1 where no hit


class MeshRaycaster:
    """A mesh loaded once into a BVH, cast from many cameras."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray):
        if len(triangles) == 0:
            raise ValueError("mesh has no triangles")
        self.scene = o3d.t.geometry.RaycastingScene()
        self.scene.add_triangles(
            o3d.core.Tensor(np.ascontiguousarray(vertices, dtype=np.float32)),
            o3d.core.Tensor(np.ascontiguousarray(triangles, dtype=np.uint32)),
        )
        self.triangle_count = len(triangles)

    def cast_rays(self, rays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw cast: returns (t_hit, primitive_ids) with -1 for misses."""
        ans = self.scene.cast_rays(o3d.core.Tensor(rays))
        t_hit = ans["t_hit"].numpy()
        prim = ans["primitive_ids"].numpy().astype(np.int64)
        prim[prim == INVALID_ID] = -1
        return t_hit, prim

    def render(self, intrinsics: np.ndarray, pose: np.ndarray, width: int, height: int, scale: float = 1.0) -> Hits:
        rays = pixel_rays(intrinsics, pose, width, height, scale)
        t_hit, prim = self.cast_rays(rays)
        # Directions have unit z in camera space, so t along them is the z-depth.
        depth = np.where(np.isfinite(t_hit), t_hit, np.inf).astype(np.float32)
        return Hits(depth=depth, triangle_ids=prim)
