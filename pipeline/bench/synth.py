"""``scan2qa bench synth``: the synthetic renderer's CPU per scene and per frame, against its first version.

``scan2qa synth`` spends nearly all of its time rendering (ray cast, shade,
encode), so this bench generates the same scenes ``scan2qa synth`` would,
renders every frame with ``FrameRenderer`` and with ``ReferenceRenderer`` (the
renderer as it was first written, kept here verbatim as the baseline) one
frame after the other, checks that both give the same pixels, depth, triangle
and object ids bit for bit, and reports CPU seconds: scene generation, the
ray cast alone, rendering with each renderer, and the JPEG + depth-PNG
encoding that ScanNet's layout stores (the depth PNG with today's settings and
with the first ones; both decode to the same millimetres).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pipeline.geometry.raycast import CameraRays, MeshRaycaster

_LIGHT = np.array([0.4, 0.3, 1.0]) / np.linalg.norm([0.4, 0.3, 1.0])


class ReferenceRenderer:
    """The first ``FrameRenderer`` (shading every pixel with gathers, ``einsum`` and ``where``), for comparison only."""

    def __init__(self, scene):
        from pipeline.synth.render import AMBIENT, DIFFUSE, HEADLIGHT, triangle_normals_and_colors

        self.ambient, self.diffuse, self.headlight = AMBIENT, DIFFUSE, HEADLIGHT
        mesh = scene.mesh
        self.scene = scene
        self.raycaster = MeshRaycaster(mesh.vertices, mesh.triangles)
        self.normals, self.tri_colors = triangle_normals_and_colors(mesh)
        self.tri_object = mesh.triangle_object_ids
        self.camera = CameraRays(scene.intrinsics, scene.width, scene.height)
        x, y = np.meshgrid(self.camera.x.astype(np.float64), self.camera.y.astype(np.float64))
        length = np.sqrt(x**2 + y**2 + 1.0)
        self.inv_ray_length = (1.0 / length).ravel().astype(np.float32)

    def render_pose(self, pose: np.ndarray):
        from pipeline.synth.render import RenderedFrame

        s = self.scene
        rays = self.camera.rays(pose)
        t_hit, prim = self.raycaster.cast_rays(rays)
        depth = np.where(np.isfinite(t_hit), t_hit, np.inf).astype(np.float32).reshape(s.height, s.width)
        hit = prim >= 0
        safe = np.where(hit, prim, 0)
        n = self.normals[safe]
        facing = np.abs(np.einsum("ij,ij->i", n, rays[:, 3:])) * self.inv_ray_length
        shade = self.ambient + self.diffuse * np.abs(n @ _LIGHT.astype(np.float32)) + self.headlight * facing
        rgb = self.tri_colors[safe] * shade[:, None]
        rgb = np.where(hit[:, None], np.clip(np.rint(rgb), 0, 255), 0).astype(np.uint8)
        objects = np.where(hit, self.tri_object[safe], -1).astype(np.int32)
        shape = (s.height, s.width)
        bgr = np.ascontiguousarray(rgb[:, ::-1].reshape(s.height, s.width, 3))
        return RenderedFrame(bgr, depth, prim.reshape(shape), objects.reshape(shape))

    @staticmethod
    def reference_depth_png(depth_mm: np.ndarray) -> bytes:
        """The first depth PNG: OpenCV's default settings (run-length strategy)."""
        import cv2

        return cv2.imencode(".png", depth_mm)[1].tobytes()

    def reference_depth_mm(self, frame) -> np.ndarray:
        """The first ``RenderedFrame.depth_mm``."""
        from pipeline.synth.render import MAX_DEPTH_MM

        mm = np.where(np.isfinite(frame.depth_m), np.rint(frame.depth_m.astype(np.float64) * 1000.0), 0.0)
        return np.clip(mm, 0, MAX_DEPTH_MM).astype(np.uint16)


class _TimedCaster:
    """A ray caster that adds the CPU seconds of each ``cast_rays`` call to ``cpu["cast"]``."""

    def __init__(self, raycaster: MeshRaycaster, cpu: dict):
        self._raycaster, self._cpu = raycaster, cpu

    def cast_rays(self, rays):
        clock = time.process_time()
        result = self._raycaster.cast_rays(rays)
        self._cpu["cast"] += time.process_time() - clock
        return result


def same_frame(a, b) -> bool:
    """Every array of two rendered frames equal bit for bit, with the same dtypes."""
    pairs = [(a.color_bgr, b.color_bgr), (a.depth_m, b.depth_m), (a.triangle_ids, b.triangle_ids), (a.object_ids, b.object_ids)]
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in pairs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenes", type=int, default=1, help="synthetic scenes (as scan2qa synth --scenes)")
    parser.add_argument("--frames", type=int, default=60, help="frames per scene")
    parser.add_argument("--seed", type=int, default=0)


def run_synth_bench(args: argparse.Namespace) -> dict:
    from pipeline.synth.render import FrameRenderer
    from pipeline.synth.scene import generate_scene

    cpu = dict(generate=0.0, setup=0.0, reference_setup=0.0, cast=0.0, render=0.0, reference_render=0.0,
               depth_mm=0.0, reference_depth_mm=0.0, encode=0.0, reference_encode=0.0)
    frames = identical = 0
    for index in range(args.scenes):
        clock = time.process_time()
        scene = generate_scene(args.seed, index, args.frames)
        cpu["generate"] += time.process_time() - clock
        clock = time.process_time()
        renderer = FrameRenderer(scene)
        cpu["setup"] += time.process_time() - clock
        clock = time.process_time()
        reference = ReferenceRenderer(scene)
        cpu["reference_setup"] += time.process_time() - clock
        renderer.raycaster = _TimedCaster(renderer.raycaster, cpu)  # the ray cast inside the new renderer's frames
        steps = (("render", renderer.render_pose), ("reference_render", reference.render_pose))
        for i, pose in enumerate(scene.poses):
            # Alternate which renderer goes first, so neither always finds the caches warm.
            rendered = {}
            for name, step in steps if i % 2 == 0 else steps[::-1]:
                clock = time.process_time()
                rendered[name] = step(pose)
                cpu[name] += time.process_time() - clock
            new, old = rendered["render"], rendered["reference_render"]
            clock = time.process_time()
            new_mm = new.depth_mm
            cpu["depth_mm"] += time.process_time() - clock
            clock = time.process_time()
            old_mm = reference.reference_depth_mm(old)
            cpu["reference_depth_mm"] += time.process_time() - clock
            clock = time.process_time()
            new.color_jpeg()
            new.depth_png()
            cpu["encode"] += time.process_time() - clock
            clock = time.process_time()
            old.color_jpeg()
            reference.reference_depth_png(old_mm)
            cpu["reference_encode"] += time.process_time() - clock
            frames += 1
            identical += int(same_frame(new, old) and np.array_equal(new_mm, old_mm))
    scenes = args.scenes
    per_scene = (cpu["generate"] + cpu["setup"] + cpu["render"] + cpu["depth_mm"] + cpu["encode"]) / scenes
    reference_per_scene = (
        cpu["generate"] + cpu["reference_setup"] + cpu["reference_render"] + cpu["reference_depth_mm"] + cpu["reference_encode"]
    ) / scenes
    return {
        "scenes": scenes,
        "frames": frames,
        "identical_frames": identical,
        "cpu_s_per_scene": round(per_scene, 3),
        "reference_cpu_s_per_scene": round(reference_per_scene, 3),
        "ratio": round(reference_per_scene / per_scene, 3) if per_scene else None,
        "generate_cpu_s_per_scene": round(cpu["generate"] / scenes, 3),
        "cast_cpu_ms_per_frame": round(cpu["cast"] / frames * 1000, 2),
        "render_cpu_ms_per_frame": round(cpu["render"] / frames * 1000, 2),
        "reference_render_cpu_ms_per_frame": round(cpu["reference_render"] / frames * 1000, 2),
        "shade_cpu_ms_per_frame": round((cpu["render"] - cpu["cast"]) / frames * 1000, 2),
        "reference_shade_cpu_ms_per_frame": round((cpu["reference_render"] - cpu["cast"]) / frames * 1000, 2),
        "depth_mm_cpu_ms_per_frame": round(cpu["depth_mm"] / frames * 1000, 2),
        "reference_depth_mm_cpu_ms_per_frame": round(cpu["reference_depth_mm"] / frames * 1000, 2),
        "encode_cpu_ms_per_frame": round(cpu["encode"] / frames * 1000, 2),
        "reference_encode_cpu_ms_per_frame": round(cpu["reference_encode"] / frames * 1000, 2),
    }


def format_result(r: dict) -> str:
    return "\n".join(
        [
            f"{r['scenes']} scene(s), {r['frames']} frames; identical to the reference renderer: "
            f"{r['identical_frames']}/{r['frames']} frames",
            f"  per scene: {r['cpu_s_per_scene']:.2f} CPU-s (reference {r['reference_cpu_s_per_scene']:.2f}, "
            f"x{r['ratio']:.2f}); scene generation {r['generate_cpu_s_per_scene']:.2f} CPU-s",
            f"  per frame (CPU-ms): render {r['render_cpu_ms_per_frame']:.1f} (reference "
            f"{r['reference_render_cpu_ms_per_frame']:.1f}), of which ray cast {r['cast_cpu_ms_per_frame']:.1f}; "
            f"shading {r['shade_cpu_ms_per_frame']:.1f} (reference {r['reference_shade_cpu_ms_per_frame']:.1f}); "
            f"depth mm {r['depth_mm_cpu_ms_per_frame']:.2f} (reference {r['reference_depth_mm_cpu_ms_per_frame']:.2f}); "
            f"JPEG + depth PNG {r['encode_cpu_ms_per_frame']:.1f} (reference {r['reference_encode_cpu_ms_per_frame']:.1f})",
        ]
    )
