"""Gravity-aligned OBBs (ReVSI Algorithm 1) and box convention conversions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.geometry.obb import (
    box_from_columns,
    box_from_normalized_axes,
    gravity_aligned_obb,
    is_rotation_about_z,
    normalized_axes_of,
    rotation_about_z,
)


def _box_points(center, extent, angle, n=500, seed=0):
    gen = np.random.default_rng(seed)
    local = (gen.random((n, 3)) - 0.5) * extent
    corners = np.array([[sx, sy, sz] for sx in (-0.5, 0.5) for sy in (-0.5, 0.5) for sz in (-0.5, 0.5)]) * extent
    local = np.concatenate([local, corners])
    return center + local @ rotation_about_z(angle).T


def test_recovers_a_rotated_box():
    pts = _box_points(np.array([1.0, 2.0, 0.5]), np.array([2.0, 0.8, 1.0]), angle=0.6)
    box = gravity_aligned_obb(pts)
    np.testing.assert_allclose(box.center, [1.0, 2.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(box.extent, [2.0, 0.8, 1.0], atol=1e-9)
    assert abs(abs(box.rotation[:, 0] @ [np.cos(0.6), np.sin(0.6), 0]) - 1) < 1e-9
    assert is_rotation_about_z(box.rotation)
    assert box.vertical_axis == 2 and box.height == pytest.approx(1.0)
    np.testing.assert_allclose(box.rotation.T @ box.rotation, np.eye(3), atol=1e-12)
    assert np.linalg.det(box.rotation) == pytest.approx(1.0)
    assert box.contains(pts, tol=1e-9).all()


def test_tilted_noise_does_not_tilt_the_box():
    # A thin slanted slab: a free minimal OBB would tilt, ours stays upright.
    gen = np.random.default_rng(1)
    xy = gen.random((400, 2)) * [1.0, 0.5]
    pts = np.column_stack([xy, 0.3 * xy[:, 0] + gen.normal(0, 0.005, 400)])
    box = gravity_aligned_obb(pts)
    np.testing.assert_array_equal(box.rotation[:, 2], [0, 0, 1])
    assert box.contains(pts, tol=1e-9).all()


def test_degenerate_footprints():
    point = gravity_aligned_obb(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 4.0]]))
    np.testing.assert_allclose(point.extent, [0, 0, 1])
    np.testing.assert_allclose(point.center, [1, 2, 3.5])
    line = gravity_aligned_obb(np.array([[0.0, 0, 0], [1, 1, 0], [2, 2, 1]]))
    np.testing.assert_allclose(line.extent, [np.hypot(2, 2), 0, 1], atol=1e-12)
    assert is_rotation_about_z(line.rotation)
    with pytest.raises(ValueError):
        gravity_aligned_obb(np.zeros((0, 3)))
    with pytest.raises(ValueError):
        gravity_aligned_obb(np.array([[0.0, np.nan, 0]]))


def test_same_points_same_box_in_any_order():
    pts = _box_points(np.zeros(3), np.array([1.0, 3.0, 2.0]), angle=2.5)
    a = gravity_aligned_obb(pts)
    b = gravity_aligned_obb(pts[::-1].copy())
    np.testing.assert_allclose(a.rotation, b.rotation, atol=1e-12)
    np.testing.assert_allclose(a.extent, b.extent, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    angle=st.floats(-np.pi, np.pi),
    extent=st.tuples(*[st.floats(0.01, 5.0)] * 3),
    seed=st.integers(0, 1000),
)
def test_box_contains_all_points(angle, extent, seed):
    pts = _box_points(np.array([0.3, -1.0, 2.0]), np.array(extent), angle, n=60, seed=seed)
    box = gravity_aligned_obb(pts)
    assert box.contains(pts, tol=1e-7).all()
    assert is_rotation_about_z(box.rotation)
    assert box.extent[0] >= box.extent[1]
    # Never larger than the generating box (minimum area).
    assert box.extent[0] * box.extent[1] <= extent[0] * extent[1] + 1e-7


def test_normalized_axes_are_rows():
    # VSI-Bench/ARKit style: one box axis per row.
    axes = rotation_about_z(0.4).T.reshape(9)
    box = box_from_normalized_axes([1, 2, 3], [2.0, 1.0, 0.5], axes)
    np.testing.assert_allclose(box.rotation, rotation_about_z(0.4))
    np.testing.assert_allclose(normalized_axes_of(box), axes)
    same = box_from_columns([1, 2, 3], [2.0, 1.0, 0.5], rotation_about_z(0.4))
    np.testing.assert_allclose(same.corners(), box.corners())


def test_vertical_axis_may_be_any_column():
    # ReVSI boxes put the vertical axis in column 0, 1 or 2.
    rotation = np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]])
    box = box_from_columns([0, 0, 0], [0.4, 2.0, 1.0], rotation)
    assert box.vertical_axis == 0 and box.height == pytest.approx(0.4)
    assert is_rotation_about_z(box.rotation)
    tilted = np.array([[1.0, 0, 0], [0, np.cos(0.1), -np.sin(0.1)], [0, np.sin(0.1), np.cos(0.1)]])
    assert not is_rotation_about_z(tilted)


def test_vsibench_boxes_read_as_rows(fixtures_dir):
    """VSI-Bench records each box's axis-aligned min/max: only the row reading of normalizedAxes reproduces them."""
    import json

    meta = json.loads((fixtures_dir / "vsibench" / "scannet_meta_info_val.json").read_text())
    checked = 0
    for scene in sorted(meta)[:10]:
        for boxes in meta[scene]["object_bbox"].values():
            for b in boxes:
                box = box_from_normalized_axes(b["centroid"], b["axesLengths"], b["normalizedAxes"])
                corners = box.corners()
                np.testing.assert_allclose(corners.min(axis=0), b["min"], atol=1e-9)
                np.testing.assert_allclose(corners.max(axis=0), b["max"], atol=1e-9)
                checked += 1
    assert checked > 50


def test_footprint_hull_from_one_coordinate_sequence_is_the_multipoint_hull_to_the_bit():
    """GEOS gets the footprint as one LineString: the hull and rectangle equal those of ``MultiPoint(xy)``."""
    from shapely.geometry import MultiPoint

    from pipeline.geometry.obb import _footprint_rectangle, footprint_hull

    gen = np.random.default_rng(11)
    for i in range(200):
        k = int(gen.integers(1, 1500)) if i % 10 else int(gen.integers(1, 5))  # also 1-4 points
        kind = i % 5
        if kind == 0:
            xy = gen.normal(size=(k, 2)) * gen.uniform(0.01, 3, 2)
        elif kind == 1:  # a rotated grid: many collinear points along every hull edge
            s = int(np.sqrt(k)) + 2
            u, v = np.meshgrid(np.linspace(0, gen.uniform(0.1, 3), s), np.linspace(0, gen.uniform(0.1, 3), s))
            a = gen.uniform(0, np.pi)
            xy = np.c_[u.ravel(), v.ravel()] @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]).T
        elif kind == 2:
            xy = np.repeat(gen.uniform(-1, 1, (max(k // 50, 2), 2)), 50, axis=0)  # duplicated points
        elif kind == 3:
            t = gen.uniform(0, 1, k)
            xy = np.c_[t, 2 * t + 1]  # collinear: the hull is a line
        else:
            xy = np.round(gen.uniform(-2, 2, (k, 2)), 2)  # quantised
        hull = footprint_hull(xy)
        assert hull.wkb == MultiPoint(xy).convex_hull.wkb, i  # same type and coordinates, bit for bit
        centre, axis, long_side, short_side = _footprint_rectangle(xy)
        assert np.isfinite(centre).all() and long_side >= short_side >= 0.0
