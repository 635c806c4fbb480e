"""Route planning: hand-worked routes in a rectangular and an L-shaped room, blocked legs, turn margins."""

from __future__ import annotations

import json

import numpy as np
import pytest
from shapely.geometry import Polygon, box as rect

from pipeline.geometry.route import classify_turn, find_routes, plan_route, signed_turn
from pipeline.scene.parsed import OrientedBox

ROOM = rect(0, 0, 10, 8)
L_ROOM = Polygon([(0, 0), (10, 0), (10, 4), (4, 4), (4, 10), (0, 10)])


def obj(x: float, y: float, sx: float = 0.5, sy: float = 0.5, h: float = 0.8, z0: float = 0.0) -> OrientedBox:
    return OrientedBox(np.array([x, y, z0 + h / 2]), np.array([sx, sy, h]), np.eye(3))


# --- turn classification -----------------------------------------------------------------------------------------


def test_signed_turn_is_counter_clockwise_positive_in_half_open_range():
    assert signed_turn(90.0, 0.0) == pytest.approx(-90.0)  # north to east: right
    assert signed_turn(0.0, 90.0) == pytest.approx(90.0)
    assert signed_turn(170.0, -170.0) == pytest.approx(20.0)
    assert signed_turn(0.0, 180.0) == pytest.approx(180.0)
    assert signed_turn(0.0, -180.0) == pytest.approx(180.0)


@pytest.mark.parametrize(
    ("delta", "label"),
    [(0.0, None), (40.0, None), (50.0, None), (64.9, None), (65.0, "left"), (90.0, "left"), (115.0, "left"),
     (-90.0, "right"), (-115.0, "right"), (116.0, None), (130.0, None), (150.0, None), (-154.9, None),
     (155.0, "back"), (-170.0, "back"), (180.0, "back")],
)
def test_turn_classes_with_20_degree_margin(delta, label):
    assert classify_turn(delta, 20.0) == label


# --- plan_route: hand-worked routes ------------------------------------------------------------------------------


def test_square_route_turns_right_twice():
    a, b, x, y, g = obj(2, 2), obj(2, 7), obj(2, 5), obj(7, 5), obj(7, 2)
    route = plan_route(a, b, [x, y, g], [], ROOM, object_ids=[10, 11, 12, 13, 14])
    assert route is not None
    assert route.turns == ("right", "right")
    assert route.turn_phrases == ("turn right", "turn right")
    assert route.turn_angles_deg == pytest.approx((-90.0, -90.0))
    assert route.initial_angle_deg == pytest.approx(0.0)
    assert (route.start_id, route.facing_id, route.waypoint_ids, route.goal_id) == (10, 11, (12, 13), 14)
    assert route.used_obj_ids == (10, 11, 12, 13, 14)
    assert [leg.length_m for leg in route.legs] == pytest.approx([3.0, 5.0, 3.0])
    assert [leg.heading_deg for leg in route.legs] == pytest.approx([90.0, 0.0, -90.0])
    json.dumps(route.to_dict())


def test_left_and_back_turns():
    left = plan_route(obj(8, 2), obj(8, 7), [obj(8, 5), obj(3, 5)], [], ROOM)
    assert left is not None and left.turns == ("left",)
    back = plan_route(obj(2, 2), obj(2, 7), [obj(2, 6), obj(2.6, 3)], [], ROOM)
    assert back is not None and back.turns == ("back",)
    assert abs(back.turn_angles_deg[0]) > 155.0


def test_facing_object_may_be_the_first_waypoint_or_roughly_in_line():
    x, g = obj(2, 5), obj(7, 5)
    assert plan_route(obj(2, 2), x, [x, g], [], ROOM).turns == ("right",)
    # Facing 20° off the first leg is still "go forward"; 30° is not (limit 45 - 20 = 25°).
    off20 = obj(2 - 4 * np.sin(np.radians(20)), 2 + 4 * np.cos(np.radians(20)))
    off30 = obj(2 - 4 * np.sin(np.radians(30)), 2 + 4 * np.cos(np.radians(30)))
    assert plan_route(obj(2, 2), off20, [x, g], [], ROOM) is not None
    assert plan_route(obj(2, 2), off30, [x, g], [], ROOM) is None
    # First waypoint to the side of the facing direction: the template cannot start with a turn.
    assert plan_route(obj(2, 2), obj(2, 7), [obj(5, 2), obj(5, 6)], [], ROOM) is None


def test_straight_and_ambiguous_turns_are_rejected():
    a, b, x = obj(2, 2), obj(2, 7), obj(2, 4)
    assert plan_route(a, b, [x, obj(2, 7)], [], ROOM) is None  # straight on
    ang = np.radians(90 + 50)  # 50° left turn: within 20° of 45°
    assert plan_route(a, b, [x, obj(2 + 3 * np.cos(ang), 4 + 3 * np.sin(ang))], [], ROOM) is None
    ang = np.radians(90 + 130)  # 130°: within 20° of 135°
    assert plan_route(a, b, [x, obj(2 + 2 * np.cos(ang), 4 + 2 * np.sin(ang))], [], ROOM) is None
    ang = np.radians(90 + 130)
    loose = plan_route(a, b, [x, obj(2 + 2 * np.cos(ang), 4 + 2 * np.sin(ang))], [], ROOM, turn_margin_deg=2.0)
    assert loose is not None and loose.turns == ("left",)


def test_blocked_leg_is_rejected_and_corridor_width_matters():
    a, b, x, g = obj(2, 2), obj(2, 7), obj(2, 5), obj(7, 5)
    assert plan_route(a, b, [x, g], [obj(4.5, 5, 1.0, 1.0)], ROOM) is None  # sofa across the X -> goal leg
    assert plan_route(a, b, [x, g], [obj(4.5, 6.5, 1.0, 1.0)], ROOM) is not None  # well beside it
    # A box whose near side is 0.25 m from the leg: clear for a 0.2 m half-width, blocked at 0.3 m.
    side = obj(4.5, 5.5, 0.5, 0.5)
    assert plan_route(a, b, [x, g], [side], ROOM) is not None
    assert plan_route(a, b, [x, g], [side], ROOM, walk_half_width_m=0.3) is None


def test_route_objects_and_things_on_them_do_not_block_their_own_legs():
    table = obj(2, 5, 1.6, 1.0)  # X is a big table; the corridor runs into it
    lamp_on_table = obj(2.3, 5.1, 0.2, 0.2, z0=0.8)
    a, b, g = obj(2, 2), obj(2, 7), obj(7, 5)
    route = plan_route(a, b, [table, g], [a, b, table, g, lamp_on_table], ROOM)
    assert route is not None and route.turns == ("right",)


def test_leg_leaving_an_l_shaped_room_is_rejected():
    a, x, g = obj(2, 8), obj(8, 2), obj(9, 3)  # the diagonal (2,8)->(8,2) crosses the missing quadrant
    assert plan_route(a, x, [x, g], [], None) is not None
    assert plan_route(a, x, [x, g], [], None).turns == ("left",)
    assert plan_route(a, x, [x, g], [], L_ROOM) is None
    # Going round the corner instead stays inside.
    corner = obj(2, 2)
    route = plan_route(a, corner, [corner, obj(8, 2)], [], L_ROOM)
    assert route is not None and route.turns == ("left",)


def test_short_legs_and_degenerate_inputs():
    a, b = obj(2, 2), obj(2, 7)
    assert plan_route(a, b, [obj(2, 2.6), obj(6, 2.6)], [], ROOM) is None  # 0.6 m first leg
    assert plan_route(a, b, [obj(2, 2.6), obj(6, 2.6)], [], ROOM, min_leg_m=0.5) is not None
    assert plan_route(a, obj(2, 2), [obj(2, 5), obj(7, 5)], [], ROOM) is None  # facing undefined
    with pytest.raises(ValueError):
        plan_route(a, b, [obj(2, 5)], [], ROOM)


# --- find_routes -------------------------------------------------------------------------------------------------


def scene():
    boxes = {
        1: obj(1.5, 1.5), 2: obj(1.5, 6.5), 3: obj(8.5, 6.5), 4: obj(8.5, 1.5), 5: obj(5, 4, 1.2, 0.8),
        6: obj(5, 7.2), 7: obj(5, 0.8), 8: obj(1.0, 4), 9: obj(9, 4), 10: obj(3, 5.5), 11: obj(7, 2.5),
        # two chairs (not unique: obstacles only), a ceiling lamp over the middle (never an obstacle),
        # a rug (walkable), and structure that covers the whole room (ignored).
        20: obj(6.5, 4.5), 21: obj(3.5, 3.0), 22: obj(4, 2, 0.6, 0.6, 0.3, z0=2.4), 23: obj(5, 4, 3, 2, 0.01),
        30: OrientedBox(np.array([5, 4, -0.05]), np.array([10, 8, 0.1]), np.eye(3)),
        31: OrientedBox(np.array([0, 4, 1.5]), np.array([0.1, 8, 3]), np.eye(3)),
    }
    labels = {1: "bed", 2: "desk", 3: "wardrobe", 4: "tv stand", 5: "table", 6: "bookshelf", 7: "door",
              8: "nightstand", 9: "refrigerator", 10: "armchair", 11: "plant", 20: "chair", 21: "chair",
              22: "ceiling lamp", 23: "rug", 30: "floor", 31: "wall"}
    return boxes, labels


def test_find_routes_is_deterministic_and_every_route_replans_identically():
    boxes, labels = scene()
    routes = find_routes(boxes, labels, ROOM, np.random.default_rng(7), max_routes=12)
    again = find_routes(boxes, labels, ROOM, np.random.default_rng(7), max_routes=12)
    assert routes and [r.to_dict() for r in routes] == [r.to_dict() for r in again]
    route_objects = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
    obstacles = [boxes[i] for i in sorted(route_objects | {20, 21})]
    lengths = set()
    for r in routes:
        ids = r.used_obj_ids
        assert set(ids) <= route_objects
        assert len(set((r.start_id, *r.waypoint_ids, r.goal_id))) == len(r.waypoint_ids) + 2
        assert r.facing_id not in (r.start_id, r.goal_id, *r.waypoint_ids[1:])
        lengths.add(len(r.turns))
        replanned = plan_route(
            boxes[r.start_id], boxes[r.facing_id], [boxes[i] for i in (*r.waypoint_ids, r.goal_id)], obstacles, ROOM,
            object_ids=list(ids),
        )
        assert replanned is not None and replanned.turns == r.turns and replanned.legs == r.legs
        assert abs(r.initial_angle_deg) <= 25.0
    assert lengths == {1, 2}
    assert len({(r.start_id, r.goal_id) for r in routes}) == len(routes)


def route_legs(routes) -> set[frozenset]:
    return {
        frozenset(pair)
        for r in routes
        for pair in zip((r.start_id, *r.waypoint_ids), (*r.waypoint_ids, r.goal_id))
    }


def test_find_routes_never_walks_through_a_non_unique_obstacle():
    boxes, labels = scene()
    # The bed (1) -> table (5) leg passes through a chair (21): chairs are not nameable but still block.
    assert plan_route(boxes[1], boxes[5], [boxes[5], boxes[11]], [], ROOM) is not None
    assert plan_route(boxes[1], boxes[5], [boxes[5], boxes[11]], [boxes[21]], ROOM) is None
    routes = find_routes(boxes, labels, ROOM, np.random.default_rng(1), max_routes=200)
    legs = route_legs(routes)
    assert frozenset((1, 5)) not in legs
    without_chairs = {k: v for k, v in boxes.items() if k not in (20, 21)}
    routes = find_routes(without_chairs, labels, ROOM, np.random.default_rng(1), max_routes=200)
    legs = route_legs(routes)
    assert frozenset((1, 5)) in legs


def test_find_routes_small_or_empty_scenes():
    boxes, labels = scene()
    assert find_routes({1: boxes[1], 2: boxes[2]}, labels, ROOM, np.random.default_rng(0), 5) == []
    assert find_routes(boxes, labels, ROOM, np.random.default_rng(0), 0) == []
    # Everything labelled the same: nothing is nameable.
    same = {i: "box" for i in boxes}
    assert find_routes(boxes, same, ROOM, np.random.default_rng(0), 5) == []


def test_walk_ends_when_the_body_touches_the_object_not_half_a_width_inside_it():
    """A 0.4 m wide walker reaches the desk when its body first touches it, so a chair flush against the desk
    beside that point does not block; the old corridor (centre line buffered, desk cut out) slid along the desk's
    face past the contact point and swept the chair. A chair where the body arrives still blocks."""
    a = obj(2, 2)
    desk = obj(5, 5, 2.0, 0.6)  # x 4..6, y 4.7..5.3; the 45° leg from (2, 2) first touches it at centre (4.5, 4.5)
    goal = obj(2.5, 7.5)
    beside = obj(5.05, 4.45, 0.5, 0.5)  # x 4.8..5.3, flush under the desk, right of the contact point
    route = plan_route(a, desk, [desk, goal], [beside], ROOM)
    assert route is not None and route.turns == ("left",)
    at_contact = obj(4.25, 4.45, 0.5, 0.5)  # x 4.0..4.5: the body meets it before the desk
    assert plan_route(a, desk, [desk, goal], [at_contact], ROOM) is None


def test_scene_graph_is_reused_only_for_the_same_boxes_labels_room_and_thresholds():
    """Budgets of a scan share one graph; a moved box, another label, room or threshold builds its own."""
    from pipeline.geometry import route as R

    boxes, labels = scene()
    R._GRAPHS.clear()
    cold = find_routes(boxes, labels, ROOM, np.random.default_rng(7), max_routes=12)
    graph = R._shared_scene_graph(boxes, labels, ROOM, turn_margin_deg=20.0, walk_half_width_m=0.2, min_leg_m=1.0,
                                  room_tolerance_m=0.05, obstacle_max_bottom_m=1.0)
    assert len(R._GRAPHS) == 1  # find_routes' graph, found again
    warm = find_routes(boxes, labels, ROOM, np.random.default_rng(7), max_routes=12)
    assert [r.to_dict() for r in warm] == [r.to_dict() for r in cold]
    moved = {**boxes, 5: obj(5.0000001, 4, 1.2, 0.8)}
    renamed = {**labels, 5: "desk"}
    options = dict(turn_margin_deg=20.0, walk_half_width_m=0.2, min_leg_m=1.0, room_tolerance_m=0.05,
                   obstacle_max_bottom_m=1.0)
    assert R._shared_scene_graph(moved, labels, ROOM, **options) is not graph
    assert R._shared_scene_graph(boxes, renamed, ROOM, **options) is not graph
    assert R._shared_scene_graph(boxes, labels, None, **options) is not graph
    assert R._shared_scene_graph(boxes, labels, ROOM, **dict(options, min_leg_m=1.5)) is not graph
    assert len(R._GRAPHS) <= R._GRAPHS_KEPT
