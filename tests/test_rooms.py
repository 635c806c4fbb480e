"""Derived room polygons: floor band, seeded subsample, alpha shape; scene and main parts."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from shapely.geometry import Polygon, box

from pipeline.geometry.rooms import alpha_shape, derive_rooms, derive_scene_polygon, main_part, rooms_from_polygon


def _floor_points(polygon, spacing=0.1, z=0.0):
    x0, y0, x1, y1 = polygon.bounds
    gx, gy = np.meshgrid(np.arange(x0, x1 + 1e-9, spacing), np.arange(y0, y1 + 1e-9, spacing))
    xy = np.column_stack([gx.ravel(), gy.ravel()])
    inside = shapely.contains_xy(polygon.buffer(1e-9), xy[:, 0], xy[:, 1])
    xy = xy[inside]
    return np.column_stack([xy, np.full(len(xy), z)])


def _walls(polygon, height=2.5, spacing=0.1):
    ring = polygon.exterior
    d = np.arange(0, ring.length, spacing)
    xy = np.array([ring.interpolate(t).coords[0] for t in d])
    zs = np.arange(0, height, 0.2)
    return np.concatenate([np.column_stack([xy, np.full(len(xy), z)]) for z in zs])


L_SHAPE = Polygon([(0, 0), (6, 0), (6, 2), (2, 2), (2, 5), (0, 5)])  # 18 m^2


def test_l_shaped_room_area():
    pts = np.concatenate([_floor_points(L_SHAPE), _walls(L_SHAPE)])
    polygon = derive_scene_polygon(pts, seed=0)
    assert polygon.area == pytest.approx(L_SHAPE.area, rel=0.05)
    assert polygon.symmetric_difference(L_SHAPE).area < 0.1 * L_SHAPE.area  # concave, not the convex hull


def test_furniture_holes_are_filled():
    room = box(0, 0, 5, 4)
    floor = _floor_points(room)
    bed = box(1, 1, 3, 3)
    hidden = shapely.contains_xy(bed, floor[:, 0], floor[:, 1])
    pts = np.concatenate([floor[~hidden], _walls(room)])
    polygon = derive_scene_polygon(pts, seed=0)
    assert polygon.geom_type == "Polygon" and len(polygon.interiors) == 0
    assert polygon.area == pytest.approx(20.0, rel=0.05)


def test_ceiling_and_furniture_tops_are_ignored():
    room = box(0, 0, 3, 3)
    ceiling_only = _floor_points(box(-2, -2, 6, 6), z=2.6)  # wider than the floor, above the band
    pts = np.concatenate([_floor_points(room), ceiling_only])
    assert derive_scene_polygon(pts, seed=0).area == pytest.approx(9.0, rel=0.05)


def test_two_rooms_give_scene_and_main():
    big, small = box(0, 0, 5, 4), box(8, 0, 10, 2)
    pts = np.concatenate([_floor_points(big), _floor_points(small)])
    rooms = derive_rooms(pts, seed=0)
    assert [(r.kind, r.source) for r in rooms] == [("scene", "derived"), ("main", "derived")]
    assert rooms[0].polygon.geom_type == "MultiPolygon"
    assert rooms[0].polygon.area == pytest.approx(24.0, rel=0.05)
    assert rooms[1].polygon.area == pytest.approx(20.0, rel=0.05)


def test_seeded_subsample_is_reproducible():
    pts = np.concatenate([_floor_points(L_SHAPE, spacing=0.03), _walls(L_SHAPE)])
    a = derive_scene_polygon(pts, seed=3, max_points=2000)
    b = derive_scene_polygon(pts, seed=3, max_points=2000)
    assert shapely.to_wkb(a) == shapely.to_wkb(b)
    assert a.area == pytest.approx(L_SHAPE.area, rel=0.1)


def test_degenerate_inputs_give_no_room():
    assert derive_rooms(np.zeros((2, 3)), seed=0) == []
    assert alpha_shape(np.array([[0.0, 0], [1, 1], [2, 2]]), 1.0).is_empty
    assert main_part(Polygon()).is_empty


def test_annotated_polygon_keeps_its_source():
    rooms = rooms_from_polygon(shapely.MultiPolygon([box(0, 0, 2, 2), box(3, 0, 4, 1)]), source="annotated")
    assert [r.kind for r in rooms] == ["scene", "main"] and {r.source for r in rooms} == {"annotated"}
    assert rooms[1].polygon.area == pytest.approx(4.0)


def test_triangles_unioned_as_one_multipolygon_equal_the_union_of_separate_polygons():
    """The alpha shape's triangles go to GEOS as one MultiPolygon: the same union, bit for bit."""
    from scipy.spatial import Delaunay

    from pipeline.geometry.rooms import _triangle_multipolygon

    gen = np.random.default_rng(4)
    for i in range(12):
        pts = np.unique(np.round(gen.uniform(0, 6, (int(gen.integers(50, 4000)), 2)), 3), axis=0)
        if i % 3 == 0:  # a hole in the middle and a separate island: multipart shapes with interiors
            far = np.linalg.norm(pts - 3.0, axis=1)
            pts = pts[(far > 1.0) & ((far < 2.2) | (far > 2.6))]
        corners = pts[Delaunay(pts).simplices]
        radius = np.linalg.norm(corners[:, 1] - corners[:, 0], axis=1)
        corners = corners[radius <= np.quantile(radius, gen.uniform(0.5, 1.0))]
        separate = shapely.coverage_union_all(shapely.polygons(corners))
        assert shapely.coverage_union_all([_triangle_multipolygon(corners)]).wkb == separate.wkb, i


def _flat(doorway=(3.0, 1.0, 3.1, 1.9)):
    """Two rooms (3 x 4 and 2 x 3 m) sharing a 0.1 m partition with a doorway up to 2.1 m: floor, walls to 2.6 m."""
    left, right, partition = box(0, 0, 3, 4), box(3.1, 0, 5.1, 3), box(3.0, 0, 3.1, 3)
    floor = np.concatenate([_floor_points(left), _floor_points(right), _floor_points(partition, spacing=0.05)])
    walls = [_walls(left, height=2.6), _walls(right, height=2.6)]
    x, y = np.meshgrid(np.arange(3.0, 3.1001, 0.05), np.arange(0, 3.0001, 0.05))
    for z in np.arange(0, 2.6, 0.2):
        lintel = (y.ravel() < doorway[1]) | (y.ravel() > doorway[3]) | (z > 2.1)
        walls.append(np.column_stack([x.ravel()[lintel], y.ravel()[lintel], np.full(lintel.sum(), z)]))
    return np.concatenate([floor, *walls])


def test_rooms_joined_by_a_doorway_give_a_main_room_smaller_than_the_scene():
    """One connected footprint, two rooms: the main room is the one the camera is in most (SPEC §4)."""
    points = _flat()
    scene, main = derive_rooms(points, seed=0)
    assert scene.polygon.area == pytest.approx(12.0 + 6.0 + 0.3, rel=0.05)
    assert main.polygon.area == pytest.approx(12.0, rel=0.08)  # no camera: the largest room
    in_small_room = np.array([[4.0, 1.5], [4.2, 2.0], [1.5, 2.0]])
    scene_again, main_small = derive_rooms(points, seed=0, camera_xy=in_small_room)
    assert scene_again.polygon.equals(scene.polygon)
    assert main_small.polygon.area == pytest.approx(6.0, rel=0.12)


def test_a_single_room_keeps_main_equal_to_scene():
    room = box(0, 0, 5, 4)
    points = np.concatenate([_floor_points(room), _walls(room, height=2.6)])
    scene, main = derive_rooms(points, seed=0, camera_xy=np.array([[2.0, 2.0]]))
    assert main.polygon.equals(scene.polygon)
