"""Question generation against an independent checker on hand-built scenes.

The scenes are random but seeded: gravity-aligned boxes (rotated about z, the
vertical axis put in any rotation column), several instances per category,
nested visibility per budget, a room polygon and dummy videos. The checker
re-derives every answer from the question *text* and the input tables with
its own geometry (prism distance = hypot(footprint distance, z-gap), centre
angles by atan2), so it shares no code with the generators.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import polars as pl
import pytest
import shapely
from shapely.geometry import Polygon, box as shapely_box

from pipeline import schemas
from pipeline.qa import finalize_qa, generate_candidates
from pipeline.qa.profiles import load_profile

BUDGETS = ("16", "32", "64", "all")
CATEGORIES = [
    # (name, max instances, (min, max) footprint side m, (min, max) height m)
    ("chair", 4, (0.4, 0.6), (0.8, 1.0)),
    ("table", 3, (0.6, 1.2), (0.7, 0.8)),
    ("pillow", 3, (0.3, 0.5), (0.1, 0.2)),
    ("nightstand", 2, (0.4, 0.5), (0.5, 0.6)),
    ("sofa", 1, (0.8, 1.3), (0.8, 0.9)),
    ("tv", 1, (0.1, 1.2), (0.6, 0.8)),
    ("lamp", 1, (0.3, 0.4), (1.4, 1.7)),
    ("refrigerator", 1, (0.7, 0.9), (1.7, 1.9)),
    ("plant", 2, (0.3, 0.6), (0.5, 1.2)),
    ("bed", 1, (1.3, 1.4), (0.5, 0.6)),
    ("window", 3, (0.1, 1.0), (1.0, 1.2)),
    ("cabinet", 2, (0.5, 1.0), (0.8, 2.0)),
    ("trash can", 2, (0.25, 0.4), (0.3, 0.6)),
    ("desk", 1, (0.8, 1.3), (0.7, 0.8)),
    ("backpack", 1, (0.3, 0.4), (0.4, 0.5)),
]
ROOM = (0.0, 0.0, 9.0, 7.0)


def _rotation(yaw: float, vertical_column: int, flip: bool) -> np.ndarray:
    """Columns are box axes: two horizontal axes (yaw) and z, with z placed in ``vertical_column``."""
    c, s = math.cos(yaw), math.sin(yaw)
    horizontal = [np.array([c, s, 0.0]), np.array([-s, c, 0.0])]
    z = np.array([0.0, 0.0, -1.0 if flip else 1.0])
    cols = horizontal[:]
    cols.insert(vertical_column, z)
    return np.stack(cols, axis=1)


def build_scene(seed: int):
    gen = np.random.default_rng(seed)
    key = f"synthetic/synth{seed:04d}_00"
    placed: list[Polygon] = []
    rows = []
    oid = 0
    for name, max_n, side, height in CATEGORIES:
        n = int(gen.integers(1, max_n + 1))
        for _ in range(n):
            for _attempt in range(200):
                sx, sy = gen.uniform(*side), gen.uniform(*side)
                hz = gen.uniform(*height)
                cx, cy = gen.uniform(ROOM[0] + 0.8, ROOM[2] - 0.8), gen.uniform(ROOM[1] + 0.8, ROOM[3] - 0.8)
                yaw = float(gen.choice([0.0, gen.uniform(0, math.pi)]))
                rot2 = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
                corners = (np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [sx / 2, sy / 2]) @ rot2.T + [cx, cy]
                footprint = Polygon(corners)
                if all(footprint.distance(p) > 0.3 for p in placed):
                    break
            else:
                continue
            placed.append(footprint)
            vertical = int(gen.integers(0, 3))
            rotation = _rotation(yaw, vertical, bool(gen.integers(0, 2)))
            extent = [sx, sy]
            extent.insert(vertical, hz)
            z0 = 0.0 if name != "window" else 1.0
            rows.append(
                {
                    "key": key,
                    "object_id": oid,
                    "raw_label": name,
                    "category": name,
                    "center": [cx, cy, z0 + hz / 2],
                    "extent": extent,
                    "rotation": rotation.reshape(9).tolist(),
                    "vertical_axis": vertical,
                    "structural": False,
                    "small_object": False,
                    "box_source": "annotation",
                    "label_mapped": True,
                    "vertex_count": 0,
                    "triangle_count": 0,
                }
            )
            oid += 1
    objects = schemas.from_rows("objects", rows)
    room = shapely_box(*ROOM)
    main = shapely_box(ROOM[0], ROOM[1], 6.0, ROOM[3])
    rooms = schemas.from_rows(
        "rooms",
        [
            {"key": key, "room_id": 0, "kind": "scene", "polygon_wkb": shapely.to_wkb(room), "area_m2": room.area, "source": "annotated"},
            {"key": key, "room_id": 1, "kind": "main", "polygon_wkb": shapely.to_wkb(main), "area_m2": main.area, "source": "annotated"},
        ],
    )
    # Nested visibility: an object seen at 16 frames is seen at every larger budget.
    level = gen.choice(5, size=oid, p=[0.55, 0.15, 0.1, 0.1, 0.1])  # 0: seen at 16, 1: from 32, 2: from 64, 3: only all, 4: never
    first_seen = gen.uniform(0, 60, size=oid).round(1)
    vis = []
    for b_index, budget in enumerate(BUDGETS):
        for i in range(oid):
            visible = bool(level[i] <= b_index)
            vis.append(
                {
                    "key": key,
                    "budget": budget,
                    "object_id": i,
                    "visible": visible,
                    "first_timestamp": float(first_seen[i]) if visible else None,
                    "rule": "fraction",
                }
            )
    visibility = schemas.from_rows("object_visibility", vis)
    samples = schemas.from_rows(
        "frame_samples",
        [{"key": key, "budget": b, "rank": r, "frame_index": r, "timestamp": float(r)} for b in BUDGETS for r in range(3)],
    )
    dummy = []
    for name in sorted({r["category"] for r in rows}):
        ids = [r["object_id"] for r in rows if r["category"] == name]
        for kind in ("query_drop", "first_frame"):
            dummy.append(
                {"key": key, "video_id": f"{kind}-{name}", "kind": kind, "object_ids": ids, "frame_indices": [0] * 16,
                 "path": f"videos/dummy/{kind}/{kind}-{name}.mp4"}
            )
    dummy.append({"key": key, "video_id": "black", "kind": "black", "object_ids": [], "frame_indices": [-1] * 16,
                  "path": "videos/dummy/black/black.mp4"})
    dummy_videos = schemas.from_rows("dummy_videos", dummy)
    return key, objects, rooms, visibility, samples, dummy_videos


# ---------------------------------------------------------------- independent checker


class Checker:
    """Recomputes answers from the tables and the question text only."""

    def __init__(self, objects, rooms, visibility, key):
        self.objects = {r["object_id"]: r for r in objects.filter(pl.col("key") == key).iter_rows(named=True)}
        self.rooms = {r["kind"]: r for r in rooms.filter(pl.col("key") == key).iter_rows(named=True)}
        self._visible = {}
        for r in visibility.filter((pl.col("key") == key) & pl.col("visible")).iter_rows(named=True):
            self._visible.setdefault(r["budget"], {})[r["object_id"]] = r["first_timestamp"]
        self._prisms = {}

    def visible(self, budget):
        return self._visible.get(budget, {})

    def of(self, name, ids=None):
        return [o for o in self.objects.values() if o["category"] == name and (ids is None or o["object_id"] in ids)]

    def unique(self, name, budget):
        inst = self.of(name)
        assert len(inst) == 1, f"{name} is not unique in the scene"
        assert inst[0]["object_id"] in self.visible(budget), f"{name} not visible at {budget}"
        return inst[0]

    @staticmethod
    def prism(o):
        r = np.asarray(o["rotation"]).reshape(3, 3)
        c, e = np.asarray(o["center"]), np.asarray(o["extent"])
        v = int(np.argmax(np.abs(r[2])))
        corners = []
        for sx in (-1, 1):
            for sy in (-1, 1):
                for sz in (-1, 1):
                    corners.append(c + r @ (np.array([sx, sy, sz]) * e / 2))
        corners = np.array(corners)
        return shapely.convex_hull(shapely.multipoints(corners[:, :2])), corners[:, 2].min(), corners[:, 2].max(), v

    def distance(self, a, b):
        for o in (a, b):
            if o["object_id"] not in self._prisms:
                self._prisms[o["object_id"]] = self.prism(o)
        fa, za0, za1, _ = self._prisms[a["object_id"]]
        fb, zb0, zb1, _ = self._prisms[b["object_id"]]
        dz = max(0.0, max(za0, zb0) - min(za1, zb1))
        return math.hypot(fa.distance(fb), dz)

    @staticmethod
    def angle(a, b, c, backward):
        f = np.asarray(b["center"][:2]) - np.asarray(a["center"][:2])
        if backward:
            f = -f
        v = np.asarray(c["center"][:2]) - np.asarray(a["center"][:2])
        return math.degrees(math.atan2(f[0] * v[1] - f[1] * v[0], f @ v)) % 360

    def check(self, row) -> None:
        qt, q, budget = row["question_type"], row["question"], row["budget"]
        vis = self.visible(budget)
        correct = (
            row["options"][ "ABCDEF".index(row["ground_truth"])].split(". ", 1)[1] if row["options"] else None
        )
        if row["video_kind"] != "real":
            m = re.match(r"How many (.+)\(s\) are in (the scene|this room)\?$", q)
            if m:
                assert row["ground_truth"] == "0"
                return
            m = re.search(r"dimension \(length, width, or height\) of the (.+), measured", q)
            assert m and row["video_kind"] == "black"
            assert row["ground_truth"] == str(round(max(self.unique(m.group(1), budget)["extent"]) * 100))
            return
        if qt in ("object_counting_single", "object_counting"):
            name = re.match(r"How many (.+)\(s\) are in (the scene|this room)\?$", q).group(1)
            assert row["ground_truth"] == str(len(self.of(name, vis)))
        elif qt == "object_counting_multiple":
            m = re.match(r"How many (.+)\(s\) and (.+)\(s\) are in the scene in total\?$", q)
            assert row["ground_truth"] == str(len(self.of(m.group(1), vis)) + len(self.of(m.group(2), vis)))
        elif qt == "object_size_estimation":
            name = re.search(r"dimension \(length, width, or height\) of the (.+), measured", q).group(1)
            assert row["ground_truth"] == str(round(max(self.unique(name, budget)["extent"]) * 100))
        elif qt.startswith("room_size"):
            kind = "main" if "main room" in q else "scene"
            area = shapely.from_wkb(self.rooms[kind]["polygon_wkb"]).area
            assert budget != "16" and row["ground_truth"] == f"{area:.1f}"
        elif qt == "object_abs_distance":
            m = re.search(r"between the (.+) and the (.+) \(in meters\)\?$", q)
            d = self.distance(self.unique(m.group(1), budget), self.unique(m.group(2), budget))
            assert row["ground_truth"] == f"{d:.1f}"
            assert row["distance_source"] == "obb"
        elif qt.startswith("object_rel_distance"):
            m = re.search(r"objects \((.+)\) is the (closest to|farthest from) the (.+)\?$", q)
            anchor = self.unique(m.group(3), budget)
            dist = {n: min(self.distance(anchor, o) for o in self.of(n, vis)) for n in m.group(1).split(", ")}
            pick = min if m.group(2) == "closest to" else max
            assert correct == pick(dist, key=dist.get)
            values = sorted(dist.values())
            min_gap = 0.3 if row["profile"] == "revsi" else 0.15
            assert all(y - x >= min_gap - 1e-9 for x, y in zip(values, values[1:]))
            if row["profile"] == "revsi":
                assert values[0] >= 1.0
        elif qt.startswith("object_rel_direction"):
            m = re.search(r"standing by the (.+) and facing (the|in the opposite direction of the) (.+), is the (.+?) to ", q)
            a, b, c = (self.unique(m.group(i), budget) for i in (1, 3, 4))
            ang = self.angle(a, b, c, m.group(2) != "the")
            if "front-left" in q:
                edges, labels = [0, 90, 180, 270], ["front-left", "back-left", "back-right", "front-right"]
            elif "left, right, or back" in q:
                edges, labels = [0, 135, 225], ["left", "back", "right"]
            else:
                edges, labels = [0, 180], ["left", "right"]
            k = max(i for i, e in enumerate(edges) if ang >= e)
            assert correct == labels[k]
            margin = min(min(abs(ang - e), 360 - abs(ang - e)) for e in edges)
            assert margin >= (35 if row["profile"] == "revsi" else 10) - 1e-9
        elif qt == "route_planning":
            m = re.match(r"You are a robot beginning at the (.+) and facing the (.+)\. You want to navigate to the (.+?)\. ", q)
            stops = re.findall(r"\d+\. Go forward until the (.+?)(?= \d+\. |\. You have reached)", q)
            assert stops[-1] == m.group(3)
            pts = [np.asarray(self.unique(n, budget)["center"][:2]) for n in [m.group(1)] + stops]
            heads = [math.degrees(math.atan2(*(q1 - q0)[::-1])) for q0, q1 in zip(pts, pts[1:])]
            turns = []
            for h0, h1 in zip(heads, heads[1:]):
                d = (h1 - h0 + 180) % 360 - 180
                assert abs(abs(d) - 45) >= 20 - 1e-6 and abs(abs(d) - 135) >= 20 - 1e-6
                turns.append("Turn Back" if abs(d) >= 135 else ("Turn Left" if d > 0 else "Turn Right"))
            assert correct == ", ".join(turns)
        elif qt == "obj_appearance_order":
            names = re.search(r"in the video: (.+)\?$", q).group(1).split(", ")
            first = {n: min(vis[o["object_id"]] for o in self.of(n, vis)) for n in names}
            assert correct == ", ".join(sorted(names, key=first.get))
        else:
            raise AssertionError(f"no check for {qt}")
        for oid in row["used_obj_ids"]:
            assert oid in vis, f"{row['id']} uses unseen object {oid}"


SEEDS = range(6)


@pytest.fixture(scope="module")
def generated():
    out = {}
    for scene_seed in SEEDS:
        key, objects, rooms, vis, samples, dummy = build_scene(scene_seed)
        for profile in ("revsi", "vsibench"):
            frames = [
                generate_candidates(objects, rooms, vis, samples, dummy, key=key, budget=b, profile=profile, config=7)
                for b in BUDGETS
            ]
            out[(scene_seed, profile)] = (Checker(objects, rooms, vis, key), pl.concat(frames))
    return out


@pytest.mark.parametrize("profile", ["revsi", "vsibench"])
def test_every_candidate_answer_agrees_with_the_checker(generated, profile):
    checked = {}
    for (scene_seed, prof), (checker, candidates) in generated.items():
        if prof != profile:
            continue
        for row in candidates.iter_rows(named=True):
            checker.check(row)
            checked[(row["question_type"], row["budget"])] = checked.get((row["question_type"], row["budget"]), 0) + 1
    wanted = set(load_profile(profile).tasks)
    got = {qt for qt, _ in checked}
    assert wanted <= got, f"question types never generated: {sorted(wanted - got)}"
    for qt in wanted:
        rule = load_profile(profile).task(qt)
        for budget in BUDGETS:
            if budget not in rule.skip_budgets and qt not in ("route_planning",):
                assert checked.get((qt, budget), 0) > 0, (qt, budget)


@pytest.mark.parametrize("profile", ["revsi", "vsibench"])
def test_finalized_answers_agree_and_respect_filters(generated, profile):
    candidates = pl.concat([c for (s, p), (_, c) in generated.items() if p == profile])
    final = finalize_qa(candidates, profile=profile, seed=3)
    checkers = {key: generated[(s, profile)][0] for s in SEEDS for key in [f"synthetic/synth{s:04d}_00"]}
    assert final.height > 0
    for row in final.iter_rows(named=True):
        checkers[row["key"]].check(row)
        names = [n.lower() for n in json.loads(row["geometry"]).get("names", [])]
        rule = load_profile(profile).task(row["question_type"])
        assert not any(rule.excludes(n) for n in names)
        if profile == "revsi" and row["question_type"] == "object_abs_distance":
            assert row["answer_value"] >= 1.0
    assert final.filter(pl.col("budget") == "16").filter(
        pl.col("question_type").str.starts_with("room_size") | (pl.col("question_type") == "route_planning")
    ).is_empty()


def test_no_room_size_or_route_at_16_frames(generated):
    for (_, _), (_, candidates) in generated.items():
        at16 = candidates.filter(pl.col("budget") == "16")["question_type"].to_list()
        assert not any(qt.startswith("room_size") or qt == "route_planning" for qt in at16)


def test_video_paths_and_dummy_questions(generated):
    checker, candidates = generated[(0, "revsi")]
    real = candidates.filter(pl.col("video_kind") == "real")
    for row in real.iter_rows(named=True):
        assert row["video"] == f"videos/{row['budget']}_frame/synthetic/synth0000_00.mp4"
    dummy = candidates.filter(pl.col("video_kind") != "real")
    assert set(dummy["video_kind"].unique()) == {"query_drop", "first_frame", "black"}
    assert set(dummy["budget"].unique()) == {"16"}
    counting = dummy.filter(pl.col("question_type") == "object_counting_single")
    assert (counting["ground_truth"] == "0").all()
    assert set(dummy.filter(pl.col("question_type") == "object_size_estimation")["video_kind"]) == {"black"}
    for row in dummy.iter_rows(named=True):
        assert row["video"].startswith(f"videos/dummy/{row['video_kind']}/")
        assert json.loads(row["geometry"])["real_id"] in set(real["id"])


def test_candidates_conform_to_the_qa_schema_and_templates_match_spec(generated):
    _, candidates = generated[(1, "revsi")]
    schemas.to_arrow("qa_candidates", candidates)
    questions = candidates["question"].to_list()
    assert any(q.startswith("Based on visual evidence from the video, what is the length") for q in questions)
    assert all(o[1:3] == ". " for opts in candidates["options"].to_list() for o in opts)
    assert candidates["id"].n_unique() == candidates.height
