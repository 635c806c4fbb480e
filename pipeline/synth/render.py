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


@dataclass
class RenderedFrame:
    color_bgr: np.ndarray  # (H, W, 3) uint8
    depth_m: np.ndarray  # (H, W) float32, inf where nothing was hit
    triangle_ids: np.ndarray  # (H, W) int64, -1 where nothing was hit
    object_ids: np.ndarray  # (H, W) int32, -1 where nothing was hit

    @property
    def depth_mm(self) -> np.ndarray:
        """uint16 millimetres, 0 where nothing was hit (ScanNet's convention for missing depth)."""
        mm = np.where(np.isfinite(self.depth_m), np.rint(self.depth_m.astype(np.float64) * 1000.0), 0.0)
        return np.clip(mm, 0, MAX_DEPTH_MM).astype(np.uint16)

    def color_jpeg(self) -> bytes:
        ok, buf = cv2.imencode(".jpg", self.color_bgr, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise RuntimeError("JPEG encoding failed")
        return buf.tobytes()

    def depth_png(self) -> bytes:
        ok, buf = cv2.imencode(".png", self.depth_mm)
        if not ok:
            raise RuntimeError("PNG encoding failed")
        return buf.tobytes()


class FrameRenderer:
    """Renders any pose of one scene; the BVH and per-triangle shading inputs are built once."""

    def __init__(self, scene):
        mesh = scene.mesh
        self.scene = scene
        self.raycaster = MeshRaycaster(mesh.vertices, mesh.triangles)
        tri = mesh.vertices[mesh.triangles]
        normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
        self.normals = normals.astype(np.float32)
        self.tri_colors = mesh.colors[mesh.triangles].astype(np.float32).mean(axis=1)
        self.tri_object = mesh.triangle_object_ids
        self.camera = CameraRays(scene.intrinsics, scene.width, scene.height)
        x, y = np.meshgrid(self.camera.x.astype(np.float64), self.camera.y.astype(np.float64))
        length = np.sqrt(x**2 + y**2 + 1.0)
        self.inv_ray_length = (1.0 / length).ravel().astype(np.float32)  # rays have unit camera z, not unit length

    def render_pose(self, pose: np.ndarray) -> RenderedFrame:
        s = self.scene
        rays = self.camera.rays(pose)
        t_hit, prim = self.raycaster.cast_rays(rays)
        # Camera directions have unit z, so the ray parameter of a hit is its z-depth.
        depth = np.where(np.isfinite(t_hit), t_hit, np.inf).astype(np.float32).reshape(s.height, s.width)
        hit = prim >= 0
        safe = np.where(hit, prim, 0)
        n = self.normals[safe]
        facing = np.abs(np.einsum("ij,ij->i", n, rays[:, 3:])) * self.inv_ray_length
        shade = AMBIENT + DIFFUSE * np.abs(n @ _LIGHT.astype(np.float32)) + HEADLIGHT * facing
        rgb = self.tri_colors[safe] * shade[:, None]
        rgb = np.where(hit[:, None], np.clip(np.rint(rgb), 0, 255), 0).astype(np.uint8)
        objects = np.where(hit, self.tri_object[safe], -1).astype(np.int32)
        shape = (s.height, s.width)
        bgr = np.ascontiguousarray(rgb[:, ::-1].reshape(s.height, s.width, 3))
        return RenderedFrame(bgr, depth, prim.reshape(shape), objects.reshape(shape))

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
