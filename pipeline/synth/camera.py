"""A hand-held scan's camera walk: eye height, slow look-arounds in every room, smooth walking in between.

Positions stay inside the free floor region computed by the layout (every
furniture footprint grown by the camera clearance), so a pose is never inside
furniture. Routes between waypoints are shortest paths on a 5 cm grid over
that region, pulled taut and corner-cut, and only accepted while they stay
inside it.
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from scipy.ndimage import gaussian_filter1d
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra
from shapely.geometry import LineString, Polygon
from shapely.ops import polylabel

from pipeline.synth.rooms import RoomPlan

GRID = 0.05
WALK_SPEED = 0.5  # m/s of the notional walk before it is squeezed into the frame budget
PAN_SECONDS = 7.0
EYE_HEIGHT = 1.5
PAN_CENTRE_RADIUS = 0.6  # a look-around this close to the room centre turns fully round
PAN_SWEEP = math.radians(80)  # elsewhere it sweeps this far either side of the room centre
WALK_LEAN = math.radians(70)  # how far a walking view may turn from the walking direction towards the room
CELL = 2.6  # metres: a room is covered by look-around spots about this far apart
MIN_CELL_AREA = 1.2  # m² of free floor a cell needs to get a spot
MIN_SPOTS_PER_ROOM = 3
SPOT_AREA = 6.0  # m²: a room gets a look-around spot per this much floor (at least 3), so a hall is walked through,
# not seen from three spots (objects count as seen only when they fill 5% of a frame, SPEC §3)
FRAMES_PER_SPOT = 10


def _largest_polygon(geom) -> Polygon | None:
    polys = [g for g in getattr(geom, "geoms", [geom]) if isinstance(g, Polygon) and not g.is_empty]
    return max(polys, key=lambda g: g.area) if polys else None


def _waypoints(free: Polygon, rooms: list[RoomPlan], frames: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Look-around spots covering each room (where its free floor is widest, cell by cell), each with the room
    centre it faces, ordered room by room along a nearest-neighbour tour. A big room gets a spot per ``SPOT_AREA``
    as far as ``frames`` allow (one per ``FRAMES_PER_SPOT``: a short video cannot walk a hall without jumping)."""
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for room in rooms:
        piece = _largest_polygon(free.intersection(room.polygon))
        if piece is None or piece.area < 0.05:
            continue
        minx, miny, maxx, maxy = piece.bounds
        nx, ny = max(1, round((maxx - minx) / CELL)), max(1, round((maxy - miny) / CELL))
        spots = []
        for i in range(nx):
            for j in range(ny):
                cell = shapely.box(minx + i * (maxx - minx) / nx, miny + j * (maxy - miny) / ny,
                                   minx + (i + 1) * (maxx - minx) / nx, miny + (j + 1) * (maxy - miny) / ny)
                part = _largest_polygon(piece.intersection(cell))
                if part is not None and part.area >= MIN_CELL_AREA:
                    p = polylabel(part, tolerance=0.02)
                    spots.append((part.area, np.array([p.x, p.y])))
        if not spots:
            p = polylabel(piece, tolerance=0.02)
            spots = [(piece.area, np.array([p.x, p.y]))]
        most = max(MIN_SPOTS_PER_ROOM, min(math.ceil(room.polygon.area / SPOT_AREA), frames // FRAMES_PER_SPOT))
        hall = len(spots) > MIN_SPOTS_PER_ROOM  # a big room: turn fully at each spot, the furniture is all around
        spots = [pt for _, pt in sorted(spots, key=lambda a: -a[0])[:most]]
        start = out[-1][0] if out else spots[0]
        centre = np.array(room.polygon.centroid.coords[0])
        while spots:
            k = int(np.argmin([np.hypot(*(pt - start)) for pt in spots]))
            start = spots.pop(k)
            out.append((start, start if hall else centre))  # facing its own spot: a full turn (``_pan_yaw``)
    return out


class _Grid:
    def __init__(self, free: Polygon):
        self.free = free
        minx, miny, maxx, maxy = free.bounds
        self.xs = np.arange(minx, maxx + GRID, GRID)
        self.ys = np.arange(miny, maxy + GRID, GRID)
        xx, yy = np.meshgrid(self.xs, self.ys, indexing="ij")
        self.inside = shapely.contains_xy(free, xx, yy)
        nx, ny = self.inside.shape
        ids = -np.ones((nx, ny), dtype=np.int64)
        ids[self.inside] = np.arange(int(self.inside.sum()))
        self.ids = ids
        self.cells = np.argwhere(self.inside)
        rows, cols, w = [], [], []
        for dx, dy in ((1, 0), (0, 1), (1, 1), (1, -1)):
            a = ids[max(0, -dx) : nx - max(0, dx), max(0, -dy) : ny - max(0, dy)]
            b = ids[max(0, dx) : nx + min(0, dx), max(0, dy) : ny + min(0, dy)]
            ok = (a >= 0) & (b >= 0)
            rows.append(a[ok])
            cols.append(b[ok])
            w.append(np.full(int(ok.sum()), math.hypot(dx, dy) * GRID))
        n = len(self.cells)
        self.graph = coo_matrix((np.concatenate(w), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)).tocsr()

    def nearest(self, p: np.ndarray) -> int:
        xy = np.stack([self.xs[self.cells[:, 0]], self.ys[self.cells[:, 1]]], axis=1)
        return int(np.argmin(np.sum((xy - p) ** 2, axis=1)))

    def path(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        s, t = self.nearest(a), self.nearest(b)
        _, pred = dijkstra(self.graph, directed=False, indices=s, return_predecessors=True)
        if pred[t] < 0 and s != t:
            return None
        chain = [t]
        while chain[-1] != s:
            chain.append(int(pred[chain[-1]]))
        chain.reverse()
        cells = self.cells[chain]
        return np.stack([self.xs[cells[:, 0]], self.ys[cells[:, 1]]], axis=1)


def _taut(points: np.ndarray, free: Polygon) -> np.ndarray:
    """Greedy string pulling: skip ahead while the straight line stays in free space."""
    out = [points[0]]
    i = 0
    while i < len(points) - 1:
        j = len(points) - 1
        while j > i + 1 and not free.contains(LineString([points[i], points[j]])):
            j -= 1
        out.append(points[j])
        i = j
    return np.array(out)


def _chaikin(points: np.ndarray, free: Polygon, rounds: int = 3) -> np.ndarray:
    for _ in range(rounds):
        if len(points) < 3:
            return points
        q = 0.75 * points[:-1] + 0.25 * points[1:]
        r = 0.25 * points[:-1] + 0.75 * points[1:]
        cut = np.empty((2 * len(q), 2))
        cut[0::2], cut[1::2] = q, r
        smoothed = np.vstack([points[:1], cut, points[-1:]])
        if not free.contains(LineString(smoothed)):
            return points
        points = smoothed
    return points


def _look_at_rotation(yaw: float, pitch: float, roll: float = 0.0) -> np.ndarray:
    """Camera-to-world rotation, OpenCV axes (x right, y down, z forward)."""
    forward = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    if roll:
        c, s = math.cos(roll), math.sin(roll)
        right, down = c * right + s * down, -s * right + c * down
    return np.stack([right, down, forward], axis=1)


def _turn(a: float, b: float, f: float) -> float:
    """Eased turn from heading a towards b the short way round."""
    delta = (b - a + math.pi) % (2 * math.pi) - math.pi
    return a + delta * (0.5 - 0.5 * math.cos(math.pi * min(max(f, 0.0), 1.0)))


def _pan_yaw(f: float, arrive: float, depart: float, spot: np.ndarray, focus: np.ndarray) -> float:
    """Heading during a look-around at ``spot``: a full turn in a room's middle, else a wide sweep facing the room."""
    to_focus = focus - spot
    if float(np.hypot(*to_focus)) < PAN_CENTRE_RADIUS:
        return arrive + 2 * math.pi * (0.5 - 0.5 * math.cos(math.pi * f))
    centre = math.atan2(to_focus[1], to_focus[0])
    if f < 0.15:
        return _turn(arrive, centre, f / 0.15)
    if f > 0.85:
        return _turn(centre, depart, (f - 0.85) / 0.15)
    return centre + PAN_SWEEP * math.sin(2 * math.pi * (f - 0.15) / 0.7)


def camera_walk(free: Polygon, rooms: list[RoomPlan], frames: int, rng: np.random.Generator) -> np.ndarray:
    """(frames, 4, 4) camera-to-world poses visiting and looking around every room."""
    frames = max(1, int(frames))
    free_safe = free.buffer(-1e-3)
    spots = _waypoints(free_safe, rooms, frames)
    if not spots:
        p = np.array(free_safe.representative_point().coords[0])
        spots = [(p, p)]
    waypoints = [p for p, _ in spots]
    focus = [c for _, c in spots]
    grid = _Grid(free_safe)
    # events: ("pan", point, seconds) and ("walk", polyline, seconds)
    events: list[tuple[str, np.ndarray, float]] = []
    pan_focus: dict[int, np.ndarray] = {}
    walk_focus: dict[int, np.ndarray] = {}
    here = None
    for wp, centre in zip(waypoints, focus):
        if here is not None:
            route = grid.path(here, wp)
            if route is None:
                continue  # unreachable spot (a sliver of free floor): skip it rather than teleport
            line = _chaikin(_taut(np.vstack([here, route[1:-1], wp]), free_safe), free_safe)
            if not free_safe.contains(LineString(line)) and len(line) > 1:
                line = route
            length = float(np.sum(np.linalg.norm(np.diff(line, axis=0), axis=1)))
            if length > 1e-6:
                walk_focus[len(events)] = centre
                events.append(("walk", line, length / WALK_SPEED))
        pan_focus[len(events)] = centre
        events.append(("pan", wp, PAN_SECONDS))
        here = wp
    durations = np.array([e[2] for e in events])
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    total = starts[-1]
    times = np.linspace(0.0, total, frames, endpoint=False) + (total / frames) / 2.0
    phase = float(rng.uniform(0, 2 * math.pi))
    xy = np.zeros((frames, 2))
    yaw = np.zeros(frames)
    first_heading = float(rng.uniform(-math.pi, math.pi))
    for i, t in enumerate(times):
        k = int(np.searchsorted(starts, t, side="right") - 1)
        k = min(k, len(events) - 1)
        kind, geo, dur = events[k]
        f = (t - starts[k]) / dur if dur > 0 else 0.0
        if kind == "pan":
            xy[i] = geo
            arrive = first_heading  # a pan starts facing the way the walk arrived
            if k > 0 and events[k - 1][0] == "walk":
                d = events[k - 1][1][-1] - events[k - 1][1][-2]
                arrive = math.atan2(d[1], d[0])
            depart = arrive
            if k + 1 < len(events) and events[k + 1][0] == "walk":
                d = events[k + 1][1][1] - events[k + 1][1][0]
                depart = math.atan2(d[1], d[0])
            yaw[i] = _pan_yaw(f, arrive, depart, geo, pan_focus[k])
        else:
            seg = np.linalg.norm(np.diff(geo, axis=0), axis=1)
            cum = np.concatenate([[0.0], np.cumsum(seg)])
            s = f * cum[-1]
            j = min(int(np.searchsorted(cum, s, side="right") - 1), len(seg) - 1)
            a = (s - cum[j]) / seg[j] if seg[j] > 0 else 0.0
            xy[i] = geo[j] + a * (geo[j + 1] - geo[j])
            d = geo[j + 1] - geo[j]
            heading = math.atan2(d[1], d[0])
            # Lean the view from the walking direction towards the room centre, as a person scanning a room does.
            to_room = walk_focus[k] - xy[i]
            lean = (math.atan2(to_room[1], to_room[0]) - heading + math.pi) % (2 * math.pi) - math.pi
            lean = max(-WALK_LEAN, min(WALK_LEAN, lean)) if float(np.hypot(*to_room)) > 0.5 else 0.0
            yaw[i] = heading + lean + 0.3 * math.sin(2 * math.pi * t / 6.0 + phase)
    yaw = np.unwrap(yaw)
    sigma = max(0.5, frames / 120.0)
    yaw = gaussian_filter1d(yaw, sigma, mode="nearest")
    pitch = -0.3 + 0.08 * np.sin(2 * math.pi * times / 9.0 + phase)
    height = EYE_HEIGHT + 0.05 * np.sin(2 * math.pi * times / 5.0 + 2 * phase)
    roll = 0.02 * np.sin(2 * math.pi * times / 4.0 + 3 * phase)
    poses = np.zeros((frames, 4, 4))
    for i in range(frames):
        poses[i, :3, :3] = _look_at_rotation(float(yaw[i]), float(pitch[i]), float(roll[i]))
        poses[i, :3, 3] = [xy[i, 0], xy[i, 1], height[i]]
        poses[i, 3, 3] = 1.0
    return poses
