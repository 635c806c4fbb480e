"""Beside each sample question of the report, the facts its answer follows from, read from the released tables.

A reviewer signs a question off by checking its answer against the scan, not
by trusting the generator's own record: so each fact here is read or computed
again from the tables the release ships (``objects`` boxes and categories,
``rooms`` areas, ``object_visibility`` first appearances, the pinpoint
audit record for mesh distances the release keeps no mesh for), and shown in
the order that makes the answer plain (appearance order: first appearances in
time order; relative distance: options by distance). Every fact also carries
``data-*`` attributes, so a test can compare what the page shows with the
answer for every question type (``tests/test_report_answer_checks.py``).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.geometry.direction import MODES
from pipeline.geometry.distance import obb_closest_points
from pipeline.release.plan_view import oriented_box, question_kind


def _esc(x) -> str:
    return html.escape(str(x))


@dataclass
class ScanFacts:
    """What the checks of one scan's questions read: its objects, rooms and per-budget first appearances."""

    objects: dict[int, dict] = field(default_factory=dict)  # object id -> its objects row
    room_areas: dict[str, tuple[float, str]] = field(default_factory=dict)  # kind -> (area m², source)
    first_seen: dict[tuple[str, int], tuple[int | None, float]] = field(default_factory=dict)  # (budget, object) -> (frame, s)
    neighbours: dict[tuple[int, int], tuple[float, str]] = field(default_factory=dict)  # (target, neighbour) -> (m, relation)
    neighbour_labels: dict[tuple[int, int], str] = field(default_factory=dict)  # the label pinpoint questions use

    def label(self, obj: int) -> str:
        return str((self.objects.get(obj) or {}).get("category") or "")


def scan_facts(
    objects: pl.DataFrame, rooms: pl.DataFrame, object_visibility: pl.DataFrame, neighbours: pl.DataFrame | None = None
) -> ScanFacts:
    """``ScanFacts`` of one scan from its rows of ``objects``, ``rooms``, ``object_visibility`` and
    ``pinpoint_neighbors`` (any may be empty)."""
    facts = ScanFacts()
    if objects.height and "object_id" in objects.columns:
        facts.objects = {int(r["object_id"]): r for r in objects.sort("object_id").iter_rows(named=True)}
    if rooms.height and {"kind", "area_m2"} <= set(rooms.columns):
        for r in rooms.sort("room_id").iter_rows(named=True):  # the first room of a kind, as the questions read it
            if r["area_m2"] is not None and r["kind"] not in facts.room_areas:
                facts.room_areas[str(r["kind"])] = (float(r["area_m2"]), str(r.get("source") or ""))
    if object_visibility.height and "first_timestamp" in object_visibility.columns:
        seen = object_visibility.filter(pl.col("visible").fill_null(False) & pl.col("first_timestamp").is_not_null())
        for r in seen.iter_rows(named=True):
            facts.first_seen[(str(r["budget"]), int(r["object_id"]))] = (r["first_frame"], float(r["first_timestamp"]))
    if neighbours is not None and neighbours.height and "shortest_distance" in neighbours.columns:
        for r in neighbours.iter_rows(named=True):
            facts.neighbours[(int(r["target_id"]), int(r["neighbor_id"]))] = (float(r["shortest_distance"]),
                                                                             str(r["relation"] or ""))
            facts.neighbour_labels[(int(r["target_id"]), int(r["neighbor_id"]))] = str(r["neighbor_label"] or "")
    return facts


def first_appearances(row: dict, facts: ScanFacts) -> list[tuple[str, int, int | None, float]]:
    """Each category an appearance-order question names, at its first appearance under the question's budget:
    (category, object, frame, seconds) in time order. A category's first appearance is its earliest visible
    instance's, as the answer takes it (``pipeline.qa.appearance``)."""
    firsts: dict[str, tuple[float, int, int | None]] = {}
    for obj in row["used_obj_ids"] or []:
        seen = facts.first_seen.get((str(row["budget"]), int(obj)))
        if seen is None:
            continue
        category = facts.label(int(obj))
        frame, seconds = seen
        if category not in firsts or (seconds, int(obj)) < firsts[category][:2]:
            firsts[category] = (seconds, int(obj), frame)
    return sorted(((c, o, f, s) for c, (s, o, f) in firsts.items()), key=lambda t: (t[3], t[0]))


def _li(text: str, **data) -> str:
    attrs = "".join(f' data-{name.replace("_", "-")}="{_esc(value)}"' for name, value in data.items())
    return f"<li{attrs}>{_esc(text)}</li>"


def _metres(facts: ScanFacts, first: int, second: int) -> float | None:
    if first not in facts.objects or second not in facts.objects:
        return None
    distance, _, _ = obb_closest_points(oriented_box(facts.objects[first]), oriented_box(facts.objects[second]))
    return float(distance)


def _named(facts: ScanFacts, obj: int) -> str:
    label = facts.label(obj)
    return f"object {obj}" + (f" ({label})" if label else "")


def _appearance(row, geometry, facts):
    firsts = first_appearances(row, facts)
    if not firsts:  # no first appearance in the released tables: the question's own record
        recorded = sorted((geometry.get("first_seen_s") or {}).items(), key=lambda kv: (kv[1], kv[0]))
        return "Order of first appearance (as recorded by the generator)", [
            _li(f"{k + 1}. {c}: first seen at {s:.1f} s", category=c, first_seen_s=f"{s:.3f}")
            for k, (c, s) in enumerate(recorded)
        ]
    return f"Order of first appearance in the budget-{row['budget']} frames", [
        _li(f"{k + 1}. {c}: first seen at {s:.1f} s" + (f" (frame {f}, object {o})" if f is not None else f" (object {o})"),
            category=c, first_seen_s=f"{s:.3f}", frame="" if f is None else f, object=o)
        for k, (c, o, f, s) in enumerate(firsts)
    ]


def _counting(row, geometry, facts):
    used = [int(i) for i in row["used_obj_ids"] or []]
    by_category: dict[str, list[int]] = {}
    for obj in used:
        by_category.setdefault(facts.label(obj), []).append(obj)
    if row["video_kind"] != "real":
        items = [_li(f"{c}: {len(ids)} in the scene (objects {', '.join(map(str, sorted(ids)))}), none in this video",
                     category=c, objects="", scene_objects=" ".join(map(str, sorted(ids))))
                 for c, ids in sorted(by_category.items())]
        return f"Instances in this {row['video_kind']} video (the evidence is left out)", items
    items = [_li(f"{c}: {len(ids)} visible (objects {', '.join(map(str, sorted(ids)))})",
                 category=c, objects=" ".join(map(str, sorted(ids))))
             for c, ids in sorted(by_category.items())]
    return f"Visible instances counted in the budget-{row['budget']} frames (total {len(set(used))})", items


def _size(row, geometry, facts):
    items = []
    for obj in row["used_obj_ids"] or []:
        r = facts.objects.get(int(obj))
        if r is None:
            continue
        extent = [float(e) for e in r["extent"]]
        longest = int(round(max(extent) * 100.0))
        items.append(_li(f"{_named(facts, int(obj))}: box {' × '.join(f'{100 * e:.1f}' for e in extent)} cm, "
                         f"longest side {longest} cm", object=int(obj), longest_cm=longest))
    return "The object's box", items


def _room(row, geometry, facts):
    kind = str(geometry.get("room_kind") or ("main" if row["question_type"].endswith("single") else "scene"))
    if kind not in facts.room_areas:
        return "", []
    area, source = facts.room_areas[kind]
    return "The room's floor", [_li(f"room '{kind}' ({source}): floor area {area:.2f} m²", room_kind=kind,
                                    area_m2=f"{area:.4f}")]


def _distance(row, geometry, facts):
    used = [int(i) for i in row["used_obj_ids"] or []]
    d = _metres(facts, used[0], used[1]) if len(used) >= 2 else None
    if d is None:
        return "", []
    return "Closest-point distance of the two boxes", [
        _li(f"{_named(facts, used[0])} to {_named(facts, used[1])}: {d:.2f} m", distance_m=f"{d:.4f}")]


def _rel_distance(row, geometry, facts):
    anchor = int((row["used_obj_ids"] or [None])[0])
    measured = {str(name): int(obj) for name, obj in (geometry.get("measured_to") or {}).items()}
    options = []
    for name, obj in measured.items():
        d = _metres(facts, anchor, obj)
        if d is not None:
            options.append((d, name, obj))
    mode = str(geometry.get("mode") or ("farthest" if "farthest" in row["question_type"] else "closest"))
    return f"Each option's nearest visible instance, from the {facts.label(anchor) or 'anchor'} ({mode} wanted)", [
        _li(f"{name}: {_named(facts, obj)} at {d:.2f} m", option=name, object=obj, distance_m=f"{d:.4f}")
        for d, name, obj in sorted(options)
    ]


def _direction(row, geometry, facts):
    used = [int(i) for i in row["used_obj_ids"] or []][:3]
    if len(used) < 3 or any(i not in facts.objects for i in used):
        return "", []
    a, b, c = (np.asarray(facts.objects[i]["center"], dtype=float)[:2] for i in used)
    facing = (b - a) * (-1.0 if geometry.get("backward") else 1.0)
    angle = (math.degrees(math.atan2(*(c - a)[::-1]) - math.atan2(*facing[::-1]))) % 360.0
    mode = MODES[geometry["mode"]]
    edges = [*mode.edges, 360.0]
    bins = [_li(f"{label}: {edges[k]:g}° to {edges[k + 1]:g}°", label=label, from_deg=edges[k], to_deg=edges[k + 1])
            for k, label in enumerate(mode.labels)]
    turn = "away from" if geometry.get("backward") else "towards"
    return "Direction of C from the centres, counter-clockwise (left) from the facing direction", [
        _li(f"at {_named(facts, used[0])}, facing {turn} {_named(facts, used[1])}: {_named(facts, used[2])} lies at "
            f"{angle:.1f}°", angle_deg=f"{angle:.3f}"),
        *bins,
    ]


def _route(row, geometry, facts):
    turns = list(geometry.get("turns") or [])
    angles = list(geometry.get("turn_angles_deg") or [])
    stops = [int(geometry["start_id"]), *[int(i) for i in geometry.get("waypoint_ids", [])], int(geometry["goal_id"])]
    items = [_li(f"{k + 1}. at {_named(facts, stops[k + 1])}: turn {t} ({a:+.0f}°)", turn=t, angle_deg=f"{a:.1f}")
             for k, (t, a) in enumerate(zip(turns, angles))]
    return "Turns along the route (signed heading change, counter-clockwise = left)", items


def _presence(row, geometry, facts):
    if geometry.get("present"):
        # ``object_ids``: every instance of the asked label (the presence draw); ``target_id``: older releases.
        ids = [int(o) for o in geometry.get("object_ids") or [geometry["target_id"]]]
        text = " and ".join(_named(facts, o) for o in ids)
        return "The asked object in the scan", [_li(f"{text} {'is' if len(ids) == 1 else 'are'} in the scan", target=ids[0])]
    return "The asked object in the scan", [_li("no object of the scan has the asked label", target="")]


def _reference(row, geometry, facts):
    """Each option's object with its distance from the target (``pinpoint_neighbors``; an option outside the
    target's neighbourhood is farther than any neighbour, and says so)."""
    target = int(geometry["target_id"])
    by_label = {}
    for obj in [o for o in row["used_obj_ids"] or [] if int(o) != target]:
        record = facts.objects.get(int(obj)) or {}
        for name in (facts.neighbour_labels.get((target, int(obj))), record.get("raw_label"), record.get("category")):
            if name:
                by_label.setdefault(str(name), int(obj))
    options = []
    for option in row["options"] or []:
        letter, _, label = option.partition(". ")
        obj = by_label.get(label)
        near = facts.neighbours.get((target, obj)) if obj is not None else None
        options.append((near[0] if near else math.inf, letter, label, obj))
    return f"Distance of each option from the target ({_named(facts, target)}), nearest first", [
        _li(f"{letter}. {label}: " + (f"{_named(facts, obj)} at {d:.2f} m" if math.isfinite(d) else
                                      "outside the target's neighbourhood (farther)"),
            option=label, distance_m=f"{d:.4f}" if math.isfinite(d) else "")
        for d, letter, label, obj in sorted(options, key=lambda o: (o[0], o[1]))
    ]


def _localization(row, geometry, facts):
    """The support and references with relation and distance from ``pinpoint_neighbors`` (the answer's words)."""
    target = int(geometry["target_id"])
    label = lambda obj: facts.neighbour_labels.get((target, obj)) or facts.label(obj)  # noqa: E731
    items = []
    support = geometry.get("support_object_id")
    if support is not None:
        items.append(_li(f"support: {_named(facts, int(support))}", support=label(int(support))))
    for ref in geometry.get("references") or []:
        obj = int(ref["object_id"])
        distance, relation = facts.neighbours.get((target, obj), (float(ref["distance"]), ref.get("relation")))
        cm = distance * 100.0
        items.append(_li(f"reference {_named(facts, obj)}" + (f", {relation}" if relation else "") + f": {cm:.1f} cm",
                         reference=obj, label=label(obj), relation=relation or "", distance_cm=f"{cm:.3f}"))
    return f"Where the target ({_named(facts, target)}) is", items


_PINPOINT = {"presence": _presence, "reference_mcq": _reference, "free_form_localization": _localization,
             "structured_localization": _localization}
_BY_PLAN = {"rel_distance": _rel_distance, "direction": _direction, "route": _route}


def check_kind(row: dict, geometry: dict) -> str:
    """Which check a question gets, from its type and audit record ("" when none applies)."""
    qtype = str(row["question_type"])
    if row.get("profile") == "pinpointqa":
        return qtype if qtype in _PINPOINT else ""
    if "first_seen_s" in geometry or qtype.endswith("appearance_order"):
        return "appearance_order"
    if "counting" in qtype:
        return "counting"
    if qtype.startswith("room_size"):
        return "room_size"
    if qtype.startswith("object_size"):
        return "object_size"
    if "abs_distance" in qtype:
        return "abs_distance"
    return question_kind(geometry) if question_kind(geometry) in _BY_PLAN else ""


_CHECKS = {"appearance_order": _appearance, "counting": _counting, "room_size": _room, "object_size": _size,
           "abs_distance": _distance, **_BY_PLAN, **_PINPOINT}


def answer_check_html(row: dict, geometry: dict, facts: ScanFacts) -> str:
    """The facts behind one question's answer as a small list (``data-check`` names the kind); "" when none."""
    kind = check_kind(row, geometry)
    if not kind:
        return ""
    try:
        head, items = _CHECKS[kind](row, geometry, facts)
    except (KeyError, IndexError, TypeError, ValueError):  # an audit record of another shape: no check shown
        return ""
    if not items:
        return ""
    return f'<div class="check" data-check="{kind}"><b>Check:</b> {_esc(head)}<ul>{"".join(items)}</ul></div>'
