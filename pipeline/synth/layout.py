"""Furnishing a room shell: place furniture groups without interpenetration and keep the floor walkable, then
put small objects on real supports (a phone on a desk top, a charger on the floor under a table).

Every placement is checked in 3D against every part already placed (footprint
overlap with shapely *and* z-interval overlap), so objects may touch but never
share volume. After each furniture group the free floor (at camera clearance)
must stay one connected region reaching every room, so the camera walk can
always visit everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import shapely
from shapely.geometry import Polygon

from pipeline.synth.boxes import Box, interpenetrates, union_box
from pipeline.synth.furniture import BUILDERS, Part
from pipeline.synth.groups import FILLERS, RECIPES, Group
from pipeline.synth.rooms import RoomPlan, Shell
from pipeline.synth.vocabulary import FURNITURE, SIGNATURE_PLACEMENTS, SMALL_OBJECTS, SMALL_SCALE, draw_size

CAMERA_CLEARANCE = 0.35  # metres between the camera path and any furniture footprint or wall
MIN_FURNITURE, MAX_FURNITURE = 10, 60  # a 100 m² hall takes 60 floor-standing pieces (rows of chairs, desks)
FURNITURE_PER_M2 = 0.8  # small rooms get at most this many pieces per m² of floor (a 7 m² bathroom is not a store room)
MIN_FURNITURE_CAP = 6
REPEAT_FULL_AREA = 40.0  # m²: a room this big may take a recipe's full repeat count (smaller ones proportionally fewer)
MIN_UNDER_HEIGHT = 0.6  # only tables and desks one can see under from eye height (not coffee or end tables)
UNDER_EDGE = 0.12  # metres: things on the floor under a table lie at most this far in from its free edge


@dataclass
class LaidObject:
    label: str
    parts: list[Part]  # world frame
    yaw: float
    room: str
    small: bool = False
    structural: bool = False
    support: int | None = None  # index into the object list
    support_relation: str | None = None  # "on" | "under"
    under: int | None = None  # object the item lies beneath (charger under a table)
    under_space: tuple[Polygon, float] | None = None  # free floor beneath it and its clear height

    @property
    def boxes(self) -> list[Box]:
        return [p.box for p in self.parts]


@dataclass
class Layout:
    shell: Shell
    objects: list[LaidObject] = field(default_factory=list)
    free_space: Polygon | None = None  # where the camera may stand


def _place_parts(label: str, size, x: float, y: float, z: float, yaw: float) -> tuple[list[Part], tuple | None]:
    build = BUILDERS[label](*size)
    parts = [Part(p.box.placed(x, y, z, yaw), p.name, p.shade, p.surface, p.rests_on_floor and z == 0.0) for p in build.parts]
    under = None
    if build.under is not None:
        x0, y0, x1, y1, clear = build.under
        local = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        c, s = math.cos(yaw), math.sin(yaw)
        world = local @ np.array([[c, s], [-s, c]]) + np.array([x, y])
        under = (Polygon(world), clear)
    return parts, under


def _top_of_surfaces(obj: LaidObject) -> float:
    return max(p.box.z_max for p in obj.parts if p.surface)


def _wall_edges(room: RoomPlan) -> list[tuple[np.ndarray, np.ndarray]]:
    ring = shapely.geometry.polygon.orient(room.polygon, sign=1.0).exterior
    pts = np.asarray(ring.coords)
    return [(pts[i], pts[i + 1]) for i in range(len(pts) - 1)]


def _free_space(shell: Shell, footprints: list[Polygon]) -> Polygon:
    free = shell.scene_polygon.buffer(-CAMERA_CLEARANCE, join_style="mitre")
    if footprints:
        free = free.difference(shapely.union_all(footprints).buffer(CAMERA_CLEARANCE, quad_segs=4))
    return free


def _walkable(shell: Shell, free) -> bool:
    """One connected free region (crumbs ignored) that reaches every room."""
    pieces = [g for g in getattr(free, "geoms", [free]) if g.area > 0.05]
    if len(pieces) != 1:
        return False
    return all(pieces[0].intersection(room.polygon).area > 0.8 for room in shell.rooms)


def repeats(lo: int, hi: int, area: float) -> int:
    """A recipe's largest repeat count in a room of ``area`` m²: ``hi`` from ``REPEAT_FULL_AREA`` up, fewer below."""
    return lo + round((hi - lo) * min(1.0, area / REPEAT_FULL_AREA))


class _Furnisher:
    def __init__(self, shell: Shell, rng: np.random.Generator):
        self.shell = shell
        self.rng = rng
        self.objects: list[LaidObject] = []
        for s in shell.objects:
            parts = [Part(b, "shell", 1.0, False, False) for b in s.parts]
            self.objects.append(LaidObject(s.label, parts, s.yaw, s.room, structural=s.label in ("wall", "floor", "ceiling")))
        self.boxes: list[Box] = [b for o in self.objects for b in o.boxes]
        self.floor_footprints: list[Polygon] = []
        self.object_boxes: list[Box] = []  # floor-standing pieces' own boxes (what a box-annotated dataset stores)
        self.items_on: dict[tuple[int, float], int] = {}  # (host object, surface height) -> small objects on it
        area_cap = max(MIN_FURNITURE_CAP, round(FURNITURE_PER_M2 * shell.scene_polygon.area))
        self.max_furniture = min(MAX_FURNITURE, area_cap)

    @property
    def furniture_count(self) -> int:
        """Floor-standing pieces: what the per-m² cap limits (a monitor or lamp on a desk takes no floor)."""
        return sum(
            1
            for o in self.objects
            if not o.structural and not o.small and o.label not in ("door", "window") and o.support_relation != "on"
        )

    def try_group(self, group: Group, room: RoomPlan, attempts: int = 30) -> bool:
        edges = _wall_edges(room)
        for _ in range(attempts):
            if group.against_wall:
                p, q = edges[int(self.rng.integers(0, len(edges)))]
                e = q - p
                length = float(np.hypot(*e))
                xs = [m.x for m in group.members]
                half = [m.size[0] / 2 + abs(m.size[1]) / 2 for m in group.members]
                lo = -min(x - h for x, h in zip(xs, half))
                hi = length - max(x + h for x, h in zip(xs, half))
                if hi < lo:
                    continue
                u = e / length
                origin = p + u * float(self.rng.uniform(lo, hi))
                yaw = math.atan2(u[1], u[0])
            else:
                minx, miny, maxx, maxy = room.polygon.bounds
                origin = np.array([self.rng.uniform(minx, maxx), self.rng.uniform(miny, maxy)])
                yaw = float(self.rng.integers(0, 4)) * math.pi / 2 + float(self.rng.normal(0.0, 0.05))
            if self._commit(group, room, origin, yaw):
                return True
        return False

    def _commit(self, group: Group, room: RoomPlan, origin: np.ndarray, yaw: float) -> bool:
        c, s = math.cos(yaw), math.sin(yaw)
        placed: list[LaidObject] = []
        new_boxes: list[Box] = []
        new_floor: list[Polygon] = []
        new_object_boxes: list[Box] = []
        inside = room.polygon.buffer(1e-6)
        for m in group.members:
            x = origin[0] + c * m.x - s * m.y
            y = origin[1] + s * m.x + c * m.y
            z = 0.0
            if m.on is not None:
                z = _top_of_surfaces(placed[m.on])
            parts, under = _place_parts(m.label, m.size, x, y, z, yaw + m.yaw)
            for part in parts:
                fp = part.box.footprint()
                if not inside.contains(fp):
                    return False
                if any(fp.intersection(k).area > 1e-9 for k in self.shell.keep_out):
                    return False
            boxes = [p.box for p in parts]
            if any(interpenetrates(b, self.boxes + new_boxes) for b in boxes):
                return False
            if m.on is None:
                # Parts may touch without sharing volume, yet a lamp's base under a table's edge puts each inside
                # the other's box: ARKitScenes (labels by smallest box holding a triangle, ReVSI B.4) would read
                # them differently from the other layouts, and no one stands furniture like that.
                whole = union_box(boxes, yaw + m.yaw)
                if any(interpenetrates(whole, [other]) for other in self.object_boxes + new_object_boxes):
                    return False
                new_object_boxes.append(whole)
            obj = LaidObject(m.label, parts, yaw + m.yaw, room.name, under_space=under)
            if m.on is not None:
                obj.support = len(self.objects) + m.on
                obj.support_relation = "on"
            placed.append(obj)
            new_boxes.extend(boxes)
            if m.on is None:
                new_floor.append(shapely.union_all([b.footprint() for b in boxes]))
        if self.furniture_count + sum(1 for m in group.members if m.on is None) > self.max_furniture:
            return False
        if not _walkable(self.shell, _free_space(self.shell, self.floor_footprints + new_floor)):
            return False
        self.objects.extend(placed)
        self.boxes.extend(new_boxes)
        self.floor_footprints.extend(new_floor)
        self.object_boxes.extend(new_object_boxes)
        return True

    def furnish(self) -> None:
        for room in self.shell.rooms:
            area = room.polygon.area
            for maker, (lo, hi), prob in RECIPES[room.kind]:
                if self.rng.random() >= prob:
                    continue
                for _ in range(int(self.rng.integers(lo, repeats(lo, hi, area) + 1))):
                    self.try_group(maker(self.rng), room)
        # Fill up to a per-scene target that grows with floor area, so scenes differ in density and categories
        # repeat in small rooms and big ones (counting is non-trivial: counts of 2-7 and more).
        area = self.shell.scene_polygon.area
        target = min(self.max_furniture, max(MIN_FURNITURE + 2, round(float(self.rng.uniform(0.45, 0.8)) * area)))
        fill_tries = 0
        while self.furniture_count < target and fill_tries < 60:
            room = self.shell.rooms[fill_tries % len(self.shell.rooms)]
            fillers = FILLERS[room.kind]
            self.try_group(fillers[int(self.rng.integers(0, len(fillers)))](self.rng), room, attempts=15)
            fill_tries += 1

    # --- small objects -------------------------------------------------------------------------------------------

    def _support_kind(self, obj: LaidObject) -> str | None:
        kind = FURNITURE.get(obj.label)
        return kind.support_kind if kind else None

    def _floor_of(self, room: str) -> int:
        return next(i for i, o in enumerate(self.objects) if o.label == "floor" and o.room == room)

    def _candidates(self, support: str) -> list[tuple[int, Polygon, float, float]]:
        """(object index, region polygon, base z, clear height or inf) where an item may rest."""
        out = []
        for i, obj in enumerate(self.objects):
            if obj.small or obj.structural:
                continue
            if support == "under":
                if obj.under_space is not None and obj.under_space[1] >= MIN_UNDER_HEIGHT:
                    out.append((i, obj.under_space[0], 0.0, obj.under_space[1]))
            elif self._support_kind(obj) == support:
                for part in obj.parts:
                    if part.surface:
                        out.append((i, part.box.footprint(), part.box.z_max, math.inf))
        return out

    def _open_edge(self, host: int, region: Polygon):
        """The stretch of a table's under-space outline one can look in from: away from walls and other furniture."""
        blockers = [self.shell.scene_polygon.exterior.buffer(CAMERA_CLEARANCE)]
        for i, obj in enumerate(self.objects):
            if i != host and not obj.small and not obj.structural:
                floor_parts = [p.box.footprint() for p in obj.parts if p.box.z_min <= 1e-9]
                if floor_parts:
                    blockers.append(shapely.union_all(floor_parts).buffer(0.05))
        edge = region.exterior.difference(shapely.union_all(blockers))
        return edge if not edge.is_empty else shapely.Point(1e9, 1e9)

    def _try_small(self, label: str, support: str, attempts: int = 25) -> bool:
        kind = SMALL_OBJECTS[label]
        size = draw_size(self.rng, (kind.width, kind.depth, kind.height), SMALL_SCALE)
        if support == "floor":
            return self._try_floor_small(label, size, attempts)
        cands = self._candidates(support)
        if not cands:
            return False
        for _ in range(attempts):
            idx, region, z0, clear = cands[int(self.rng.integers(0, len(cands)))]
            if size[2] >= clear - 0.02:
                continue
            surface_key = (idx, round(z0, 6))
            if self.items_on.get(surface_key, 0) >= max(1, int(region.area / 0.12)):
                continue  # spread items over surfaces instead of piling them on one nightstand
            host = self.objects[idx]
            yaw = host.yaw + float(self.rng.integers(0, 2)) * math.pi / 2 + float(self.rng.uniform(-0.35, 0.35))
            minx, miny, maxx, maxy = region.bounds
            center = (float(self.rng.uniform(minx, maxx)), float(self.rng.uniform(miny, maxy)), z0 + size[2] / 2)
            box = Box(center, size, yaw)
            if not region.buffer(-0.01).contains(box.footprint()):
                continue
            if support == "under" and self._open_edge(idx, region).distance(box.footprint()) > UNDER_EDGE:
                continue  # deep under a table, or behind its chairs, nobody would see it from eye height
            if interpenetrates(box, self.boxes):
                continue
            obj = LaidObject(label, [Part(box, "body", 1.0, False, False)], yaw, host.room, small=True)
            if support == "under":
                obj.support, obj.support_relation, obj.under = self._floor_of(host.room), "under", idx
            else:
                obj.support, obj.support_relation = idx, "on"
            self.objects.append(obj)
            self.boxes.append(box)
            self.items_on[surface_key] = self.items_on.get(surface_key, 0) + 1
            return True
        return False

    def _try_floor_small(self, label: str, size, attempts: int) -> bool:
        if not self.floor_footprints:
            return False
        furniture = shapely.union_all(self.floor_footprints)
        keep = shapely.union_all(self.shell.keep_out) if self.shell.keep_out else Polygon()
        for _ in range(attempts):
            room = self.shell.rooms[int(self.rng.integers(0, len(self.shell.rooms)))]
            minx, miny, maxx, maxy = room.polygon.bounds
            center = (float(self.rng.uniform(minx, maxx)), float(self.rng.uniform(miny, maxy)), size[2] / 2)
            box = Box(center, size, float(self.rng.uniform(-math.pi, math.pi)))
            fp = box.footprint()
            if not room.polygon.buffer(-0.02).contains(fp) or fp.intersects(keep):
                continue
            if fp.distance(furniture) > 0.3 or interpenetrates(box, self.boxes):
                continue
            obj = LaidObject(label, [Part(box, "body", 1.0, False, False)], box.yaw, room.name, small=True)
            obj.support, obj.support_relation = self._floor_of(room.name), "on"
            self.objects.append(obj)
            self.boxes.append(box)
            return True
        return False

    def scatter_small(self) -> None:
        """Distinct small-object labels (PinpointQA skips duplicated labels), signature placements first."""
        target = int(self.rng.integers(8, 17))
        used: set[str] = set()
        for label, support in SIGNATURE_PLACEMENTS:
            if self._try_small(label, support):
                used.add(label)
        labels = sorted(SMALL_OBJECTS)
        for k in self.rng.permutation(len(labels)):
            if len(used) >= target:
                break
            label = labels[int(k)]
            if label in used:
                continue
            supports = list(SMALL_OBJECTS[label].supports)
            for j in self.rng.permutation(len(supports)):
                if self._try_small(label, supports[int(j)]):
                    used.add(label)
                    break


def furnish(shell: Shell, rng: np.random.Generator) -> Layout:
    f = _Furnisher(shell, rng)
    f.furnish()
    f.scatter_small()
    free = _free_space(shell, f.floor_footprints)
    pieces = sorted(getattr(free, "geoms", [free]), key=lambda g: -g.area)
    return Layout(shell, f.objects, pieces[0])

