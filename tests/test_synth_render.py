"""The synthetic renderer gives the same frames, bit for bit, as its first version (kept in pipeline.bench.synth)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from pipeline.bench.synth import ReferenceRenderer, same_frame
from scan2qa import main as cli_main
from pipeline.synth.render import FrameRenderer
from pipeline.synth.scene import generate_scene


@pytest.fixture(scope="module")
def renderers():
    scene = generate_scene(5, 1, 3)
    return scene, FrameRenderer(scene), ReferenceRenderer(scene)


def _look_at(eye, target) -> np.ndarray:
    """Camera-to-world pose (OpenCV axes: x right, y down, z forward) at ``eye`` looking at ``target``, z up."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = eye
    return pose


def _assert_same(renderer, reference, pose):
    new, old = renderer.render_pose(pose), reference.render_pose(pose)
    assert same_frame(new, old)
    assert new.color_bgr.flags.c_contiguous and new.color_bgr.shape == old.color_bgr.shape
    assert np.array_equal(new.depth_mm, reference.reference_depth_mm(old))
    assert new.color_jpeg() == old.color_jpeg()
    return new


def test_walk_frames_equal_the_first_renderer(renderers):
    scene, renderer, reference = renderers
    for pose in scene.poses:
        frame = _assert_same(renderer, reference, pose)
        assert (frame.triangle_ids >= 0).all()  # inside a closed room every ray hits


def test_misses_are_black_with_no_object_and_no_depth(renderers):
    """From outside the building looking past its corner some rays hit nothing: they index the zero column."""
    scene, renderer, reference = renderers
    lo, hi = scene.mesh.vertices.min(axis=0), scene.mesh.vertices.max(axis=0)
    eye = [hi[0] + 2.0, hi[1] + 2.0, hi[2] + 1.0]
    frame = _assert_same(renderer, reference, _look_at(eye, [hi[0], hi[1], (lo[2] + hi[2]) / 2]))
    miss = frame.triangle_ids < 0
    assert 0.05 < miss.mean() < 0.95
    assert (frame.color_bgr[miss] == 0).all() and (frame.object_ids[miss] == -1).all()
    assert np.isinf(frame.depth_m[miss]).all() and (frame.depth_mm[miss] == 0).all()
    away = _assert_same(renderer, reference, _look_at(eye, [eye[0] + 1.0, eye[1] + 1.0, eye[2] + 1.0]))
    assert (away.triangle_ids < 0).all()


def test_depth_png_is_lossless_and_smaller_than_opencvs_default(renderers):
    """The depth PNG's encoder settings changed (zlib's default strategy): the same millimetres, fewer bytes."""
    scene, renderer, reference = renderers
    frame = renderer.render(1)
    png = frame.depth_png()
    assert np.array_equal(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED), frame.depth_mm)
    first = reference.reference_depth_png(frame.depth_mm)
    assert np.array_equal(cv2.imdecode(np.frombuffer(first, np.uint8), cv2.IMREAD_UNCHANGED), frame.depth_mm)
    assert len(png) < len(first)


def test_synth_bench_reports_cpu_per_scene_and_frame(capsys):
    assert cli_main(["bench", "synth", "--json", "--frames", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenes"] == 1 and out["frames"] == 2 and out["identical_frames"] == 2
    for field in ("cpu_s_per_scene", "reference_cpu_s_per_scene", "ratio", "cast_cpu_ms_per_frame",
                  "render_cpu_ms_per_frame", "shade_cpu_ms_per_frame", "encode_cpu_ms_per_frame",
                  "reference_encode_cpu_ms_per_frame"):
        assert out[field] > 0, field
