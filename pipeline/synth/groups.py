"""Furniture arrangements people actually make: chairs around a table, nightstands beside a bed, a tv facing a
sofa, a desk with its office chair and monitor.

A group is laid out in its own frame: origin on the wall line (or the group
centre for free-standing groups), +x along the wall, +y into the room. Members
standing on another member (a tv on its stand) name it with ``on``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.synth.vocabulary import FURNITURE, draw_size

WALL_GAP = 0.01


@dataclass(frozen=True)
class Member:
    label: str
    size: tuple[float, float, float]
    x: float
    y: float
    yaw: float = 0.0
    on: int | None = None  # index of the member whose top it stands on


@dataclass(frozen=True)
class Group:
    members: list[Member]
    against_wall: bool


GroupMaker = Callable[[np.random.Generator], Group]


def sample_size(rng: np.random.Generator, label: str) -> tuple[float, float, float]:
    kind = FURNITURE[label]
    return draw_size(rng, (kind.width, kind.depth, kind.height))


def _wall_item(label: str) -> Callable[[np.random.Generator], Group]:
    def make(rng: np.random.Generator) -> Group:
        w, d, h = sample_size(rng, label)
        return Group([Member(label, (w, d, h), 0.0, d / 2 + WALL_GAP)], True)

    return make


def _free_item(label: str) -> Callable[[np.random.Generator], Group]:
    def make(rng: np.random.Generator) -> Group:
        return Group([Member(label, sample_size(rng, label), 0.0, 0.0, float(rng.uniform(-0.3, 0.3)))], False)

    return make


def bed_group(rng: np.random.Generator) -> Group:
    bw, bd, bh = sample_size(rng, "bed")
    members = [Member("bed", (bw, bd, bh), 0.0, bd / 2 + WALL_GAP)]
    sides = (-1, 1) if rng.random() < 0.75 else ((-1,) if rng.random() < 0.5 else (1,))
    for side in sides:
        nw, nd, nh = sample_size(rng, "nightstand")
        members.append(Member("nightstand", (nw, nd, nh), side * (bw / 2 + nw / 2 + 0.06), nd / 2 + WALL_GAP))
        if rng.random() < 0.6:
            lw, ld, lh = sample_size(rng, "table lamp")
            stand = len(members) - 1
            members.append(Member("table lamp", (lw, ld, lh), side * (bw / 2 + nw / 2 + 0.06) - side * (nw - lw) / 2 * 0.6, ld / 2 + WALL_GAP + 0.03, on=stand))
    return Group(members, True)


def sofa_group(rng: np.random.Generator) -> Group:
    sw, sd, sh = sample_size(rng, "sofa")
    members = [Member("sofa", (sw, sd, sh), 0.0, sd / 2 + WALL_GAP)]
    cw, cd, ch = sample_size(rng, "coffee table")
    cy = sd + WALL_GAP + float(rng.uniform(0.35, 0.5)) + cd / 2
    members.append(Member("coffee table", (cw, cd, ch), 0.0, cy))
    if rng.random() < 0.85:
        tw, td, th = sample_size(rng, "tv stand")
        ty = sd + WALL_GAP + float(rng.uniform(2.0, 2.6)) + td / 2
        members.append(Member("tv stand", (tw, td, th), 0.0, ty, math.pi))
        vw, vd, vh = sample_size(rng, "tv")
        members.append(Member("tv", (min(vw, tw - 0.1), vd, vh), 0.0, ty, math.pi, on=len(members) - 1))
    return Group(members, True)


def desk_group(rng: np.random.Generator) -> Group:
    dw, dd, dh = sample_size(rng, "desk")
    members = [Member("desk", (dw, dd, dh), 0.0, dd / 2 + WALL_GAP)]
    ow, od, oh = sample_size(rng, "office chair")
    members.append(Member("office chair", (ow, od, oh), float(rng.uniform(-0.1, 0.1)), dd + WALL_GAP + 0.12 + od / 2, math.pi))
    mw, md, mh = sample_size(rng, "monitor")
    mw = min(mw, dw - 0.1)  # a monitor no wider than the desk it stands on
    monitors = 2 if (2 * mw + 0.04 < dw - 0.1 and rng.random() < 0.4) else 1
    for k in range(monitors):
        x = 0.0 if monitors == 1 else (k - 0.5) * (mw + 0.04)
        members.append(Member("monitor", (mw, md, mh), x, WALL_GAP + 0.04 + md / 2, on=0))
    return Group(members, True)


def dining_group(rng: np.random.Generator, label: str = "dining table") -> Group:
    tw, td, th = sample_size(rng, label)
    members = [Member(label, (tw, td, th), 0.0, 0.0)]
    cw, cd, ch = sample_size(rng, "chair")
    per_side = max(1, min(3, int((tw - 0.1) // (cw + 0.12))))
    per_side = int(rng.integers(1, per_side + 1))
    xs = [(-0.5 + (k + 0.5) / per_side) * (tw - 0.1) for k in range(per_side)]
    for side, yaw in ((1, math.pi), (-1, 0.0)):
        for x in xs:
            members.append(Member("chair", (cw, cd, ch), x, side * (td / 2 + cd / 2 + 0.06), yaw))
    if rng.random() < 0.4:
        for side, yaw in ((1, math.pi / 2), (-1, -math.pi / 2)):
            members.append(Member("chair", (cw, cd, ch), side * (tw / 2 + cd / 2 + 0.06), 0.0, yaw))
    return Group(members, False)


def kitchen_row(rng: np.random.Generator) -> Group:
    return wall_row("kitchen cabinet", 2, 6, gap=0.005, same_size=True)(rng)


def wall_row(label: str, lo: int, hi: int, gap: float = 0.04, same_size: bool = False) -> GroupMaker:
    """``lo``..``hi`` pieces of one category side by side along a wall (a run of shelves, cabinets, plants).

    Real rooms repeat categories this way, and counting questions need counts
    beyond 1-2 in small rooms too; a run that does not fit a wall is not placed.
    """

    def make(rng: np.random.Generator) -> Group:
        n = int(rng.integers(lo, hi + 1))
        first = sample_size(rng, label)
        sizes = [first if same_size or k == 0 else sample_size(rng, label) for k in range(n)]
        total = sum(w for w, _, _ in sizes) + gap * (n - 1)
        members, x = [], -total / 2
        for w, d, h in sizes:
            members.append(Member(label, (w, d, h), x + w / 2, d / 2 + WALL_GAP))
            x += w + gap
        return Group(members, True)

    return make


def meeting_group(rng: np.random.Generator) -> Group:
    """One to three tables end to end with chairs down both long sides and sometimes at the ends (2-14 chairs)."""
    tables = int(rng.integers(1, 4))
    tw, td, th = sample_size(rng, "table")
    members = [Member("table", (tw, td, th), (k - (tables - 1) / 2) * (tw + 0.005), 0.0) for k in range(tables)]
    cw, cd, ch = sample_size(rng, "chair")
    fits = max(1, min(2, int((tw - 0.1) // (cw + 0.12))))
    per_table = int(rng.integers(1, fits + 1))
    for k in range(tables):
        centre = (k - (tables - 1) / 2) * (tw + 0.005)
        for j in range(per_table):
            x = centre + (-0.5 + (j + 0.5) / per_table) * (tw - 0.1)
            for side, yaw in ((1, math.pi), (-1, 0.0)):
                members.append(Member("chair", (cw, cd, ch), x, side * (td / 2 + cd / 2 + 0.06), yaw))
    if rng.random() < 0.5:
        half = tables * (tw + 0.005) / 2
        for side, yaw in ((1, math.pi / 2), (-1, -math.pi / 2)):
            members.append(Member("chair", (cw, cd, ch), side * (half + cd / 2 + 0.06), 0.0, yaw))
    return Group(members, False)


def chair_rows(rng: np.random.Generator) -> Group:
    """Rows of chairs facing one way (a seminar room, a waiting area): 2-4 rows of 2-7, so a category can count 4 to
    28 in one room, as real classrooms and offices do; a block that leaves no walkable path is not placed."""
    rows, cols = int(rng.integers(2, 5)), int(rng.integers(2, 8))
    cw, cd, ch = sample_size(rng, "chair")
    pitch_x, pitch_y = cw + float(rng.uniform(0.08, 0.25)), cd + float(rng.uniform(0.4, 0.6))
    members = [
        Member("chair", (cw, cd, ch), (c - (cols - 1) / 2) * pitch_x, (r - (rows - 1) / 2) * pitch_y, math.pi)
        for r in range(rows)
        for c in range(cols)
    ]
    return Group(members, False)


def counter_group(rng: np.random.Generator) -> Group:
    """A counter against the wall with one to four stools in front of it."""
    kw, kd, kh = sample_size(rng, "counter")
    members = [Member("counter", (kw, kd, kh), 0.0, kd / 2 + WALL_GAP)]
    sw, sd, sh = sample_size(rng, "stool")
    n = int(rng.integers(1, max(1, min(4, int(kw // (sw + 0.15)))) + 1))
    for k in range(n):
        members.append(Member("stool", (sw, sd, sh), (-0.5 + (k + 0.5) / n) * (kw - 0.2), kd + WALL_GAP + 0.1 + sd / 2))
    return Group(members, True)


def sink_group(rng: np.random.Generator) -> Group:
    return _wall_item("sink")(rng)


def armchair_pair(rng: np.random.Generator) -> Group:
    aw, ad, ah = sample_size(rng, "armchair")
    ew, ed, eh = sample_size(rng, "end table")
    members = [Member("armchair", (aw, ad, ah), -(aw + ew) / 2 - 0.05, ad / 2 + WALL_GAP), Member("end table", (ew, ed, eh), 0.0, ed / 2 + WALL_GAP)]
    if rng.random() < 0.5:
        members.append(Member("armchair", (aw, ad, ah), (aw + ew) / 2 + 0.05, ad / 2 + WALL_GAP))
    return Group(members, True)


# room kind -> list of (maker, how many: (min, max), probability of appearing at all); the count's upper end
# grows with the room's floor area (``pipeline.synth.layout.repeats``), so big rooms repeat categories more.
RECIPES: dict[str, list[tuple[GroupMaker, tuple[int, int], float]]] = {
    "bedroom": [
        (bed_group, (1, 1), 1.0),
        (_wall_item("wardrobe"), (1, 2), 0.8),
        (_wall_item("dresser"), (1, 1), 0.6),
        (desk_group, (1, 1), 0.5),
        (wall_row("bookshelf", 1, 3), (1, 1), 0.4),
        (wall_row("shelf", 1, 3), (1, 1), 0.5),
        (wall_row("plant", 1, 3), (1, 2), 0.6),
        (_wall_item("trash can"), (1, 2), 0.6),
        (_wall_item("lamp"), (1, 2), 0.4),
        (wall_row("chair", 1, 2), (1, 2), 0.5),
    ],
    "living": [
        (sofa_group, (1, 1), 1.0),
        (armchair_pair, (1, 2), 0.7),
        (wall_row("bookshelf", 1, 4), (1, 2), 0.7),
        (wall_row("shelf", 1, 3), (1, 2), 0.6),
        (wall_row("plant", 1, 4), (1, 3), 0.8),
        (_wall_item("lamp"), (1, 4), 0.6),
        (wall_row("cabinet", 1, 3), (1, 1), 0.5),
        (dining_group, (1, 1), 0.5),
        (chair_rows, (1, 1), 0.3),
        (wall_row("chair", 2, 5), (1, 1), 0.3),
        (_wall_item("trash can"), (1, 2), 0.3),
    ],
    "office": [
        (desk_group, (1, 8), 1.0),
        (wall_row("bookshelf", 1, 4), (1, 2), 0.8),
        (wall_row("cabinet", 1, 4), (1, 2), 0.8),
        (wall_row("shelf", 1, 3), (1, 1), 0.6),
        (_wall_item("trash can"), (1, 4), 0.8),
        (wall_row("plant", 1, 3), (1, 2), 0.6),
        (meeting_group, (1, 1), 0.6),
        (chair_rows, (1, 2), 0.5),
        (wall_row("chair", 2, 6), (1, 1), 0.4),
    ],
    "kitchen": [
        (kitchen_row, (1, 2), 1.0),
        (_wall_item("refrigerator"), (1, 1), 0.9),
        (counter_group, (1, 1), 0.6),
        (sink_group, (1, 1), 0.8),
        (dining_group, (1, 1), 1.0),
        (_wall_item("trash can"), (1, 2), 0.9),
        (wall_row("shelf", 1, 3), (1, 1), 0.5),
        (_free_item("stool"), (1, 3), 0.3),
    ],
    "bathroom": [
        (_wall_item("toilet"), (1, 1), 1.0),
        (sink_group, (1, 2), 1.0),
        (_wall_item("bathtub"), (1, 1), 0.8),
        (_wall_item("trash can"), (1, 1), 0.8),
        (wall_row("shelf", 1, 3), (1, 1), 0.4),
        (wall_row("cabinet", 1, 2), (1, 1), 0.3),
    ],
}

# Extra runs tried when a scene is still short of furniture, so categories repeat (counts of 2-7 and more).
FILLERS: dict[str, list[GroupMaker]] = {
    "bedroom": [wall_row("chair", 1, 3), wall_row("plant", 1, 4), wall_row("shelf", 1, 3), _wall_item("nightstand"), _wall_item("trash can"), _wall_item("lamp")],
    "living": [wall_row("chair", 1, 4), wall_row("plant", 1, 4), _wall_item("end table"), _free_item("armchair"), wall_row("shelf", 1, 3), _wall_item("lamp")],
    "office": [wall_row("chair", 1, 5), _wall_item("trash can"), wall_row("plant", 1, 3), wall_row("cabinet", 1, 4), desk_group, wall_row("bookshelf", 1, 3), chair_rows],
    "kitchen": [_free_item("stool"), wall_row("chair", 1, 3), _wall_item("trash can"), wall_row("plant", 1, 3), wall_row("cabinet", 1, 3)],
    "bathroom": [_wall_item("trash can"), wall_row("shelf", 1, 2), _wall_item("plant")],
}
