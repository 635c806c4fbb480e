"""Exact oriented-box distance: hand-worked cases, certificates and an iterative reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pipeline.geometry.distance import (
    mesh_distance,
    obb_closest_points,
    obb_distance,
    obb_distance_matrix,
    obb_pair_distances,
)
from pipeline.scene.parsed import OrientedBox


def box(center, extent, rotation=None) -> OrientedBox:
    return OrientedBox(np.asarray(center, float), np.asarray(extent, float),
                       np.eye(3) if rotation is None else np.asarray(rotation, float))


def rot(axis: str, degrees: float) -> np.ndarray:
    return Rotation.from_euler(axis, degrees, degrees=True).as_matrix()


def random_boxes(seed: int, n: int, spread: float = 2.0) -> list[OrientedBox]:
    gen = np.random.default_rng(seed)
    out = []
    for k in range(n):
        kind = k % 3
        if kind == 0:  # arbitrary orientation, some very thin
            r = Rotation.random(random_state=int(gen.integers(1 << 30))).as_matrix()
            extent = gen.uniform(0.01, 2.0, 3)
        elif kind == 1:  # gravity-aligned with yaw (real scans)
            r = rot("z", gen.uniform(0, 360))
            extent = gen.uniform(0.2, 2.0, 3)
        else:  # axis-aligned: many exactly parallel edges
            r = np.eye(3)
            extent = gen.uniform(0.2, 2.0, 3)
        out.append(box(gen.normal(size=3) * spread, extent, r))
    return out


def alternating_projection_distance(a_boxes, b_boxes, iterations: int = 5000) -> np.ndarray:
    """Reference: von Neumann alternating projections between the two solid boxes, run to convergence."""
    ca = np.array([b.center for b in a_boxes]); ha = np.array([b.extent for b in a_boxes]) / 2
    ra = np.array([b.rotation for b in a_boxes])
    cb = np.array([b.center for b in b_boxes]); hb = np.array([b.extent for b in b_boxes]) / 2
    rb = np.array([b.rotation for b in b_boxes])

    def project(x, c, h, r):
        local = np.clip(np.einsum("pji,pj->pi", r, x - c), -h, h)
        return np.einsum("pij,pj->pi", r, local) + c

    q = cb.copy()
    for _ in range(iterations):
        p = project(q, ca, ha, ra)
        q = project(p, cb, hb, rb)
    return np.linalg.norm(p - q, axis=1)


# --- hand-worked cases -------------------------------------------------------------------------------------------


def test_face_gap_along_x():
    assert obb_distance(box([0, 0, 0], [1, 1, 1]), box([3, 0, 0], [2, 1, 1])) == pytest.approx(1.5, abs=1e-12)


def test_corner_to_corner_diagonal():
    a = box([0, 0, 0], [2, 2, 2])
    b = box([3, 4, 5], [2, 2, 2])  # gaps 1, 2, 3 on the three axes
    assert obb_distance(a, b) == pytest.approx(math.sqrt(1 + 4 + 9), abs=1e-12)


def test_crossed_edges_interior_closest_pair():
    # A rotated 45° about x has a top edge along x at z = sqrt(2)/2; B rotated 45° about y has a bottom
    # edge along y at c - sqrt(2)/2: the closest pair is the crossing point of the two edges' interiors.
    a = box([0, 0, 0], [1, 1, 1], rot("x", 45))
    b = box([0, 0, 3.0], [1, 1, 1], rot("y", 45))
    d, p, q = obb_closest_points(a, b)
    assert d == pytest.approx(3.0 - math.sqrt(2.0), abs=1e-12)
    assert obb_distance(a, b) == pytest.approx(d, abs=1e-12)
    np.testing.assert_allclose(p, [0, 0, math.sqrt(0.5)], atol=1e-12)
    np.testing.assert_allclose(q, [0, 0, 3.0 - math.sqrt(0.5)], atol=1e-12)


def test_overlap_containment_and_touching_are_zero():
    a = box([0, 0, 0], [2, 2, 2])
    assert obb_distance(a, box([1.5, 0.5, 0], [2, 2, 2], rot("z", 30))) == 0.0
    assert obb_distance(a, box([0.1, 0, 0], [0.2, 0.2, 0.2], rot("x", 10))) == 0.0  # inside
    assert obb_distance(a, box([2.0, 0, 0], [2, 2, 2])) == pytest.approx(0.0, abs=1e-12)  # touching faces


def test_duplicate_annotation_is_zero_with_a_common_point():
    # Real annotations contain the same tilted box twice; every face coincides to rounding.
    r = Rotation.from_euler("xyz", [3.0, -2.0, 41.0], degrees=True).as_matrix()
    a = box([1.2, -0.4, 0.3], [0.56, 0.56, 0.66], r)
    twin = box(a.center.copy(), a.extent.copy(), r @ np.eye(3))
    d, p, q = obb_closest_points(a, twin)
    assert d == 0.0 and obb_distance(a, twin) == 0.0
    assert a.contains(p[None], 1e-9)[0] and twin.contains(q[None], 1e-9)[0]


def test_piercing_bar_with_no_corner_inside_intersects():
    # A thin bar through the middle of a cube: no corner of either box lies inside the other.
    cube = box([0, 0, 0], [1, 1, 1], rot("z", 20))
    bar = box([0, 0, 0], [5, 0.1, 0.1], rot("y", 30))
    assert not cube.contains(bar.corners()).any() and not bar.contains(cube.corners()).any()
    d, p, q = obb_closest_points(cube, bar)
    assert d == 0.0
    assert cube.contains(p[None], 1e-9)[0] and bar.contains(p[None], 1e-9)[0]
    assert obb_distance_matrix([cube], [bar])[0, 0] == 0.0


def test_vertical_axis_in_any_rotation_column():
    # The same physical box written with its height in rotation column 0, 1 or 2.
    base = rot("z", 25)
    ref = box([0, 0, 0.5], [1.2, 0.6, 1.0], base)
    other = box([3, 1, 0.4], [0.5, 0.5, 0.8], rot("z", -40))
    expected = obb_distance(ref, other)
    for perm in ([2, 0, 1], [1, 2, 0], [0, 2, 1]):
        r = base[:, perm]
        if np.linalg.det(r) < 0:
            r = r * np.array([1, 1, -1])
        permuted = box(ref.center, ref.extent[perm], r)
        np.testing.assert_allclose(np.sort(permuted.corners(), axis=0), np.sort(ref.corners(), axis=0), atol=1e-12)
        assert obb_distance(permuted, other) == pytest.approx(expected, abs=1e-12)


# --- certificates and references on random boxes ----------------------------------------------------------------


def test_closest_points_carry_an_optimality_certificate():
    boxes = random_boxes(1, 400)
    disjoint = 0
    for a, b in zip(boxes[::2], boxes[1::2]):
        d, p, q = obb_closest_points(a, b)
        assert a.contains(p[None], 1e-9)[0] and b.contains(q[None], 1e-9)[0]
        assert np.linalg.norm(p - q) == pytest.approx(d, abs=1e-12)
        if d > 0:
            # The slab between the planes through p and q orthogonal to q - p separates the boxes,
            # so no pair of points is closer than d: d is the exact distance.
            n = (q - p) / d
            gap = (b.corners() @ n).min() - (a.corners() @ n).max()
            assert gap == pytest.approx(d, abs=1e-9)
            disjoint += 1
    assert disjoint > 100


def test_matrix_and_pairs_agree_with_unpruned_closest_points():
    boxes = random_boxes(2, 40, spread=3.0)
    matrix = obb_distance_matrix(boxes, boxes)
    assert np.all(np.diag(matrix) == 0.0)
    np.testing.assert_array_equal(matrix, matrix.T)
    reference = np.array([[obb_closest_points(a, b)[0] for b in boxes] for a in boxes])
    np.testing.assert_allclose(matrix, reference, atol=1e-9)
    half = boxes[:20]
    np.testing.assert_allclose(obb_distance_matrix(half, boxes[20:]), reference[:20, 20:], atol=1e-9)
    np.testing.assert_allclose(obb_pair_distances(half, boxes[20:]), np.diag(reference[:20, 20:]), atol=1e-9)


def test_agrees_with_alternating_projections_within_a_micrometre():
    boxes = random_boxes(3, 300)
    a_boxes, b_boxes = boxes[::2], boxes[1::2]
    exact = obb_pair_distances(a_boxes, b_boxes)
    reference = alternating_projection_distance(a_boxes, b_boxes)
    assert np.sum(exact > 0) > 50
    np.testing.assert_allclose(exact, reference, atol=1e-6)
    # The reference is a pair of points, so it can never be below the exact minimum.
    assert np.all(reference >= exact - 1e-9)


def test_symmetric_and_invariant_under_rigid_motion():
    boxes = random_boxes(4, 40)
    motion = rot("xyz", [17, -33, 71])
    shift = np.array([5.0, -2.0, 0.3])
    moved = [box(motion @ b.center + shift, b.extent, motion @ b.rotation) for b in boxes]
    for a, b, ma, mb in zip(boxes[::2], boxes[1::2], moved[::2], moved[1::2]):
        d = obb_distance(a, b)
        assert obb_distance(b, a) == pytest.approx(d, abs=1e-9)
        assert obb_distance(ma, mb) == pytest.approx(d, abs=1e-9)


def test_dense_surface_samples_never_beat_the_exact_distance():
    from pipeline.bench.distance import sampled_distance

    boxes = random_boxes(6, 8, spread=3.0)
    for a, b in zip(boxes[::2], boxes[1::2]):
        exact = obb_distance(a, b)
        sampled = sampled_distance(a, b, spacing_m=0.02)
        assert exact - 1e-9 <= sampled <= exact + 0.02 * math.sqrt(2) + 1e-9


def test_empty_inputs():
    assert obb_distance_matrix([], []).shape == (0, 0)
    assert obb_distance_matrix([box([0, 0, 0], [1, 1, 1])], []).shape == (1, 0)


# --- mesh distance -------------------------------------------------------------------------------------------------


def test_mesh_distance_is_the_closest_vertex_pair():
    a = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    b = np.array([[3, 0, 0], [1, 2, 0], [5, 5, 5], [1, 0, 0.5]], float)
    assert mesh_distance(a, b) == pytest.approx(0.5)
    assert mesh_distance(b, a) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mesh_distance(a, np.zeros((0, 3)))


# --- bench target ------------------------------------------------------------------------------------------------


def test_distance_bench_reports_rates_and_agreement():
    import argparse

    from pipeline.bench.distance import format_result, furniture_pairs, run_distance_bench

    pairs = furniture_pairs(5, seed=3)
    assert all(0.5 <= obb_distance(a, b) <= 5.0 for a, b in pairs)
    result = run_distance_bench(argparse.Namespace(pairs=3, spacing=0.05, seed=1))
    for key in ("exact_pairs_per_s", "sampled_pairs_per_s", "speedup", "max_abs_diff_m", "batched_max_abs_diff_m"):
        assert key in result
    assert result["pairs"] == 3
    assert result["max_abs_diff_m"] <= 0.05 * math.sqrt(2)
    assert result["sampled_below_exact"] == 0
    assert result["batched_max_abs_diff_m"] < 1e-9
    assert "speed-up" in format_result(result)


def test_flat_and_degenerate_boxes():
    # Panels (one zero side), sticks (two) and points (three) are still convex sets with exact distances.
    gen = np.random.default_rng(8)
    boxes = random_boxes(9, 120)
    flat = []
    for k, b in enumerate(boxes):
        extent = b.extent.copy()
        extent[gen.permutation(3)[: 1 + k % 3]] = 0.0
        flat.append(box(b.center, extent, b.rotation))
    a_boxes, b_boxes = flat[::2], boxes[1::2]
    exact = obb_pair_distances(a_boxes, b_boxes)
    np.testing.assert_allclose(exact, alternating_projection_distance(a_boxes, b_boxes), atol=1e-6)
    for a, b, d in zip(a_boxes, b_boxes, exact):
        assert obb_closest_points(a, b)[0] == pytest.approx(d, abs=1e-9)


def test_mesh_distance_matches_brute_force():
    from scipy.spatial.distance import cdist

    gen = np.random.default_rng(11)
    for k in range(20):
        a = gen.normal(size=(int(gen.integers(1, 300)), 3)) * gen.uniform(0.1, 1.0)
        b = gen.normal(size=(int(gen.integers(1, 300)), 3)) * gen.uniform(0.1, 1.0) + gen.normal(size=3) * k / 5
        assert mesh_distance(a, b) == pytest.approx(cdist(a, b).min(), abs=1e-12)


# --- real annotated boxes ------------------------------------------------------------------------------------------


def test_real_vsibench_boxes_certified(fixtures_dir):
    """Every VSI-Bench scene's boxes (tilted, vertical axis in any column): matrix = certified closest points."""
    import json

    from pipeline.geometry.obb import box_from_normalized_axes

    pairs_checked = 0
    for name in ("scannet", "scannetpp", "arkitscenes"):
        meta = json.loads((fixtures_dir / "vsibench" / f"{name}_meta_info_val.json").read_text())
        for scene_id in sorted(meta)[:12]:
            boxes = [
                box_from_normalized_axes(o["centroid"], o["axesLengths"], o["normalizedAxes"])
                for category in sorted(meta[scene_id]["object_bbox"])
                for o in meta[scene_id]["object_bbox"][category]
            ]
            matrix = obb_distance_matrix(boxes, boxes)
            for i in range(0, len(boxes), 3):
                for j in range(i + 1, len(boxes), 2):
                    d, p, q = obb_closest_points(boxes[i], boxes[j])
                    assert matrix[i, j] == pytest.approx(d, abs=1e-9)
                    if d > 0:
                        n = (q - p) / d
                        gap = (boxes[j].corners() @ n).min() - (boxes[i].corners() @ n).max()
                        assert gap == pytest.approx(d, abs=1e-9)
                    pairs_checked += 1
    assert pairs_checked > 200
