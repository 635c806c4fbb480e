"""Hand-worked question-level cases: relative direction and route planning on tiny scenes."""

from __future__ import annotations

import numpy as np
import polars as pl
import shapely
from shapely.geometry import box as shapely_box

from pipeline import schemas
from pipeline.qa import generate_candidates

KEY = "synthetic/synth0900_00"


def _scene(objects: list[tuple[str, float, float]]):
    rows = [
        {"key": KEY, "object_id": i, "raw_label": name, "category": name, "center": [x, y, 0.3],
         "extent": [0.4, 0.4, 0.6], "rotation": np.eye(3).reshape(9).tolist(), "vertical_axis": 2,
         "structural": False}
        for i, (name, x, y) in enumerate(objects)
    ]
    room = shapely_box(-6, -6, 6, 6)
    rooms = schemas.from_rows("rooms", [{"key": KEY, "room_id": 0, "kind": "scene", "polygon_wkb": shapely.to_wkb(room),
                                         "area_m2": room.area, "source": "annotated"}])
    vis = schemas.from_rows("object_visibility", [{"key": KEY, "budget": "all", "object_id": i, "visible": True,
                                                   "first_timestamp": float(i)} for i in range(len(rows))])
    return schemas.from_rows("objects", rows), rooms, vis


def _questions(objects, profile="revsi"):
    objs, rooms, vis = _scene(objects)
    return generate_candidates(objs, rooms, vis, None, None, key=KEY, budget="all", profile=profile, config=0)


def _answer(df: pl.DataFrame, question: str) -> str | None:
    match = df.filter(pl.col("question") == question)
    if match.is_empty():
        return None
    row = match.row(0, named=True)
    return row["options"]["ABCDEF".index(row["ground_truth"])].split(". ", 1)[1]


def test_relative_direction_hand_worked():
    # Standing by the sofa (0, 0) facing the tv (0, 4): the lamp at (-3, 3) is 45° counter-clockwise.
    df = _questions([("sofa", 0, 0), ("tv", 0, 4), ("lamp", -3, 3)])
    fwd = "If I am standing by the sofa and facing the tv, is the lamp to my "
    assert _answer(df, fwd + "left, right, or back?\nAn object is to my back if I would have to turn at least 135 degrees in order to face it.") == "left"
    assert _answer(df, fwd + "front-left, front-right, back-left, or back-right?") == "front-left"
    # Facing away from the tv, the lamp is at 225°: exactly on the easy back/right boundary -> not asked;
    # in quadrants it is back-right with a 45° margin.
    bwd = "If I am standing by the sofa and facing in the opposite direction of the tv, is the lamp to my "
    assert _answer(df, bwd + "left, right, or back?\nAn object is to my back if I would have to turn at least 135 degrees in order to face it.") is None
    assert _answer(df, bwd + "front-left, front-right, back-left, or back-right?") == "back-right"
    # VSI-Bench easy (left/right of the tv) with its 10° margin.
    vsi = _questions([("sofa", 0, 0), ("tv", 0, 4), ("lamp", -3, 3)], profile="vsibench")
    assert _answer(vsi, "If I am standing by the sofa and facing the tv, is the lamp to the left or the right of the tv?") == "left"


def test_relative_direction_rejects_too_close_objects_under_revsi():
    # The lamp 1.2 m from the sofa breaks ReVSI's 1.5 m separation but not VSI-Bench's 0.3 m.
    objects = [("sofa", 0, 0), ("tv", 0, 4), ("lamp", -1.0, 1.0)]
    revsi = _questions(objects).filter(pl.col("question_type").str.starts_with("object_rel_direction"))
    assert revsi.is_empty()
    vsi = _questions(objects, "vsibench").filter(pl.col("question_type").str.starts_with("object_rel_direction"))
    assert not vsi.is_empty()


def test_route_planning_hand_worked():
    # desk (0, 0) -> bookshelf (0, 3) heads +y; bookshelf -> cabinet (-3, 3) heads -x: a 90° left turn.
    # One turn gives three possible answers, so only the vsibench profile asks it (revsi needs four options).
    assert _questions([("desk", 0, 0), ("bookshelf", 0, 3), ("cabinet", -3, 3)]).filter(
        pl.col("question_type") == "route_planning").is_empty()
    df = _questions([("desk", 0, 0), ("bookshelf", 0, 3), ("cabinet", -3, 3)], profile="vsibench")
    left = ("You are a robot beginning at the desk and facing the bookshelf. You want to navigate to the cabinet. "
            "You will perform the following actions (Note: for each [please fill in], choose either 'turn back,' "
            "'turn left,' or 'turn right.'): 1. Go forward until the bookshelf 2. [please fill in] "
            "3. Go forward until the cabinet. You have reached the final destination.")
    right = ("You are a robot beginning at the cabinet and facing the bookshelf. You want to navigate to the desk. "
             "You will perform the following actions (Note: for each [please fill in], choose either 'turn back,' "
             "'turn left,' or 'turn right.'): 1. Go forward until the bookshelf 2. [please fill in] "
             "3. Go forward until the desk. You have reached the final destination.")
    routes = df.filter(pl.col("question_type") == "route_planning")
    assert set(routes["question"]) == {left, right}
    answers = {_answer(df, left), _answer(df, right)} - {None}
    assert answers <= {"Turn Left", "Turn Right"}
    if _answer(df, left) is not None:
        assert _answer(df, left) == "Turn Left"
    if _answer(df, right) is not None:
        assert _answer(df, right) == "Turn Right"
    row = routes.row(0, named=True)
    assert len(row["options"]) == 3  # one turn: the truth and both other turns


def test_revsi_route_with_two_turns_has_four_options():
    # desk -> bookshelf (+y), left to the cabinet (-x), left again to the chair (-y).
    df = _questions([("desk", 0, 0), ("bookshelf", 0, 3), ("cabinet", -3, 3), ("chair", -3, 0)])
    routes = df.filter(pl.col("question_type") == "route_planning")
    assert routes.height > 0
    for row in routes.iter_rows(named=True):
        assert len(set(row["options"])) == 4 and row["question"].count("[please fill in]") >= 2
    start = ("You are a robot beginning at the desk and facing the bookshelf. You want to navigate to the chair.")
    ours = [q for q in routes["question"].to_list() if q.startswith(start)]
    assert ours and _answer(df, ours[0]) == "Turn Left, Turn Left"


def test_no_questions_at_a_budget_without_video():
    objs, rooms, vis = _scene([("desk", 0, 0), ("bookshelf", 0, 3), ("cabinet", -3, 3)])
    # No frame samples and no visibility at 64 frames: not even the room size (which needs no object) is asked.
    assert generate_candidates(objs, rooms, vis, None, None, key=KEY, budget="64", profile="revsi").is_empty()
    samples = schemas.from_rows("frame_samples", [{"key": KEY, "budget": "all", "rank": 0, "frame_index": 0}])
    assert generate_candidates(objs, rooms, vis, samples, None, key=KEY, budget="64", profile="revsi").is_empty()
    assert not generate_candidates(objs, rooms, vis, samples, None, key=KEY, budget="all", profile="revsi").is_empty()
