"""The report's top-down plans, box colours and release stamp: what a reviewer checks an answer with."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import shapely
from shapely.geometry import box as rectangle

from pipeline import schemas
from pipeline.release.palette import object_colours
from pipeline.release.plan_view import plan_svg, question_kind, scene_plan
from pipeline.release.report import render_report, without_stamp
from tests.test_quality_gate import BUDGETS, _tables

KEY = "synthetic/synth0000_00"


def _scene(frames: int = 30):
    objects = _tables()["objects"]  # five 0.5 m boxes at x = 0..4
    rooms = schemas.from_rows("rooms", [{"key": KEY, "room_id": 0, "kind": "scene", "source": "annotated",
                                         "polygon_wkb": shapely.to_wkb(rectangle(-1, -2, 5, 2)), "area_m2": 24.0}])
    poses = []
    for i in range(frames):
        t = 2 * np.pi * i / frames
        pose = np.eye(4)
        pose[:3, 3] = [2 + 1.5 * np.cos(t), 1.5 * np.sin(t), 1.4]
        pose[:3, 2] = [-np.cos(t), -np.sin(t), 0.0]  # looking at the room's centre
        poses.append({"key": KEY, "frame_index": i, "timestamp": i / 10, "pose": pose.reshape(16).tolist(),
                      "valid": True, "width": 640, "height": 480})
    return scene_plan(objects, rooms, schemas.from_rows("frames", poses))


def test_every_object_of_a_question_gets_its_own_colour():
    ids = list(range(60))
    colours = object_colours(ids + [3, 7])  # repeated ids keep their colour
    assert len(colours) == 60 and len(set(colours.values())) == 60
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours.values())


def test_direction_plan_draws_the_facing_the_sectors_and_the_answer():
    geometry = {"names": ["chair", "sofa", "tv"], "angle_deg": 180.0, "boundary_margin_deg": 45.0, "backward": False,
                "mode": "easy", "correct": "back"}
    assert question_kind(geometry) == "direction"
    svg, caption = plan_svg(_scene(), [1, 2, 0], geometry, object_colours([1, 2, 0]), [0, 10, 20], [10])
    assert 'data-kind="direction"' in svg
    sectors = re.findall(r'<polygon class="sector"[^>]*fill="(#[0-9a-f]+)"[^>]*><title>([a-z-]+):', svg)
    assert [label for _, label in sectors] == ["left", "back", "right"]
    assert dict((label, fill) for fill, label in sectors)["back"] == "#ffd75e"  # the answer's sector
    assert "facing B" in svg and "180°" in svg and "at 180.0°" in caption
    assert svg.count('class="object used"') == 3 and svg.count("h0") == 3 and 'class="view-ticks"' in svg
    assert svg.count('class="shown-frame"') == 1 and 'class="camera-path"' in svg and 'class="floor"' in svg


def test_distance_and_route_plans_draw_the_measured_segment_and_the_legs():
    scene = _scene()
    svg, caption = plan_svg(scene, [0, 2], {"names": ["chair", "sofa"], "distance_m": 1.5}, object_colours([0, 2]), [], [])
    assert 'data-kind="distance"' in svg and "1.50 m" in svg and "closest points" in caption
    # The segment runs between the boxes' facing sides (x = 0.25 and 1.75), not between their centres.
    line = re.search(r'<line x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"', svg)
    assert abs(float(line.group(2)) - float(line.group(1))) < 1.6 * 400 / 6
    route = {"start_id": 0, "facing_id": 1, "waypoint_ids": [1], "goal_id": 3, "turns": ["back"],
             "turn_angles_deg": [180.0], "initial_angle_deg": 0.0, "names": ["chair", "table", "table", "tv"],
             "legs": [{"start_xy": [0.3, 0.0], "end_xy": [0.7, 0.0], "length_m": 0.4, "heading_deg": 0.0},
                      {"start_xy": [1.3, 0.0], "end_xy": [2.7, 0.0], "length_m": 1.4, "heading_deg": 0.0}]}
    svg, _ = plan_svg(scene, [0, 1, 3], route, object_colours([0, 1, 3]), [], [])
    assert 'data-kind="route"' in svg and "1. turn back (+180°)" in svg and "leg 2" in svg and "goal" in svg


def test_plans_are_the_same_bytes_every_time():
    geometry = {"names": ["chair", "sofa", "tv"], "angle_deg": 90.0, "boundary_margin_deg": 45.0, "backward": True,
                "mode": "hard"}
    first = plan_svg(_scene(), [1, 2, 0], geometry, object_colours([1, 2, 0]), [1, 2], [2])
    assert first == plan_svg(_scene(), [1, 2, 0], geometry, object_colours([1, 2, 0]), [1, 2], [2])


def test_report_carries_the_stamp_plans_and_left_aligned_text_columns():
    tables = _tables()
    tables["qa"] = tables["qa"].with_columns(
        geometry=pl.lit(json.dumps({"names": ["chair", "table"], "distance_m": 0.5}))
    )
    scene = _scene()
    tables["rooms"] = schemas.from_rows("rooms", [{"key": KEY, "room_id": 0, "kind": "scene", "source": "annotated",
                                                   "polygon_wkb": shapely.to_wkb(rectangle(-1, -2, 5, 2)), "area_m2": 24.0}])
    release = {"version": "r-abc", "code_revision": "deadbeef", "config_digest": "c0ffee", "built_at": "2026-12-01 00:00 UTC",
               "data_docs": "../data_docs/index.html", "manifest": "../manifest.json"}
    gate = {"success": True, "results": [{"name": "qa.id_unique", "success": True, "unexpected_count": 0,
                                          "meaning": "ids are unique", "guards": "qa", "failing_rows": []}]}
    html = render_report(tables, video_file=lambda rel: None, title="t", release=release, gate=gate,
                         frames_of=lambda keys: None, budgets=BUDGETS)
    assert html == render_report(tables, video_file=lambda rel: None, title="t", release=release, gate=gate,
                                 frames_of=lambda keys: None, budgets=BUDGETS)
    stamp = re.search(r'<dl class="stamp">.*?</dl>', html).group(0)
    for text in ("r-abc", "deadbeef", "c0ffee", "2026-12-01 00:00 UTC", "passed", 'href="../data_docs/index.html"',
                 'href="../manifest.json"'):
        assert text in stamp
    assert "deadbeef" not in without_stamp(html) and "Questions per type" in without_stamp(html)
    assert html.count('data-kind="distance"') >= 1 and scene.bounds() is not None
    # Text columns left-aligned (the expectation's meaning), numbers right-aligned (failing rows).
    row = re.search(r"<tr><td class=\"l\">qa.id_unique</td>(.*?)</tr>", html).group(1)
    assert re.findall(r'<td class="(l?)">', row) == ["l", "", "l", "l", "l"]
    # Every answer-chart bar is labelled with its count.
    chart = re.search(r'<div class="chart">.*?</svg>', html).group(0)
    assert chart.count("<rect") == chart.count('class="count"') > 0
