"""Colour and depth frames of a synthetic scene, ray cast with the same ``MeshRaycaster`` visibility uses.

A pixel shows the triangle its ray hits: colour is that triangle's vertex
colour under simple Lambert shading (a fixed overhead light plus a head light),
depth is the hit's z-depth. So what a frame shows is exactly what the geometry
and the visibility step say.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from pipeline.geometry.raycast import CameraRays, MeshRaycaster

_LIGHT = np.array([0.4, 0.3, 1.0]) / np.linalg.norm([0.4, 0.3, 1.0])
AMBIENT, DIFFUSE, HEADLIGHT = 0.35, 0.4, 0.35
JPEG_QUALITY = 92
MAX_DEPTH_MM = 65535
# 16-bit depth PNGs with zlib's default strategy instead of OpenCV's default run-length one: lossless either way
# (the same millimetres decode back), but about half the bytes and a third less CPU for smooth depth.
DEPTH_PNG_PARAMS = (cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_DEFAULT)


def depth_png(depth_mm: np.ndarray) -> bytes:
    """A uint16 millimetre depth frame as PNG bytes (ScanNet's ``depth/<i>.png``, ARKitScenes' ``lowres_depth``)."""
    ok, buf = cv2.imencode(".png", depth_mm, list(DEPTH_PNG_PARAMS))
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes()


@dataclass
class RenderedFrame:
    color_bgr: np.ndarray  # (H, W, 3) uint8
    depth_m: np.ndarray  # (H, W) float32, inf where nothing was hit
    triangle_ids: np.ndarray  # (H, W) int64, -1 where nothing was hit
    object_ids: np.ndarray  # (H, W) int32, -1 where nothing was hit

    @property
    def depth_mm(self) -> np.ndarray:
        """uint16 millimetres, 0 where nothing was hit (ScanNet's convention for missing depth).

        Rounded in float64 (float32 metres times 1000 would round some values differently).
        """
        mm = self.depth_m.astype(np.float64)
        mm *= 1000.0
        np.rint(mm, out=mm)
        mm[~np.isfinite(mm)] = 0.0
        np.clip(mm, 0, MAX_DEPTH_MM, out=mm)
        return mm.astype(np.uint16)

    def color_jpeg(self) -> bytes:
        ok, buf = cv2.imencode(".jpg", self.color_bgr, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise RuntimeError("JPEG encoding failed")
        return buf.tobytes()

    def depth_png(self) -> bytes:
        return depth_png(self.depth_mm)


def triangle_normals_and_colors(mesh) -> tuple[np.ndarray, np.ndarray]:
    """Unit face normals and mean vertex colours per triangle (float32), what both renderers shade with."""
    tri = mesh.vertices[mesh.triangles]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    return normals.astype(np.float32), mesh.colors[mesh.triangles].astype(np.float32).mean(axis=1)


# Rows of ``FrameRenderer.shading``: the triangle normal, its pose-independent shade, its colour in BGR order.
_NX, _NY, _NZ, _BASE = 0, 1, 2, 3
_BGR = slice(4, 7)


class FrameRenderer:
    """Renders any pose of one scene; the BVH and per-triangle shading inputs are built once.

    Rendering is most of ``scan2qa synth``'s CPU, so everything that does not
    depend on the pose is computed here once: each triangle's normal, colour
    and the overhead-light part of its shade, laid out as one row per quantity
    (``shading``, 7 x (T + 1) float32) so that a frame gathers them for its
    pixels in a single ``np.take``. The extra last column is all zeros and is
    what a miss (triangle id -1) indexes, so misses come out black with object
    id -1 without a separate mask pass.

    Every float32 operation of a pixel's colour is the one the first version
    of this renderer did per pixel (the same operands in the same order), so
    the frames are bit-identical to it; ``pipeline.bench.synth`` keeps that
    version as the baseline and tests/test_synth_render.py compares them.
    """

    def __init__(self, scene):
        mesh = scene.mesh
        self.scene = scene
        self.raycaster = MeshRaycaster(mesh.vertices, mesh.triangles)
        normals, colors = triangle_normals_and_colors(mesh)
        count = len(normals)
        self.shading = np.zeros((7, count + 1), dtype=np.float32)
        self.shading[_NX:_NZ + 1, :count] = normals.T
        # The overhead light depends on the triangle only: AMBIENT + DIFFUSE |n . light| in float32, as per pixel.
        self.shading[_BASE, :count] = AMBIENT + DIFFUSE * np.abs(normals @ _LIGHT.astype(np.float32))
        self.shading[_BGR, :count] = colors[:, ::-1].T
        self.object_of_triangle = np.append(np.asarray(mesh.triangle_object_ids, dtype=np.int32), np.int32(-1))
        self.camera = CameraRays(scene.intrinsics, scene.width, scene.height)
        x, y = np.meshgrid(self.camera.x.astype(np.float64), self.camera.y.astype(np.float64))
        length = np.sqrt(x**2 + y**2 + 1.0)
        self.inv_ray_length = (1.0 / length).ravel().astype(np.float32)  # rays have unit camera z, not unit length

    def render_pose(self, pose: np.ndarray) -> RenderedFrame:
        s = self.scene
        shape = (s.height, s.width)
        rays = self.camera.rays(pose)
        t_hit, prim = self.raycaster.cast_rays(rays)
        # Camera directions have unit z, so the ray parameter of a hit is its z-depth.
        depth = np.where(np.isfinite(t_hit), t_hit, np.float32(np.inf)).reshape(shape)
        g = np.take(self.shading, prim, axis=1)  # (7, pixels); a miss (-1) takes the zero column
        # Head light: |n . d| / |d|, the dot product summed left to right in float32.
        facing = g[_NX] * rays[:, 3]
        facing += g[_NY] * rays[:, 4]
        facing += g[_NZ] * rays[:, 5]
        np.abs(facing, out=facing)
        facing *= self.inv_ray_length
        facing *= np.float32(HEADLIGHT)
        shade = np.add(g[_BASE], facing, out=facing)
        bgr = g[_BGR]
        bgr *= shade
        np.rint(bgr, out=bgr)
        np.clip(bgr, 0, 255, out=bgr)
        planes = bgr.astype(np.uint8).reshape(3, *shape)
        color = cv2.merge([planes[0], planes[1], planes[2]])
        objects = np.take(self.object_of_triangle, prim).reshape(shape)
        return RenderedFrame(color, depth, prim.reshape(shape), objects)

    def render(self, index: int) -> RenderedFrame:
        return self.render_pose(self.scene.poses[index])


def held_frames(scene_fps: float, video_fps: float, camera: str) -> int:
    """Video frames each synthetic frame is held for, so resampling the video by time gives back exactly the walk."""
    hold = video_fps / scene_fps
    if abs(hold - round(hold)) > 1e-9 or round(hold) < 1:
        raise ValueError(f"scene fps {scene_fps} does not divide the {camera}'s {video_fps} fps")
    return int(round(hold))


def write_held_video(scene, path, video_fps: float, hold: int, progress=None, renderer: FrameRenderer | None = None) -> None:
    """Render each frame once and write it ``hold`` times into a video at ``video_fps`` (mp4v; container by suffix)."""
    from pipeline.frames.video import VideoWriter

    renderer = renderer or FrameRenderer(scene)
    writer = VideoWriter(path, video_fps, (scene.width, scene.height))
    try:
        n = len(scene.poses)
        for i in range(n):
            writer.write(renderer.render(i).color_bgr, times=hold)
            if progress is not None:
                progress(i + 1, n)
    finally:
        writer.close()
