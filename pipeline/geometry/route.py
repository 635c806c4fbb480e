"""Automatic route planning for the route_planning question (ReVSI writes these by hand).

The question reads "You are a robot beginning at the {A} and facing the {B}.
You want to navigate to the {C}. ... 1. Go forward until the {X}
2. [please fill in] 3. Go forward until the {Y} ... You have reached the final
destination." and each [please fill in] is one of turn left / turn right /
turn back. So a route is A's centre, then the centres of the waypoint objects
X, Y, ..., ending at the goal C, joined by straight legs; the exact rules:

* Positions are object centres in the floor plane (the same reference point
  the direction questions use); headings are those of the straight legs.
* The first action is "go forward", so X must lie ahead of the facing
  direction: the signed angle from (B - A) to (X - A) must be at most
  ``45 - turn_margin_deg`` (default 25°) either way. B may be X itself.
* At every intermediate waypoint the heading changes by a signed angle
  ``delta`` (counter-clockwise = left, in (-180, 180]); ``|delta|`` in
  [45, 135) is left/right by its sign, ``|delta|`` >= 135 is back, below 45 is
  "go straight", which the template cannot express. A route is rejected when
  any turn is within ``turn_margin_deg`` of 45 or 135, or is a straight
  (so the accepted turns are 45+m <= |delta| <= 135-m and |delta| >= 135+m).
* The walker is a disc of radius ``walk_half_width_m``. A leg is walked from
  the moment the body stops touching its start object until it first touches
  its end object: the part of the centre-to-centre segment outside both
  footprints grown by the radius. That part buffered by the radius (round
  caps) is the leg's corridor; it must not overlap any other object's
  footprint (overlap area above 1 cm²) and must lie inside the room polygon
  (grown by ``room_tolerance_m`` to absorb polygon noise). So a chair flush
  against the desk one walks to blocks only if the body meets it before the
  desk. Legs shorter than ``min_leg_m`` are rejected ("go forward until" a
  touching object says nothing).
* The same object never appears twice in a route.

``find_routes`` searches a scene with the same rules, vectorised: every leg
between candidate objects is tested once (shapely STRtree + vectorised
predicates), turns come from a heading matrix, and routes are drawn from the
valid ones with the caller's seeded generator.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import shapely

from pipeline.geometry.footprint import box_footprints
from pipeline.geometry.shapes import OrientedBox
from pipeline.vocab import is_structural, normalize_label

TURN_PHRASES = {"left": "turn left", "right": "turn right", "back": "turn back"}
# Floor coverings one walks over: never obstacles nor waypoints.
WALKABLE_LABELS: frozenset[str] = frozenset({"rug", "carpet", "mat", "doormat", "bath mat", "floor mat", "yoga mat"})
# Overlap area (m²) below which a corridor merely grazes a footprint.
_OVERLAP_AREA_M2 = 1e-4


@dataclass(frozen=True)
class RouteLeg:
    start_xy: tuple[float, float]
    end_xy: tuple[float, float]
    length_m: float
    heading_deg: float  # counter-clockwise from world +x


@dataclass(frozen=True)
class Route:
    """A valid route; ``turns[k]`` is the turn at ``waypoint_ids[k]`` (the goal ends the route)."""

    start_id: int
    facing_id: int
    waypoint_ids: tuple[int, ...]  # intermediate objects X, Y, ... in visiting order (goal excluded)
    goal_id: int
    initial_angle_deg: float  # signed angle from the facing direction to the first leg
    turns: tuple[str, ...]  # "left" | "right" | "back"
    turn_angles_deg: tuple[float, ...]  # signed heading changes, counter-clockwise positive
    legs: tuple[RouteLeg, ...] = field(repr=False)

    @property
    def turn_phrases(self) -> tuple[str, ...]:
        return tuple(TURN_PHRASES[t] for t in self.turns)

    @property
    def used_obj_ids(self) -> tuple[int, ...]:
        return (self.start_id, self.facing_id, *self.waypoint_ids, self.goal_id)

    def to_dict(self) -> dict:
        """Plain JSON-able record of the geometry, for the question's audit column."""
        return {
            "start_id": self.start_id,
            "facing_id": self.facing_id,
            "waypoint_ids": list(self.waypoint_ids),
            "goal_id": self.goal_id,
            "initial_angle_deg": self.initial_angle_deg,
            "turns": list(self.turns),
            "turn_angles_deg": list(self.turn_angles_deg),
            "legs": [
                {"start_xy": list(g.start_xy), "end_xy": list(g.end_xy), "length_m": g.length_m,
                 "heading_deg": g.heading_deg}
                for g in self.legs
            ],
        }


def signed_turn(heading_in_deg, heading_out_deg):
    """Heading change in (-180, 180], counter-clockwise (left) positive; works on arrays."""
    delta = (np.asarray(heading_out_deg, dtype=float) - np.asarray(heading_in_deg, dtype=float)) % 360.0
    out = np.where(delta > 180.0, delta - 360.0, delta)
    return float(out) if np.ndim(out) == 0 else out


def classify_turn(delta_deg: float, turn_margin_deg: float = 20.0) -> str | None:
    """"left" / "right" / "back" for a heading change, or None if straight or within the margin of 45°/135°."""
    a = abs(float(delta_deg))
    if a < 45.0 + turn_margin_deg:
        return None
    if a <= 135.0 - turn_margin_deg:
        return "left" if delta_deg > 0 else "right"
    if a >= 135.0 + turn_margin_deg:
        return "back"
    return None


def _turn_codes(delta: np.ndarray, margin: float) -> np.ndarray:
    """Vectorised ``classify_turn``: 0 invalid, 1 left, 2 right, 3 back."""
    a = np.abs(delta)
    side = (a >= 45.0 + margin) & (a <= 135.0 - margin)
    codes = np.where(side, np.where(delta > 0, 1, 2), 0)
    return np.where(a >= 135.0 + margin, 3, codes).astype(np.int8)


_CODE_LABELS = {1: "left", 2: "right", 3: "back"}


def _headings(points_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, N) heading (deg, ccw from +x) and length of the segment from point i to point j."""
    diff = points_xy[None, :, :] - points_xy[:, None, :]
    return np.degrees(np.arctan2(diff[..., 1], diff[..., 0])), np.hypot(diff[..., 0], diff[..., 1])


def legs_clear(
    starts_xy: np.ndarray,
    ends_xy: np.ndarray,
    endpoint_a: np.ndarray,
    endpoint_b: np.ndarray,
    footprints: np.ndarray,
    obstacle_mask: np.ndarray,
    room_polygon,
    walk_half_width_m: float,
    room_tolerance_m: float,
) -> np.ndarray:
    """For each leg, whether its corridor avoids every obstacle footprint and stays in the room.

    ``endpoint_a/b`` index ``footprints`` (the leg's own objects, carved out
    of the corridor); ``obstacle_mask`` marks the footprints that block.
    """
    n = len(starts_xy)
    if n == 0:
        return np.zeros(0, dtype=bool)
    lines = shapely.linestrings(np.stack([starts_xy, ends_xy], axis=1))
    # The walker is a disc of radius walk_half_width_m; it has left A / reached X once its body touches the
    # object, i.e. while its centre is within walk_half_width_m of the footprint. So only the part of the
    # centre line outside both grown footprints is walked, and the body sweeps that part buffered by the
    # radius. (Buffering the whole centre-to-centre line and cutting out the footprints would push the
    # body half a width into X and sweep whatever stands flush beside X's edge: the chair at a desk.)
    own = shapely.union(footprints[endpoint_a], footprints[endpoint_b])
    walked = shapely.difference(lines, shapely.buffer(own, walk_half_width_m, quad_segs=8))
    free = shapely.buffer(walked, walk_half_width_m, quad_segs=8)
    ok = np.ones(n, dtype=bool)
    if room_polygon is not None:
        room = shapely.buffer(room_polygon, room_tolerance_m) if room_tolerance_m > 0 else room_polygon
        shapely.prepare(room)
        outside = shapely.area(shapely.difference(free, room))
        ok &= outside <= _OVERLAP_AREA_M2
    obstacle_idx = np.flatnonzero(obstacle_mask)
    if obstacle_idx.size:
        tree = shapely.STRtree(footprints[obstacle_idx])
        leg_i, tree_j = tree.query(free, predicate="intersects")
        obs = obstacle_idx[tree_j]
        keep = (obs != endpoint_a[leg_i]) & (obs != endpoint_b[leg_i])
        leg_i, obs = leg_i[keep], obs[keep]
        if leg_i.size:
            area = shapely.area(shapely.intersection(free[leg_i], footprints[obs]))
            blocked = leg_i[area > _OVERLAP_AREA_M2]
            ok[blocked] = False
    return ok


def plan_route(
    start: OrientedBox,
    facing: OrientedBox,
    waypoints: list[OrientedBox],
    obstacles: list[OrientedBox],
    room_polygon,
    *,
    turn_margin_deg: float = 20.0,
    walk_half_width_m: float = 0.2,
    min_leg_m: float = 1.0,
    room_tolerance_m: float = 0.05,
    object_ids: Sequence[int] | None = None,
) -> Route | None:
    """The route start -> waypoints[0] -> ... -> waypoints[-1] (the goal), or None if it breaks a rule.

    ``waypoints`` needs at least two objects (one turn). ``obstacles`` are the
    other objects; the route's own objects may be included (a leg ignores its
    two endpoints and blocks on the rest). ``room_polygon`` None skips the room
    test. ``object_ids`` = (start, facing, *waypoints) ids to record; -1 otherwise.
    """
    if len(waypoints) < 2:
        raise ValueError("plan_route: a route needs at least one intermediate waypoint and a goal")
    route_boxes = [start, *waypoints]
    points = np.array([np.asarray(b.center, dtype=float)[:2] for b in route_boxes])
    facing_xy = np.asarray(facing.center, dtype=float)[:2]
    steps = np.diff(points, axis=0)
    lengths = np.hypot(steps[:, 0], steps[:, 1])
    facing_vec = facing_xy - points[0]
    if not np.any(facing_vec) or np.any(lengths < max(min_leg_m, 1e-9)):
        return None
    headings = np.degrees(np.arctan2(steps[:, 1], steps[:, 0]))
    initial = signed_turn(np.degrees(np.arctan2(facing_vec[1], facing_vec[0])), headings[0])
    if abs(initial) > 45.0 - turn_margin_deg:
        return None
    deltas = signed_turn(headings[:-1], headings[1:])
    turns = [classify_turn(d, turn_margin_deg) for d in np.atleast_1d(deltas)]
    if any(t is None for t in turns):
        return None
    # Route objects block the legs they do not end; copies of them among ``obstacles`` are dropped so a
    # leg never blocks on its own endpoint.
    others = [o for o in obstacles if not any(o is r for r in route_boxes)]
    footprints = box_footprints([*route_boxes, *others])
    n_route = len(route_boxes)
    obstacle_mask = np.ones(len(footprints), dtype=bool)
    clear = legs_clear(
        points[:-1], points[1:], np.arange(n_route - 1), np.arange(1, n_route), footprints, obstacle_mask,
        room_polygon, walk_half_width_m, room_tolerance_m,
    )
    if not np.all(clear):
        return None
    ids = list(object_ids) if object_ids is not None else [-1] * (n_route + 1)
    if len(ids) != n_route + 1:
        raise ValueError(f"plan_route: {len(ids)} object ids for {n_route + 1} objects")
    return _make_route(ids[0], ids[1], ids[2:], points, initial, np.atleast_1d(deltas), turns, headings, lengths)


def _make_route(start_id, facing_id, visit_ids, points, initial, deltas, turns, headings, lengths) -> Route:
    legs = tuple(
        RouteLeg(
            (float(points[k, 0]), float(points[k, 1])),
            (float(points[k + 1, 0]), float(points[k + 1, 1])),
            float(lengths[k]),
            float(headings[k]),
        )
        for k in range(len(points) - 1)
    )
    return Route(
        start_id=int(start_id),
        facing_id=int(facing_id),
        waypoint_ids=tuple(int(i) for i in visit_ids[:-1]),
        goal_id=int(visit_ids[-1]),
        initial_angle_deg=float(initial),
        turns=tuple(turns),
        turn_angles_deg=tuple(float(d) for d in deltas),
        legs=legs,
    )


@dataclass(frozen=True)
class _SceneGraph:
    """Pairwise leg data between candidate objects of one scene."""

    ids: np.ndarray  # (N,) object ids of the candidates, ascending
    points: np.ndarray  # (N, 2)
    heading: np.ndarray  # (N, N) degrees
    length: np.ndarray  # (N, N)
    clear: np.ndarray  # (N, N) leg i -> j valid (symmetric, diagonal False)
    turn: np.ndarray  # (N, N, N) turn code at j for i -> j -> k


def _scene_graph(boxes, labels, room_polygon, *, turn_margin_deg, walk_half_width_m, min_leg_m,
                 room_tolerance_m, obstacle_max_bottom_m) -> _SceneGraph | None:
    ids = np.array(sorted(boxes), dtype=np.int64)
    if ids.size < 3:
        return None
    all_boxes = [boxes[int(i)] for i in ids]
    names = [normalize_label(labels.get(int(i), "")) for i in ids]
    footprints = box_footprints(all_boxes)
    corners_z = np.stack([b.corners()[:, 2] for b in all_boxes])
    bottoms = corners_z.min(axis=1)
    floor_z = bottoms.min()
    ignored = np.array([is_structural(n) or n in WALKABLE_LABELS or not n for n in names])
    low = bottoms - floor_z <= obstacle_max_bottom_m
    obstacle_mask = ~ignored & low
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    unique = np.array([counts[n] == 1 for n in names])
    centers = np.array([np.asarray(b.center, dtype=float)[:2] for b in all_boxes])
    candidate = obstacle_mask & unique
    if room_polygon is not None:
        room = shapely.buffer(room_polygon, room_tolerance_m) if room_tolerance_m > 0 else room_polygon
        candidate &= shapely.contains_xy(room, centers[:, 0], centers[:, 1])
    cand = np.flatnonzero(candidate)
    if cand.size < 3:
        return None
    points = centers[cand]
    heading, length = _headings(points)
    iu, ju = np.triu_indices(cand.size, k=1)
    long_enough = length[iu, ju] >= max(min_leg_m, 1e-9)
    iu, ju = iu[long_enough], ju[long_enough]
    ok = legs_clear(points[iu], points[ju], cand[iu], cand[ju], footprints, obstacle_mask, room_polygon,
                    walk_half_width_m, room_tolerance_m)
    clear = np.zeros((cand.size, cand.size), dtype=bool)
    clear[iu[ok], ju[ok]] = True
    clear |= clear.T
    turn = _turn_codes(signed_turn(heading[:, :, None], heading[None, :, :]), turn_margin_deg)
    return _SceneGraph(ids[cand], points, heading, length, clear, turn)


# Partial paths kept per extension step; beyond this a seeded random subset is extended, so that
# open rooms with many candidates (tens of thousands of 3-turn paths) stay cheap in time and memory.
MAX_PARTIAL_PATHS = 20_000


def _paths(graph: _SceneGraph, n_waypoints: int, rng: np.random.Generator) -> np.ndarray:
    """(M, n_waypoints + 2) candidate-index paths start, X, ..., goal with clear legs and valid turns."""
    paths = np.argwhere(graph.clear)  # (M, 2) start -> first waypoint
    for _ in range(n_waypoints):
        if len(paths) > MAX_PARTIAL_PATHS:
            paths = paths[np.sort(rng.choice(len(paths), size=MAX_PARTIAL_PATHS, replace=False))]
        prev, last = paths[:, -2], paths[:, -1]
        ok = graph.clear[last] & (graph.turn[prev, last] > 0)  # (M, N)
        for col in range(paths.shape[1]):
            ok[np.arange(len(paths)), paths[:, col]] = False
        m, nxt = np.nonzero(ok)
        paths = np.concatenate([paths[m], nxt[:, None]], axis=1)
        if len(paths) == 0:
            return np.zeros((0, n_waypoints + 2), dtype=np.int64)
    return paths


# Route questions use every object of the scan, not only the budget's visible ones, so each budget (and
# profile) of a scan builds the same graph: it is kept for reuse, keyed by the exact boxes, labels, room
# polygon and thresholds (the graph is read, never changed, by ``find_routes``).
_GRAPHS: OrderedDict[tuple, _SceneGraph | None] = OrderedDict()
_GRAPHS_KEPT = 4


def _shared_scene_graph(boxes, labels, room_polygon, **options) -> _SceneGraph | None:
    key = (
        tuple(
            (int(i), str(labels.get(int(i), "")), np.asarray(boxes[i].center, dtype=float).tobytes(),
             np.asarray(boxes[i].extent, dtype=float).tobytes(), np.asarray(boxes[i].rotation, dtype=float).tobytes())
            for i in sorted(boxes)
        ),
        None if room_polygon is None else shapely.to_wkb(room_polygon, include_srid=True),
        tuple(sorted((name, float(value)) for name, value in options.items())),
    )
    if key in _GRAPHS:
        _GRAPHS.move_to_end(key)
        return _GRAPHS[key]
    graph = _scene_graph(boxes, labels, room_polygon, **options)
    _GRAPHS[key] = graph
    while len(_GRAPHS) > _GRAPHS_KEPT:
        _GRAPHS.popitem(last=False)
    return graph


def find_routes(
    boxes: Mapping[int, OrientedBox],
    labels: Mapping[int, str],
    room_polygon,
    rng: np.random.Generator,
    max_routes: int,
    n_waypoints: Sequence[int] = (1, 2),
    *,
    turn_margin_deg: float = 20.0,
    walk_half_width_m: float = 0.2,
    min_leg_m: float = 1.0,
    room_tolerance_m: float = 0.05,
    obstacle_max_bottom_m: float = 1.0,
) -> list[Route]:
    """Up to ``max_routes`` valid routes in one scene, drawn with ``rng``.

    Route objects (start, facing, waypoints, goal) are objects whose label is
    unique in ``labels`` (the question names them by category), that are not
    structural or floor coverings, that reach within ``obstacle_max_bottom_m``
    of the floor (lowest box bottom in the scene) and whose centre is in the
    room. Obstacles are all such floor-reaching objects, unique or not.
    ``n_waypoints`` are the numbers of intermediate waypoints (= turns) to
    offer; routes of each length are interleaved, and no (start, goal) pair
    repeats. The facing object B is drawn among the route-object candidates
    at least ``min_leg_m`` from the start whose direction lies within the
    go-forward cone of X (X itself included), never the goal or a later
    waypoint. Deterministic for a given generator state.
    """
    if max_routes <= 0:
        return []
    graph = _shared_scene_graph(
        boxes, labels, room_polygon, turn_margin_deg=turn_margin_deg, walk_half_width_m=walk_half_width_m,
        min_leg_m=min_leg_m, room_tolerance_m=room_tolerance_m, obstacle_max_bottom_m=obstacle_max_bottom_m,
    )
    if graph is None:
        return []
    pools = []
    for k in sorted(set(int(k) for k in n_waypoints)):
        if k < 1:
            raise ValueError(f"find_routes: n_waypoints must be >= 1 (one turn per waypoint), got {k}")
        paths = _paths(graph, k, rng)
        pools.append(paths[rng.permutation(len(paths))])
    straight_max = 45.0 - turn_margin_deg
    routes: list[Route] = []
    seen_ends: set[tuple[int, int]] = set()
    cursors = [0] * len(pools)
    while len(routes) < max_routes and any(c < len(p) for c, p in zip(cursors, pools)):
        for pi, pool in enumerate(pools):
            if len(routes) >= max_routes:
                break
            while cursors[pi] < len(pool):
                path = pool[cursors[pi]]
                cursors[pi] += 1
                route = _route_from_path(graph, path, rng, straight_max, min_leg_m, seen_ends)
                if route is not None:
                    routes.append(route)
                    seen_ends.add((route.start_id, route.goal_id))
                    break
    return routes


def _route_from_path(graph: _SceneGraph, path: np.ndarray, rng, straight_max, min_leg_m, seen_ends) -> Route | None:
    s, x = int(path[0]), int(path[1])
    if (int(graph.ids[s]), int(graph.ids[path[-1]])) in seen_ends:
        return None
    # Facing object: any other candidate ahead of the start within the straight cone around X,
    # not later on the route (it would name a waypoint twice), X itself included.
    off = np.abs(signed_turn(graph.heading[s, x], graph.heading[s]))
    ok = (off <= straight_max) & (graph.length[s] >= min_leg_m)
    ok[s] = False
    ok[path[2:]] = False
    choices = np.flatnonzero(ok)
    if choices.size == 0:
        return None
    b = int(choices[rng.integers(choices.size)])
    points = graph.points[path]
    headings = graph.heading[path[:-1], path[1:]]
    lengths = graph.length[path[:-1], path[1:]]
    initial = signed_turn(graph.heading[s, b], headings[0])
    deltas = np.atleast_1d(signed_turn(headings[:-1], headings[1:]))
    codes = graph.turn[path[:-2], path[1:-1], path[2:]]
    turns = [_CODE_LABELS[int(c)] for c in codes]
    visit_ids = [int(i) for i in graph.ids[path[1:]]]
    return _make_route(graph.ids[s], graph.ids[b], visit_ids, points, initial, deltas, turns, headings, lengths)
