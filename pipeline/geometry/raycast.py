"""Pinhole ray casting of a triangle mesh with Open3D's RaycastingScene.

One renderer serves both the synthetic frame generator and the visibility
step, so what a synthetic frame shows and what visibility counts are the same
computation: each pixel's ray hits exactly one triangle (or nothing) and that
triangle's object id is the pixel's object. Both build their rays with
``CameraRays`` (``pixel_rays`` is a thin wrapper), so the rays are bit-identical.

Pixel centres are at integer coordinates: pixel (u, v) is the ray through image
point (u, v), i.e. ``K^-1 [u, v, 1]``, the convention of OpenCV's pinhole model
and of every dataset toolkit's back-projection (ARKitScenes
``tenFpsDataLoader.generate_point``, ScanNet++ ``iphone/arkit_pcl.backproject``,
3RScan ``Sequence::Backproject``). So a depth frame rendered here and
back-projected by those toolkits lands on the mesh, and a real frame and its
ray-cast mask line up pixel for pixel.

Speed matters because visibility casts every frame of every scan: camera-space
directions are computed once per intrinsics and only rotated per pose, into a
reused buffer that Open3D reads without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.geometry.open3d_import import import_open3d
from pipeline.threads import worker_threads

o3d = import_open3d()  # without Open3D's Plotly/Dash viewer (pipeline.geometry.open3d_import)

INVALID_ID = int(o3d.t.geometry.RaycastingScene.INVALID_ID)


def grid_size(width: int, height: int, scale: float = 1.0) -> tuple[int, int]:
    """(w', h') of the ray grid that stands for a ``width`` x ``height`` image at ``scale``."""
    return max(1, int(round(width * scale))), max(1, int(round(height * scale)))


class CameraRays:
    """Rays through the pixel centres (integer pixel coordinates) of one camera model, for any pose.

    ``scale`` < 1 casts a reduced grid (each ray stands for about 1/scale²
    pixels), sampling the centres of the reduced cells in full-image
    coordinates so that the same intrinsics apply: cell ``j`` of width
    ``s = width / w'`` covers pixels ``j s .. (j + 1) s - 1``, whose centre is
    ``(j + 0.5) s - 0.5`` (pixel ``j`` itself when ``s = 1``).
    """

    def __init__(self, intrinsics: np.ndarray, width: int, height: int, scale: float = 1.0):
        self.width, self.height = int(width), int(height)
        self.grid_width, self.grid_height = grid_size(width, height, scale)
        w, h = self.grid_width, self.grid_height
        us = (np.arange(w) + 0.5) * (width / w) - 0.5
        vs = (np.arange(h) + 0.5) * (height / h) - 0.5
        K = np.asarray(intrinsics, dtype=np.float64).reshape(3, 3)
        # Camera-space direction of pixel (u, v) is (x[u], y[v], 1): unit z, so the ray
        # parameter t of a hit is its z-depth, and each world component is an outer sum.
        self.x = ((us - K[0, 2]) / K[0, 0]).astype(np.float32)
        self.y = ((vs - K[1, 2]) / K[1, 1]).astype(np.float32)
        self._buffer = np.empty((w * h, 6), dtype=np.float32)

    @property
    def count(self) -> int:
        return self.grid_width * self.grid_height

    def rays(self, pose: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(h'*w', 6) float32 world rays for camera-to-world ``pose`` (OpenCV axes).

        Without ``out`` the returned array is an internal buffer overwritten by
        the next call; pass ``out`` (or copy) to keep it.
        """
        buf = self._buffer if out is None else out
        pose = np.asarray(pose, dtype=np.float64)
        R = pose[:3, :3].astype(np.float32)
        # Row v of the buffer is C + y[v] D, with C = [origin, R[:,0] x[u] + R[:,2]] and
        # D = [0, R[:,1]] laid out over u: two contiguous passes over the buffer.
        w = self.grid_width
        C = np.empty((w, 6), dtype=np.float32)
        C[:, :3] = pose[:3, 3].astype(np.float32)
        C[:, 3:] = self.x[:, None] * R[:, 0] + R[:, 2]
        D = np.zeros((w, 6), dtype=np.float32)
        D[:, 3:] = R[:, 1]
        rows = buf.reshape(self.grid_height, w * 6)
        np.multiply(self.y[:, None], D.reshape(1, -1), out=rows)
        np.add(rows, C.reshape(1, -1), out=rows)
        return buf

    def rays_at(self, pose: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        """(n, 6) float32 rays of some grid pixels (row-major indices ``v * grid_width + u``) for ``pose``.

        Bit-identical to the same rows of ``rays(pose)``: the same float32
        operations in the same order, so a coarse-to-fine cast that casts a
        pixel here sees exactly what the full grid sees there.
        """
        pixels = np.asarray(pixels)
        v = pixels // self.grid_width
        u = pixels - v * self.grid_width
        pose = np.asarray(pose, dtype=np.float64)
        R = pose[:3, :3].astype(np.float32)
        xs, ys = self.x[u], self.y[v]
        # Per world axis k: (x[u] R[k,0] + R[k,2]) + y[v] R[k,1], float32 throughout as in rays().
        direction = np.empty((3, pixels.shape[0]), dtype=np.float32)
        for k in range(3):
            np.multiply(xs, R[k, 0], out=direction[k])
            direction[k] += R[k, 2]
            direction[k] += ys * R[k, 1]
        out = np.empty((pixels.shape[0], 6), dtype=np.float32)
        out[:, :3] = pose[:3, 3].astype(np.float32)
        out[:, 3:] = direction.T
        return out


def pixel_rays(intrinsics: np.ndarray, pose: np.ndarray, width: int, height: int, scale: float = 1.0) -> np.ndarray:
    """(H', W', 6) float32 rays through pixel centres, camera-to-world ``pose`` in OpenCV axes.

    Ray ``[v, u]`` starts at the camera centre and has direction ``R K^-1 [u, v, 1]``
    (unit camera z), so it passes through integer pixel coordinate (u, v).

    ``scale`` < 1 casts a reduced grid (each ray stands for 1/scale² pixels).
    """
    cam = CameraRays(intrinsics, width, height, scale)
    return cam.rays(pose, out=np.empty((cam.count, 6), dtype=np.float32)).reshape(cam.grid_height, cam.grid_width, 6)


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

    @staticmethod
    def _tensor(rays: np.ndarray) -> o3d.core.Tensor:
        """Share contiguous float32 rays with Open3D instead of copying them."""
        if rays.dtype == np.float32 and rays.flags.c_contiguous:
            return o3d.core.Tensor.from_numpy(rays)
        return o3d.core.Tensor(np.ascontiguousarray(rays, dtype=np.float32))

    def cast_rays(self, rays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw cast: returns (t_hit, primitive_ids) with -1 for misses."""
        ans = self.scene.cast_rays(self._tensor(rays), nthreads=worker_threads())
        t_hit = ans["t_hit"].numpy()
        # INVALID_ID is 2**32-1: read as int32 it is exactly -1.
        prim = ans["primitive_ids"].numpy().view(np.int32).astype(np.int64)
        return t_hit, prim

    def cast_triangle_ids(self, rays: np.ndarray) -> np.ndarray:
        """Hit triangle per ray as int32, -1 for a miss; the leanest cast, for counting.

        The returned array is a view of Open3D's result memory (kept alive by the view).
        """
        ans = self.scene.cast_rays(self._tensor(rays), nthreads=worker_threads())
        return ans["primitive_ids"].numpy().view(np.int32).reshape(rays.shape[:-1])

    def render(self, intrinsics: np.ndarray, pose: np.ndarray, width: int, height: int, scale: float = 1.0) -> Hits:
        rays = pixel_rays(intrinsics, pose, width, height, scale)
        t_hit, prim = self.cast_rays(rays)
        # Directions have unit z in camera space, so t along them is the z-depth.
        depth = np.where(np.isfinite(t_hit), t_hit, np.inf).astype(np.float32)
        return Hits(depth=depth, triangle_ids=prim)
