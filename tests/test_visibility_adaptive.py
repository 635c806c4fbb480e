"""The coarse-to-fine visibility cast against the full-resolution one: same rays, same decisions."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from pipeline.config import Config
from pipeline.errors import ConfigError
from pipeline.frames.budgets import sample_frames
from pipeline.geometry.raycast import CameraRays, MeshRaycaster
from pipeline.visibility.cast import TriangleObjects, compute_visibility, object_visibility
from pipeline.visibility.footprints import FrameFootprints, ObjectBoxes
from tests.test_visibility import K640, assemble, box, frames_table, look_at

DECISION_COLUMNS = ["budget", "object_id", "best_frame", "max_fraction", "max_pixels", "frames_visible",
                    "first_frame", "first_timestamp", "visible", "rule"]


def config_for(cast: str) -> Config:
    config = Config()
    return dataclasses.replace(config, visibility=dataclasses.replace(config.visibility, cast=cast))


def test_rays_at_is_bit_identical_to_the_full_grid():
    rng = np.random.default_rng(0)
    cam = CameraRays(K640, 640, 480)
    for _ in range(5):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = q, rng.normal(size=3) * 5
        full = cam.rays(pose).copy()
        pixels = rng.choice(640 * 480, 3000, replace=False)
        assert np.array_equal(cam.rays_at(pose, pixels).view(np.uint32), full[pixels].view(np.uint32))


def scene_mesh():
    rng = np.random.default_rng(5)
    parts = [(box((-6, -6, -0.1), (6, 6, 0)), 0), (box((-6, -6, 3), (6, 6, 3.1)), 1)]
    for oid in range(2, 16):
        c = rng.uniform(-4, 4, 2)
        s = rng.uniform(0.1, 1.2, 3)
        parts.append((box((c[0], c[1], 0), (c[0] + s[0], c[1] + s[1], s[2])), oid))
    parts.append((box((0.3, -0.2, 0.0), (0.32, -0.18, 2.0)), 16))  # a thin pole, two pixels wide at 4 m
    parts.append((box((5, -6, 0), (5.1, 6, 3)), -1))  # unannotated wall
    return assemble(parts)


def test_footprints_hold_every_pixel_of_their_object():
    mesh = scene_mesh()
    rc = MeshRaycaster(mesh.vertices, mesh.triangles)
    lookup = TriangleObjects(mesh.triangle_object_ids, len(mesh.triangles))
    boxes = ObjectBoxes(mesh.vertices, mesh.triangles, lookup.codes, lookup.background, cell=0.5)
    cam = CameraRays(K640, 640, 480)
    # Outward looks, and one from inside object 2's box bounds (boxes crossing the camera plane).
    poses = [look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.6)) for a in np.linspace(0, 6, 9)]
    lo, hi = mesh.vertices[mesh.triangles[mesh.triangle_object_ids == 2].ravel()].min(0), mesh.vertices[
        mesh.triangles[mesh.triangle_object_ids == 2].ravel()].max(0)
    poses.append(look_at(((lo + hi) / 2) + [0, 0, 0.3], (lo + hi) / 2 + [3, 1, 0]))
    for pose in poses:
        codes = lookup.codes[rc.cast_triangle_ids(cam.rays(pose))].reshape(480, 640)
        fp = FrameFootprints(boxes, cam, pose)
        for code in range(lookup.background):
            wanted = np.zeros(lookup.background, dtype=bool)
            wanted[code] = True
            found = fp.pixels(wanted)
            ys, xs = np.nonzero(codes == code)
            if found is None:
                assert ys.size == 0
                continue
            (v0, v1, u0, u1), mask = found
            mask_full = np.zeros((480, 640), dtype=bool)
            mask_full[v0 : v1 + 1, u0 : u1 + 1] = mask
            assert mask_full[ys, xs].all()


def test_bounds_hold_the_full_cast_count_before_and_after_each_resolution():
    """lower <= the full cast's count <= upper for every object, whatever has been cast; closing makes them equal."""
    from pipeline.visibility.adaptive import CLOSE, OTHERS, OWN, BlockGrid, FrameCast

    mesh = scene_mesh()
    rc = MeshRaycaster(mesh.vertices, mesh.triangles)
    lookup = TriangleObjects(mesh.triangle_object_ids, len(mesh.triangles))
    n = lookup.background
    boxes = ObjectBoxes(mesh.vertices, mesh.triangles, lookup.codes, n, cell=0.5)
    cam = CameraRays(K640, 640, 480)
    grid = BlockGrid(640, 480, 8)
    for a in np.linspace(0, 6, 5):
        pose = look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.6))
        truth = np.bincount(lookup.codes[rc.cast_triangle_ids(cam.rays(pose))], minlength=n + 1)[:n]
        fc = FrameCast(grid, cam, pose, rc, lookup.codes, n)
        steps = [(np.arange(n) % 3 == 0, OTHERS), (np.arange(n) % 3 == 1, OWN), (np.arange(n) % 2 == 0, CLOSE)]
        for wanted, mode in [(np.zeros(n, dtype=bool), CLOSE)] + steps:
            fc.resolve(wanted, boxes, mode)
            lower, upper = fc.bounds(boxes)
            assert (lower <= truth).all() and (truth <= upper).all()
        assert (lower[wanted] == truth[wanted]).all() and (upper[wanted] == truth[wanted]).all()
        assert fc.rays < cam.count


def test_reviewer_overrides_decide_as_the_full_cast():
    """An override can switch off the first frame that meets the rule: the adaptive cast settles every frame of it."""
    mesh = scene_mesh()
    poses = [look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.8)) for a in np.linspace(0, 6.2, 24)]
    frames = frames_table(poses)
    key = "synthetic/synth0000_00"
    config = Config()
    samples = sample_frames(frames, config)
    full = compute_visibility(key, frames, mesh, config_for("full"))
    plain = object_visibility(key, full, samples, config=config)
    first = plain.filter(pl.col("visible") & (pl.col("budget") == "all")).head(3)
    overrides = pl.DataFrame(
        {"key": [key] * first.height, "object_id": first["object_id"], "frame_index": first["first_frame"],
         "visible": [False] * first.height}
    )
    adaptive = compute_visibility(key, frames, mesh, config_for("adaptive"), overrides=overrides)
    a = object_visibility(key, full, samples, overrides=overrides, config=config)
    b = object_visibility(key, adaptive, samples, overrides=overrides, config=config)
    assert a.select(DECISION_COLUMNS).equals(b.select(DECISION_COLUMNS))
    assert not a.equals(plain)


def test_adaptive_decisions_and_exact_rows_equal_the_full_cast():
    mesh = scene_mesh()
    poses = [look_at((0, 0, 1.5), (np.cos(a) * 3, np.sin(a) * 3, 0.8)) for a in np.linspace(0, 6.2, 40)]
    frames = frames_table(poses)
    full = compute_visibility("synthetic/synth0000_00", frames, mesh, config_for("full"))
    adaptive = compute_visibility("synthetic/synth0000_00", frames, mesh, config_for("adaptive"))
    assert full["pixels_exact"].all() and not adaptive["pixels_exact"].all()
    key_cols = ["frame_index", "object_id"]
    assert adaptive.select(key_cols).equals(full.select(key_cols))  # every pixel seen or proven unseen
    exact = adaptive.filter(pl.col("pixels_exact")).drop("pixels_exact")
    assert exact.equals(full.join(exact.select(key_cols), on=key_cols, how="semi").drop("pixels_exact"))
    config = Config()
    samples = sample_frames(frames, config)
    a = object_visibility("synthetic/synth0000_00", full, samples, config=config)
    b = object_visibility("synthetic/synth0000_00", adaptive, samples, config=config)
    assert a.select(DECISION_COLUMNS).equals(b.select(DECISION_COLUMNS))
    assert a["visible"].any() and (~a["visible"]).any()


def test_adaptive_on_generated_scenes_matches_full_decisions():
    from pipeline.scene.tables import scene_tables
    from pipeline.synth.scene import generate_scene

    config = Config()
    for index in range(2):
        parsed = generate_scene(seed=3, scene_index=index, frames=16).to_parsed_scan()
        tables = scene_tables(parsed, config)
        frames, objects = tables["frames"], tables["objects"]
        full = compute_visibility(parsed.key, frames, parsed.mesh, config_for("full"))
        adaptive = compute_visibility(parsed.key, frames, parsed.mesh, config_for("adaptive"), objects=objects)
        samples = sample_frames(frames, config)
        a = object_visibility(parsed.key, full, samples, objects, config=config)
        b = object_visibility(parsed.key, adaptive, samples, objects, config=config)
        assert a.equals(b)


def test_visibility_config_is_checked():
    with pytest.raises(ConfigError):
        dataclasses.replace(Config().visibility, cast="sparse")
    with pytest.raises(ConfigError):
        dataclasses.replace(Config().visibility, coarse_step=6)


def questions(key, tables, object_visibility, visibility, frames, samples, config):
    """Every per-scan question of the ReVSI and VSI-Bench profiles, as the qa_candidates asset makes them."""
    from pipeline.frames.dummy_videos import plan_dummy_videos
    from pipeline.qa import generate_candidates
    from pipeline.qa.dummy import dummy_object_sets
    from pipeline.frames.budgets import frame_budgets

    BUDGETS = frame_budgets(Config())

    dummy = plan_dummy_videos(key, dummy_object_sets(tables["objects"], object_visibility, key), visibility, frames)
    parts = [
        generate_candidates(tables["objects"], tables["rooms"], object_visibility, samples, dummy, key=key, budget=b,
                            profile=p, config=config)
        for p in ("revsi", "vsibench")
        for b in BUDGETS
    ]
    return pl.concat(parts), dummy


@pytest.mark.slow
def test_twenty_generated_scenes_and_the_scannet_fixture_decide_as_the_full_cast(fixtures_dir):
    """SPEC §3 decisions, best frames, dummy-video frames and every question equal between the two casts."""
    from pipeline.scene.readers import read_scan
    from pipeline.scene.tables import scene_tables
    from pipeline.synth.scene import generate_scene
    from tests.test_visibility_scenes import scannet_walk

    config = Config()
    counted = {"scans": 0, "decisions": 0, "best_frames": 0, "questions": 0, "dummy_videos": 0, "exact_rows": 0,
               "rows": 0}
    scans = [("synth", i) for i in range(20)] + [("scannet", 0)]
    for kind, index in scans:
        if kind == "synth":
            parsed = generate_scene(seed=11, scene_index=index, frames=60).to_parsed_scan()
            tables = scene_tables(parsed, config)
            frames = tables["frames"]
        else:
            scan_config = Config(label_map=str(fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv"))
            parsed = read_scan(fixtures_dir / "scannet" / "scene0000_00", scan_config)
            tables = scene_tables(parsed, scan_config)
            v = parsed.mesh.vertices
            frames = scannet_walk(parsed.key, (v.min(axis=0) + v.max(axis=0)) / 2, frames=120)
        key, objects = parsed.key, tables["objects"]
        samples = sample_frames(frames, config)
        full = compute_visibility(key, frames, parsed.mesh, config_for("full"))
        adaptive = compute_visibility(key, frames, parsed.mesh, config_for("adaptive"), objects=objects)
        a = object_visibility(key, full, samples, objects, config=config)
        b = object_visibility(key, adaptive, samples, objects, config=config)
        assert a.equals(b), key
        exact = adaptive.filter(pl.col("pixels_exact")).drop("pixels_exact")
        on = ["frame_index", "object_id"]
        assert exact.equals(full.join(exact.select(on), on=on, how="semi").drop("pixels_exact")), key
        if kind == "synth":
            qa_full, dummy_full = questions(key, tables, a, full, frames, samples, config)
            qa_adaptive, dummy_adaptive = questions(key, tables, b, adaptive, frames, samples, config)
            assert qa_full.equals(qa_adaptive), key
            assert dummy_full.equals(dummy_adaptive), key
            counted["questions"] += qa_full.height
            counted["dummy_videos"] += dummy_full.height
        counted["scans"] += 1
        counted["decisions"] += a.height
        counted["best_frames"] += int(a["best_frame"].is_not_null().sum())
        counted["exact_rows"] += exact.height
        counted["rows"] += adaptive.height
    print(f"\ncompared {counted}")
