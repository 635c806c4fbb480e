"""A top-down plan of a question's room, as inline SVG, so a reviewer can check distance, direction and route answers.

Frames with boxes show that the objects exist; they cannot show how far apart
two objects are or on which side of an observer a third one lies. The plan
can: it draws, seen from above with x to the right and y up, the room's floor
polygon (``rooms``), every non-structural object's footprint (the floor shadow
of its oriented box, ``objects``), the camera path (``frames`` poses) with the
frames the question's budget samples and the frames the report shows, the
question's objects filled in their legend colours, and the geometry behind the
answer, read from the question's ``geometry`` column:

* distances: the segment between the closest points of the two boxes (the
  distance the answer measures, ``pipeline.geometry.distance``), labelled with
  the recorded distance; relative distance draws one per option, the answer's
  solid, the others dashed;
* relative direction: the observer at A's centre, the facing arrow (towards
  B's centre, or away from it for the backward types), the direction sectors
  of the question's bins (``pipeline.geometry.direction.MODES``, counter-
  clockwise from the facing direction), the answer's sector shaded, and the ray
  to C's centre with its angle;
* routes: the walked legs with arrow heads, the centre-to-centre route dotted,
  the facing arrow at the start and each turn with its signed angle.

The output is deterministic (coordinates printed at 0.1 px, objects and frames
in id order): the same tables give the same bytes.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import shapely

from pipeline.geometry.direction import MODES
from pipeline.geometry.distance import obb_closest_points
from pipeline.geometry.footprint import box_footprints
from pipeline.scene.parsed import OrientedBox

WIDTH = 400  # px, the plan's largest side
MARGIN = 18  # px around the drawing
MAX_PATH_POINTS = 600  # the camera path is thinned to this many poses (every k-th frame, and the last)
MAX_TICKS = 128  # budgets up to this many frames get a view tick per frame
FLOOR_FILL, FLOOR_STROKE = "#f3efe6", "#8a8170"
OBJECT_STROKE = "#aab0bc"
CAMERA = "#6b7488"


def _esc(x) -> str:
    return html.escape(str(x))


@dataclass
class ScenePlan:
    """What every plan of one scan draws: floor, footprints and camera poses (computed once per scan)."""

    rooms: list[tuple[str, object]]  # (kind, shapely geometry)
    boxes: dict[int, OrientedBox]
    labels: dict[int, str]
    structural: set[int]
    footprints: dict[int, np.ndarray]  # object id -> (k, 2) exterior ring
    camera_xy: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # frame -> (position, forward)

    def bounds(self) -> tuple[float, float, float, float] | None:
        xy = [np.asarray(geom.bounds, dtype=float).reshape(2, 2) for _, geom in self.rooms if not geom.is_empty]
        xy += [ring for obj, ring in self.footprints.items() if obj not in self.structural]
        xy += [np.asarray([p for p, _ in self.camera_xy.values()])] if self.camera_xy else []
        if not xy:
            return None
        allxy = np.vstack(xy)
        return float(allxy[:, 0].min()), float(allxy[:, 1].min()), float(allxy[:, 0].max()), float(allxy[:, 1].max())


def oriented_box(row: dict) -> OrientedBox:
    """One reading of an ``objects`` row's box for the plan and the answer checks, so both draw and measure the same box."""
    return OrientedBox(
        center=np.asarray(row["center"], dtype=float).reshape(3),
        extent=np.asarray(row["extent"], dtype=float).reshape(3),
        rotation=np.asarray(row["rotation"], dtype=float).reshape(3, 3),
    )


def scene_plan(objects: pl.DataFrame, rooms: pl.DataFrame, frames: pl.DataFrame) -> ScenePlan:
    """The drawable scene of one scan from its rows of ``objects``, ``rooms`` and ``frames`` (any may be empty)."""
    room_geoms = []
    if rooms.height and {"polygon_wkb", "room_id"} <= set(rooms.columns):
        for row in rooms.sort("room_id").iter_rows(named=True):
            if row["polygon_wkb"] is not None:
                room_geoms.append((str(row["kind"]), shapely.from_wkb(row["polygon_wkb"])))
    boxes, labels, structural = {}, {}, set()
    for row in objects.sort("object_id").iter_rows(named=True) if objects.height and "object_id" in objects.columns else []:
        obj = int(row["object_id"])
        boxes[obj] = oriented_box(row)
        labels[obj] = str(row.get("category") or row.get("raw_label") or "")
        if row.get("structural"):
            structural.add(obj)
    ids = sorted(boxes)
    hulls = box_footprints([boxes[i] for i in ids])
    footprints = {i: np.asarray(hull.exterior.coords, dtype=float) for i, hull in zip(ids, hulls)}
    plan = ScenePlan(room_geoms, boxes, labels, structural, footprints)
    if frames.height and {"pose", "frame_index"} <= set(frames.columns):
        valid = frames.filter(pl.col("valid").fill_null(True)) if "valid" in frames.columns else frames
        valid = valid.filter(pl.col("pose").list.len() == 16)
        if valid.height:
            poses = np.asarray(valid["pose"].to_list(), dtype=float).reshape(-1, 4, 4)  # one conversion per scan
            finite = np.all(np.isfinite(poses.reshape(-1, 16)), axis=1)
            forward = poses[:, :2, 2]
            norm = np.hypot(forward[:, 0], forward[:, 1])
            forward = np.where(norm[:, None] > 1e-9, forward / np.maximum(norm, 1e-9)[:, None], 0.0)
            for index, ok, position, ahead in zip(valid["frame_index"].to_list(), finite, poses[:, :2, 3], forward):
                if ok:
                    plan.camera_xy[int(index)] = (position, ahead)
    return plan


class _Map:
    """World xy (metres, y up) to SVG px (y down), fitted into WIDTH x WIDTH with MARGIN around."""

    def __init__(self, bounds: tuple[float, float, float, float]):
        x0, y0, x1, y1 = bounds
        dx, dy = max(x1 - x0, 0.5), max(y1 - y0, 0.5)
        self.scale = (WIDTH - 2 * MARGIN) / max(dx, dy)
        self.x0, self.y1 = x0, y0 + dy
        self.width = round(dx * self.scale + 2 * MARGIN)
        self.height = round(dy * self.scale + 2 * MARGIN) + 16  # room for the scale bar

    def xy(self, p) -> tuple[float, float]:
        return MARGIN + (float(p[0]) - self.x0) * self.scale, MARGIN + (self.y1 - float(p[1])) * self.scale

    def pt(self, p) -> str:
        x, y = self.xy(p)
        return f"{x:.1f},{y:.1f}"

    def points(self, ring) -> str:
        return " ".join(self.pt(p) for p in ring)


def _arrow_head(m: _Map, tail, tip, colour: str, size: float = 8.0) -> str:
    (x0, y0), (x1, y1) = m.xy(tail), m.xy(tip)
    length = math.hypot(x1 - x0, y1 - y0)
    if length < 1e-6:
        return ""
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    bx, by = x1 - ux * size, y1 - uy * size
    return (
        f'<polygon points="{x1:.1f},{y1:.1f} {bx - uy * size / 2:.1f},{by + ux * size / 2:.1f} '
        f'{bx + uy * size / 2:.1f},{by - ux * size / 2:.1f}" fill="{colour}"/>'
    )


def _line(m: _Map, a, b, colour: str, width: float = 2.0, dash: str = "") -> str:
    (x0, y0), (x1, y1) = m.xy(a), m.xy(b)
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{colour}" '
        f'stroke-width="{width}"{dash_attr}/>'
    )


def _text(m: _Map, p, text: str, colour: str = "#1d2330", size: int = 11, anchor: str = "middle", bold: bool = False,
          dx: float = 0.0, dy: float = 0.0) -> str:
    x, y = m.xy(p)
    weight = ' font-weight="700"' if bold else ""
    return (
        f'<text x="{x + dx:.1f}" y="{y + dy:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{colour}"{weight} '
        f'stroke="#fff" stroke-width="3" paint-order="stroke">{_esc(text)}</text>'
    )


def _centre(plan: ScenePlan, obj: int) -> np.ndarray:
    return np.asarray(plan.boxes[obj].center[:2], dtype=float)


# --- the geometry of each question kind --------------------------------------------------------------------------


def question_kind(geometry: dict) -> str:
    """"route", "direction", "distance", "rel_distance" or "" (objects highlighted only), from the audit record."""
    if "legs" in geometry and "goal_id" in geometry:
        return "route"
    if "angle_deg" in geometry and geometry.get("mode") in MODES:
        return "direction"
    if "option_distances_m" in geometry and "measured_to" in geometry:
        return "rel_distance"
    if "distance_m" in geometry:
        return "distance"
    return ""


def _direction_parts(plan: ScenePlan, used: list[int], geometry: dict, colours: dict[int, str]):
    """(extra points to fit, draw(m) -> svg, caption) for "standing by A, facing B (or away), where is C?"."""
    a, b, c = (_centre(plan, i) for i in used[:3])
    facing = (b - a) * (-1.0 if geometry.get("backward") else 1.0)
    norm = float(np.hypot(*facing))
    if norm < 1e-9:
        return None
    facing /= norm
    radius = max(float(np.hypot(*(c - a))) * 1.3, 1.0)  # C inside, the bin labels near the rim beyond it
    mode = MODES[geometry["mode"]]
    edges = [*mode.edges, 360.0]
    phi = math.degrees(math.atan2(facing[1], facing[0]))
    answer = geometry.get("correct")
    angle = float(geometry["angle_deg"])

    def at(deg: float, r: float) -> np.ndarray:
        t = math.radians(phi + deg)
        return a + r * np.array([math.cos(t), math.sin(t)])

    def draw(m: _Map) -> str:
        out = []
        for k, label in enumerate(mode.labels):
            lo, hi = edges[k], edges[k + 1]
            steps = max(2, int((hi - lo) / 5) + 1)
            arc = [at(lo + (hi - lo) * s / (steps - 1), radius) for s in range(steps)]
            fill = "#ffd75e" if label == answer else ("#dbe4f3" if k % 2 == 0 else "#eef2f9")
            opacity = "0.55" if label == answer else "0.45"
            out.append(f'<polygon class="sector" points="{m.points([a, *arc])}" fill="{fill}" fill-opacity="{opacity}" '
                       f'stroke="#8d97ab" stroke-width="0.8"><title>{_esc(label)}: {lo:g}° to {hi:g}°</title></polygon>')
            out.append(_text(m, at((lo + hi) / 2, radius * 0.93), label, "#39425a", 11, bold=label == answer))
        tip = at(0.0, radius * 0.55)
        if geometry.get("backward"):  # the line to B, then the facing arrow pointing away from it
            out.append(_line(m, a, b, "#555", 1.2, "4 3"))
        out.append(_line(m, a, tip, "#111", 2.6))
        out.append(_arrow_head(m, a, tip, "#111", 10))
        out.append(_text(m, tip, "facing" + (" away from B" if geometry.get("backward") else " B"), "#111", 10, dy=-6))
        ray_colour = colours.get(used[2], "#111")
        out.append(_line(m, a, c, ray_colour, 2.0, "6 3"))
        out.append(_text(m, (a + c) / 2, f"{angle:.0f}°", ray_colour, 11, bold=True, dy=-4))
        x, y = m.xy(a)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#111"/>')
        return "".join(out)

    names = geometry.get("names") or ["A", "B", "C"]
    caption = (
        f"Standing at the {names[0]}'s centre (black dot), facing {'away from' if geometry.get('backward') else 'towards'} "
        f"the {names[1]}'s centre (arrow); sectors: the {geometry['mode']} bins, counter-clockwise (left) from the facing "
        f"direction; the answer's sector is yellow; the {names[2]}'s centre lies at {angle:.1f}° "
        f"({geometry.get('boundary_margin_deg', 0):.1f}° from the nearest bin boundary)."
    )
    fit = [a + radius * np.array([math.cos(t), math.sin(t)]) for t in np.linspace(0, 2 * math.pi, 9)]
    return fit, draw, caption


def _distance_segment(plan: ScenePlan, first: int, second: int) -> tuple[np.ndarray, np.ndarray]:
    _, p, q = obb_closest_points(plan.boxes[first], plan.boxes[second])
    return np.asarray(p[:2], dtype=float), np.asarray(q[:2], dtype=float)


def _distance_parts(plan: ScenePlan, used: list[int], geometry: dict, colours: dict[int, str]):
    p, q = _distance_segment(plan, used[0], used[1])
    d = float(geometry["distance_m"])

    def draw(m: _Map) -> str:
        colour = "#111"  # not an object colour: the segment is the measurement, not an object
        out = [_line(m, p, q, colour, 2.6), _arrow_head(m, p, q, colour, 8), _arrow_head(m, q, p, colour, 8)]
        out.append(_text(m, (p + q) / 2, f"{d:.2f} m", colour, 12, bold=True, dy=-6))
        return "".join(out)

    names = geometry.get("names") or ["", ""]
    caption = (f"Black: the segment between the closest points of the {names[0]}'s and the {names[1]}'s boxes "
               f"(drawn from above; the answer is its 3D length, {d:.2f} m).")
    return [p, q], draw, caption


def _rel_distance_parts(plan: ScenePlan, used: list[int], geometry: dict, colours: dict[int, str]):
    anchor = used[0]
    measured = geometry["measured_to"]
    distances = geometry["option_distances_m"]
    answer = geometry.get("correct")
    segments = []
    for name in sorted(measured, key=lambda n: (distances.get(n, 0.0), n)):
        obj = int(measured[name])
        if obj in plan.boxes:
            segments.append((name, obj, *_distance_segment(plan, anchor, obj)))

    def draw(m: _Map) -> str:
        out = []
        for name, obj, p, q in segments:
            colour = colours.get(obj, "#333")
            solid = name == answer
            out.append(_line(m, p, q, colour, 2.8 if solid else 1.4, "" if solid else "5 3"))
            out.append(_text(m, (p + q) / 2, f"{float(distances.get(name, 0.0)):.2f} m", colour, 11, bold=solid, dy=-4))
        return "".join(out)

    caption = (f"From the {geometry.get('anchor', 'anchor')}: the closest-point segment to each option's nearest "
               f"visible instance, labelled with its distance; the answer's ({answer}) solid, the others dashed.")
    return [pt for _, _, p, q in segments for pt in (p, q)], draw, caption


def _route_parts(plan: ScenePlan, used: list[int], geometry: dict, colours: dict[int, str]):
    ids = [int(geometry["start_id"]), *[int(i) for i in geometry["waypoint_ids"]], int(geometry["goal_id"])]
    if any(i not in plan.boxes for i in ids + [int(geometry["facing_id"])]):
        return None
    centres = [_centre(plan, i) for i in ids]
    start, facing_to = centres[0], _centre(plan, int(geometry["facing_id"]))
    legs = [(np.asarray(leg["start_xy"], dtype=float), np.asarray(leg["end_xy"], dtype=float)) for leg in geometry["legs"]]
    turns = list(geometry.get("turns", []))
    angles = list(geometry.get("turn_angles_deg", []))

    def draw(m: _Map) -> str:
        out = [f'<polyline points="{m.points(centres)}" fill="none" stroke="#333" stroke-width="1.2" '
               f'stroke-dasharray="2 3"/>']
        direction = facing_to - start
        norm = float(np.hypot(*direction))
        if norm > 1e-9:
            tip = start + direction / norm * min(0.8, norm * 0.6)
            out += [_line(m, start, tip, "#111", 2.4), _arrow_head(m, start, tip, "#111", 9)]
        for k, (p, q) in enumerate(legs):
            out += [_line(m, p, q, "#1d2330", 2.6), _arrow_head(m, p, q, "#1d2330", 10)]
            out.append(_text(m, (p + q) / 2, f"leg {k + 1}", "#1d2330", 10, dy=12))
        for k, centre in enumerate(centres[1:-1]):
            if k < len(turns):
                out.append(_text(m, centre, f"{k + 1}. turn {turns[k]} ({angles[k]:+.0f}°)", "#1d2330", 11, bold=True,
                                 dy=-10))
        out.append(_text(m, start, "start", "#111", 11, bold=True, dy=16))
        out.append(_text(m, centres[-1], "goal", "#111", 11, bold=True, dy=16))
        return "".join(out)

    names = geometry.get("names") or []
    caption = (f"Route from the {names[0] if names else 'start'} (facing arrow: towards the "
               f"{names[1] if len(names) > 1 else 'facing object'}) through each stop to the goal: solid arrows are the "
               f"walked legs, the dotted line joins the objects' centres; each turn is labelled with its signed heading "
               f"change (counter-clockwise = left).")
    return [*centres, *(pt for leg in legs for pt in leg)], draw, caption


_KINDS = {"direction": _direction_parts, "distance": _distance_parts, "rel_distance": _rel_distance_parts,
          "route": _route_parts}


# --- the plan ------------------------------------------------------------------------------------------------------


def plan_svg(
    plan: ScenePlan,
    used: list[int],
    geometry: dict,
    colours: dict[int, str],
    budget_frames: list[int],
    shown_frames: list[int],
) -> tuple[str, str]:
    """(svg, caption) of one question's plan; ("", "") when the scan has nothing to draw."""
    bounds = plan.bounds()
    if bounds is None:
        return "", ""
    kind = question_kind(geometry)
    parts = None
    if kind and all(i in plan.boxes for i in used[: {"direction": 3, "distance": 2}.get(kind, 1)]):
        try:
            parts = _KINDS[kind](plan, used, geometry, colours)
        except (KeyError, IndexError, TypeError, ValueError):  # an audit record of another shape: highlight only
            parts = None
    if parts is not None:
        fit = np.asarray(parts[0], dtype=float).reshape(-1, 2)
        if fit.size:
            bounds = (min(bounds[0], fit[:, 0].min()), min(bounds[1], fit[:, 1].min()),
                      max(bounds[2], fit[:, 0].max()), max(bounds[3], fit[:, 1].max()))
    m = _Map(bounds)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plan" data-kind="{kind or "objects"}" width="{m.width}" '
           f'height="{m.height}" viewBox="0 0 {m.width} {m.height}" role="img" font-family="system-ui,sans-serif">'
           f'<rect width="{m.width}" height="{m.height}" fill="#fff"/>']
    for room_kind, geom in plan.rooms:
        for poly in getattr(geom, "geoms", [geom]):
            if poly.is_empty or not hasattr(poly, "exterior"):
                continue
            rings = [np.asarray(poly.exterior.coords), *(np.asarray(r.coords) for r in poly.interiors)]
            d = " ".join("M" + " L".join(m.pt(p) for p in ring) + "Z" for ring in rings)
            dash = ' stroke-dasharray="5 3"' if room_kind != "scene" else ""
            fill = FLOOR_FILL if room_kind == "scene" else "none"
            out.append(f'<path class="floor" d="{d}" fill="{fill}" fill-rule="evenodd" stroke="{FLOOR_STROKE}" '
                       f'stroke-width="1.5"{dash}><title>room: {_esc(room_kind)}</title></path>')
    highlighted = [i for i in dict.fromkeys(used) if i in plan.footprints]
    for obj, ring in plan.footprints.items():
        if obj in plan.structural or obj in colours:
            continue
        out.append(f'<polygon class="object" points="{m.points(ring)}" fill="#fafbfc" stroke="{OBJECT_STROKE}" '
                   f'stroke-width="0.8"><title>object {obj}: {_esc(plan.labels.get(obj, ""))}</title></polygon>')
    out.append(_camera_svg(m, plan, budget_frames, shown_frames))
    for obj in highlighted:
        colour = colours.get(obj, "#333")
        ring = plan.footprints[obj]
        out.append(f'<polygon class="object used" data-object="{obj}" points="{m.points(ring)}" '
                   f'fill="{colour}" fill-opacity="0.3" stroke="{colour}" stroke-width="2">'
                   f'<title>object {obj}: {_esc(plan.labels.get(obj, ""))}</title></polygon>')
        if float(np.ptp(ring, axis=0).max()) * m.scale < 10:  # a phone or a cup: a ring so it is seen at all
            x, y = m.xy(plan.boxes[obj].center[:2])
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" stroke="{colour}" stroke-width="1.6"/>')
    if parts is not None:
        out.append(parts[1](m))
    for obj in highlighted:
        out.append(_text(m, plan.boxes[obj].center[:2], str(obj), colours.get(obj, "#333"), 11, bold=True, dy=4))
    out.append(_scale_bar(m))
    out.append("</svg>")
    return "".join(out), (parts[2] if parts is not None else "")


def _camera_svg(m: _Map, plan: ScenePlan, budget_frames: list[int], shown_frames: list[int]) -> str:
    if not plan.camera_xy:
        return ""
    order = sorted(plan.camera_xy)
    step = max(1, math.ceil(len(order) / MAX_PATH_POINTS))
    path = order[::step] + ([order[-1]] if (len(order) - 1) % step else [])
    out = [f'<polyline class="camera-path" points="{m.points([plan.camera_xy[i][0] for i in path])}" fill="none" '
           f'stroke="{CAMERA}" stroke-width="1" stroke-opacity="0.8"/>']
    start = m.xy(plan.camera_xy[order[0]][0])
    out.append(f'<rect x="{start[0] - 3:.1f}" y="{start[1] - 3:.1f}" width="6" height="6" fill="{CAMERA}">'
               f'<title>camera path start (frame {order[0]})</title></rect>')
    # The budget's frames as one path of dots (and one of view ticks, up to MAX_TICKS frames): an all-frame budget
    # has thousands of frames, and one element per frame would make every plan hundreds of kilobytes.
    marked = [i for i in sorted(set(budget_frames)) if i in plan.camera_xy]
    if marked:
        dots = "".join(f"M{m.pt(plan.camera_xy[i][0])}h0" for i in marked)
        out.append(f'<path class="budget-frames" d="{dots}" stroke="#2b3550" stroke-width="4.4" stroke-linecap="round">'
                   f'<title>the {len(marked)} frames of the budget</title></path>')
        if len(marked) <= MAX_TICKS:
            tick = 12.0 / m.scale  # 12 px in metres
            ticks = "".join(
                f"M{m.pt(plan.camera_xy[i][0])}L{m.pt(plan.camera_xy[i][0] + plan.camera_xy[i][1] * tick)}" for i in marked
            )
            out.append(f'<path class="view-ticks" d="{ticks}" stroke="#2b3550" stroke-width="1" fill="none"/>')
    for i in sorted(set(shown_frames)):
        if i not in plan.camera_xy:
            continue
        x, y = m.xy(plan.camera_xy[i][0])
        out.append(f'<circle class="shown-frame" cx="{x:.1f}" cy="{y:.1f}" r="5" fill="none" stroke="#000" '
                   f'stroke-width="1.6"><title>frame {i} (shown)</title></circle>')
        out.append(f'<text x="{x + 7:.1f}" y="{y - 5:.1f}" font-size="9" fill="#000" stroke="#fff" stroke-width="2.5" '
                   f'paint-order="stroke">f{i}</text>')
    return "".join(out)


def _scale_bar(m: _Map) -> str:
    metres = next((s for s in (0.5, 1, 2, 5, 10, 20, 50) if s * m.scale >= 50), 100)
    length = metres * m.scale
    y = m.height - 10
    return (f'<line class="scale" x1="{MARGIN}" y1="{y}" x2="{MARGIN + length:.1f}" y2="{y}" stroke="#1d2330" '
            f'stroke-width="2"/><text x="{MARGIN + length + 4:.1f}" y="{y + 4}" font-size="10" fill="#1d2330">'
            f'{metres:g} m</text>')
