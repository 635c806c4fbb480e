"""Furniture built from parts, so that "under the table" and "on the second shelf board" are real geometry.

A builder takes an instance's overall width (local x), depth (local y) and
height and returns its parts in the object's local frame: origin at the centre
of the footprint on the surface it stands on, z up, front facing local +y.
Parts that carry things (a table top, a sofa cushion, a shelf board) are marked
as surfaces; tables and desks also say where there is room beneath them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.synth.boxes import Box, box_from_bounds


@dataclass(frozen=True)
class Part:
    box: Box
    name: str
    shade: float = 1.0  # multiplies the category colour (legs darker than a top, ...)
    surface: bool = False  # small objects may rest on its top face
    rests_on_floor: bool = False  # bottom face touches the floor: not meshed, as a scan never sees it


@dataclass(frozen=True)
class Build:
    parts: list[Part]
    # (x0, y0, x1, y1, clear height) in local coordinates: free floor under the object
    under: tuple[float, float, float, float, float] | None = None
    extra: dict = field(default_factory=dict)


def _part(name, x0, y0, z0, x1, y1, z1, shade=1.0, surface=False) -> Part:
    return Part(box_from_bounds(x0, y0, z0, x1, y1, z1), name, shade, surface, rests_on_floor=abs(z0) < 1e-12)


def _legs(w, d, z1, leg, inset=0.03, shade=0.8) -> list[Part]:
    xs = (-w / 2 + inset, w / 2 - inset - leg)
    ys = (-d / 2 + inset, d / 2 - inset - leg)
    return [_part(f"leg{i}", x, y, 0.0, x + leg, y + leg, z1, shade) for i, (x, y) in enumerate((a, b) for a in xs for b in ys)]


def table(w, d, h) -> Build:
    top = 0.04
    leg = 0.05
    parts = [_part("top", -w / 2, -d / 2, h - top, w / 2, d / 2, h, surface=True), *_legs(w, d, h - top, leg)]
    inner = 0.03 + leg
    return Build(parts, under=(-w / 2 + inner, -d / 2 + inner, w / 2 - inner, d / 2 - inner, h - top))


def desk(w, d, h) -> Build:
    top, side = 0.03, 0.03
    parts = [
        _part("top", -w / 2, -d / 2, h - top, w / 2, d / 2, h, surface=True),
        _part("side_left", -w / 2, -d / 2, 0.0, -w / 2 + side, d / 2, h - top, 0.85),
        _part("side_right", w / 2 - side, -d / 2, 0.0, w / 2, d / 2, h - top, 0.85),
        _part("modesty", -w / 2 + side, -d / 2, 0.25, w / 2 - side, -d / 2 + 0.02, h - top, 0.9),
    ]
    return Build(parts, under=(-w / 2 + side, -d / 2 + 0.02, w / 2 - side, d / 2, h - top))


def chair(w, d, h) -> Build:
    seat_h, seat_t, leg = 0.46, 0.04, 0.035
    parts = [
        *_legs(w, d, seat_h - seat_t, leg, inset=0.01, shade=0.75),
        _part("seat", -w / 2, -d / 2, seat_h - seat_t, w / 2, d / 2, seat_h, surface=True),
        _part("back", -w / 2, -d / 2, seat_h, w / 2, -d / 2 + 0.04, h, 0.9),
    ]
    return Build(parts)


def stool(w, d, h) -> Build:
    seat_t, leg = 0.04, 0.035
    parts = [*_legs(w, d, h - seat_t, leg, inset=0.01, shade=0.75), _part("seat", -w / 2, -d / 2, h - seat_t, w / 2, d / 2, h, surface=True)]
    return Build(parts)


def office_chair(w, d, h) -> Build:
    seat_h = 0.48
    s = min(w, d) * 0.8
    parts = [
        _part("base", -w / 2, -d / 2, 0.0, w / 2, d / 2, 0.06, 0.6),
        _part("post", -0.03, -0.03, 0.06, 0.03, 0.03, seat_h - 0.08, 0.5),
        _part("seat", -s / 2, -s / 2, seat_h - 0.08, s / 2, s / 2, seat_h, surface=True),
        _part("back", -s / 2, -s / 2 - 0.05, seat_h, s / 2, -s / 2, h, 0.9),
    ]
    return Build(parts)


def sofa(w, d, h) -> Build:
    base_h, seat_h, back_d, arm_w, arm_h = 0.25, 0.43, 0.2, min(0.16, w * 0.12), 0.62
    parts = [
        _part("base", -w / 2, -d / 2, 0.0, w / 2, d / 2, base_h, 0.8),
        _part("back", -w / 2, -d / 2, base_h, w / 2, -d / 2 + back_d, h),
        _part("arm_left", -w / 2, -d / 2 + back_d, base_h, -w / 2 + arm_w, d / 2, arm_h, 0.95),
        _part("arm_right", w / 2 - arm_w, -d / 2 + back_d, base_h, w / 2, d / 2, arm_h, 0.95),
        _part("cushion", -w / 2 + arm_w, -d / 2 + back_d, base_h, w / 2 - arm_w, d / 2, seat_h, 1.1, surface=True),
    ]
    return Build(parts)


def bed(w, d, h) -> Build:
    frame_h, mattress_h, head_d = 0.3, 0.22, 0.06
    parts = [
        _part("frame", -w / 2, -d / 2 + head_d, 0.0, w / 2, d / 2, frame_h, 0.7),
        _part("mattress", -w / 2 + 0.02, -d / 2 + head_d, frame_h, w / 2 - 0.02, d / 2 - 0.03, frame_h + mattress_h, 1.3, surface=True),
        _part("headboard", -w / 2, -d / 2, 0.0, w / 2, -d / 2 + head_d, h, 0.8),
    ]
    return Build(parts)


def body(w, d, h) -> Build:
    """A closed carcass (cabinet, dresser, nightstand, fridge, ...) whose top may carry things."""
    plinth = 0.06
    parts = [
        _part("plinth", -w / 2 + 0.02, -d / 2 + 0.02, 0.0, w / 2 - 0.02, d / 2 - 0.04, plinth, 0.6),
        _part("body", -w / 2, -d / 2, plinth, w / 2, d / 2, h, surface=True),
    ]
    return Build(parts)


def solid(w, d, h) -> Build:
    return Build([_part("body", -w / 2, -d / 2, 0.0, w / 2, d / 2, h)])


def shelf_unit(w, d, h, boards: int) -> Build:
    side, board, back = 0.02, 0.02, 0.01
    parts = [
        _part("side_left", -w / 2, -d / 2, 0.0, -w / 2 + side, d / 2, h, 0.85),
        _part("side_right", w / 2 - side, -d / 2, 0.0, w / 2, d / 2, h, 0.85),
        _part("back", -w / 2 + side, -d / 2, 0.0, w / 2 - side, -d / 2 + back, h, 0.7),
    ]
    for i in range(boards):
        z0 = 0.05 + i * (h - 0.05 - board) / (boards - 1)
        parts.append(_part(f"board{i}", -w / 2 + side, -d / 2 + back, z0, w / 2 - side, d / 2, z0 + board, surface=True))
    return Build(parts)


def bookshelf(w, d, h) -> Build:
    return shelf_unit(w, d, h, boards=5)


def shelf(w, d, h) -> Build:
    return shelf_unit(w, d, h, boards=3)


def screen(w, d, h) -> Build:
    """A tv or monitor: foot, neck and a thin panel."""
    foot_h, neck_h = 0.02, min(0.12, h * 0.2)
    panel_d = 0.05
    parts = [
        _part("foot", -w * 0.18, -d / 2, 0.0, w * 0.18, d / 2, foot_h, 0.6),
        _part("neck", -0.03, -0.02, foot_h, 0.03, 0.02, foot_h + neck_h, 0.6),
        _part("panel", -w / 2, -panel_d / 2, foot_h + neck_h, w / 2, panel_d / 2, h),
    ]
    return Build(parts)


def toilet(w, d, h) -> Build:
    tank_d = 0.18
    parts = [
        _part("bowl", -w * 0.45, -d / 2 + tank_d, 0.0, w * 0.45, d / 2, 0.4),
        _part("tank", -w / 2, -d / 2, 0.0, w / 2, -d / 2 + tank_d, h, 0.97, surface=True),
    ]
    return Build(parts)


def bathtub(w, d, h) -> Build:
    t = 0.06
    parts = [
        _part("bottom", -w / 2, -d / 2, 0.0, w / 2, d / 2, t),
        _part("wall_left", -w / 2, -d / 2, t, -w / 2 + t, d / 2, h),
        _part("wall_right", w / 2 - t, -d / 2, t, w / 2, d / 2, h),
        _part("wall_back", -w / 2 + t, -d / 2, t, w / 2 - t, -d / 2 + t, h),
        _part("wall_front", -w / 2 + t, d / 2 - t, t, w / 2 - t, d / 2, h),
    ]
    return Build(parts)


def floor_lamp(w, d, h) -> Build:
    shade_h = 0.3
    parts = [
        _part("base", -w / 2, -d / 2, 0.0, w / 2, d / 2, 0.03, 0.5),
        _part("pole", -0.015, -0.015, 0.03, 0.015, 0.015, h - shade_h, 0.5),
        _part("shade", -w / 2, -d / 2, h - shade_h, w / 2, d / 2, h),
    ]
    return Build(parts)


def table_lamp(w, d, h) -> Build:
    shade_h = min(0.2, h * 0.45)
    parts = [
        _part("base", -w * 0.3, -d * 0.3, 0.0, w * 0.3, d * 0.3, 0.03, 0.5),
        _part("pole", -0.012, -0.012, 0.03, 0.012, 0.012, h - shade_h, 0.5),
        _part("shade", -w / 2, -d / 2, h - shade_h, w / 2, d / 2, h),
    ]
    return Build(parts)


def plant(w, d, h) -> Build:
    pot = min(0.35, w * 0.6)
    pot_h = min(0.35, h * 0.35)
    parts = [
        _part("pot", -pot / 2, -pot / 2, 0.0, pot / 2, pot / 2, pot_h, 0.55),
        _part("foliage", -w / 2, -d / 2, pot_h, w / 2, d / 2, h),
    ]
    return Build(parts)


def sink(w, d, h) -> Build:
    parts = [
        _part("vanity", -w / 2, -d / 2, 0.0, w / 2, d / 2, h - 0.04, 0.85),
        _part("basin", -w / 2, -d / 2, h - 0.04, w / 2, d / 2, h, surface=True),
    ]
    return Build(parts)


BUILDERS: dict[str, Callable[[float, float, float], Build]] = {
    "bed": bed,
    "nightstand": body,
    "sofa": sofa,
    "armchair": sofa,
    "chair": chair,
    "office chair": office_chair,
    "stool": stool,
    "table": table,
    "dining table": table,
    "coffee table": table,
    "end table": table,
    "desk": desk,
    "tv": screen,
    "tv stand": body,
    "monitor": screen,
    "bookshelf": bookshelf,
    "shelf": shelf,
    "cabinet": body,
    "kitchen cabinet": body,
    "counter": body,
    "wardrobe": solid,
    "dresser": body,
    "refrigerator": solid,
    "toilet": toilet,
    "sink": sink,
    "bathtub": bathtub,
    "trash can": solid,
    "lamp": floor_lamp,
    "table lamp": table_lamp,
    "plant": plant,
}
