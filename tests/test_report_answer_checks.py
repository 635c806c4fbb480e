"""What the report shows beside every sample question agrees with its answer, for every question type.

One synthetic scene (its objects, rooms, and first appearances at known
times) gets the questions of every ReVSI, VSI-Bench and PinpointQA type, plus
a dummy-video counting question; the report renders many of each, and each
rendered check (the ``data-*`` facts of ``pipeline.release.answer_check``) is
compared with the question's answer by a rule of its own per type.
"""

from __future__ import annotations

import json
import re
from html import unescape

import polars as pl
import pytest

from pipeline import schemas
from pipeline.geometry.direction import MODES
from pipeline.release.report import render_report
from tests.test_quality_gate import BUDGETS, _tables
from tests.test_scoring_support import write_video

pytest.importorskip("pipeline.synth.scene")

BUDGET = "all"


def _first_frame(object_id: int) -> int:
    return 10 * object_id


@pytest.fixture(scope="module")
def scene_questions():
    from pipeline.config import Config
    from pipeline.pinpoint.questions import generate_questions
    from pipeline.pinpoint.representation import build_representation
    from pipeline.qa import generate_candidates
    from pipeline.scene.tables import scene_tables
    from pipeline.synth.scene import generate_scene

    parsed = generate_scene(0, 0, frames=2).to_parsed_scan()
    scene = scene_tables(parsed, Config())
    objects, rooms, key = scene["objects"], scene["rooms"], parsed.key
    # Every object visible, first seen at its id in seconds (frame 10 x id): the appearance order is known.
    visibility = schemas.from_rows("object_visibility", [
        {"key": key, "budget": BUDGET, "object_id": i, "visible": True, "first_frame": _first_frame(i),
         "first_timestamp": float(i), "rule": "fraction"} for i in objects["object_id"].to_list()
    ])
    parts = [generate_candidates(objects, rooms, visibility, None, None, key=key, budget=BUDGET, profile=p, config=0)
             for p in ("revsi", "vsibench")]
    targets, neighbors = build_representation(key, objects, parsed)
    parts.append(generate_questions(key, targets, neighbors, objects, visibility, seed=0, budgets=(BUDGET,)))
    qa = pl.concat(parts, how="diagonal_relaxed")
    # A dummy-video counting question, as pipeline.qa.dummy makes one: every instance named, none in the video.
    counting = qa.filter(pl.col("question_type") == "object_counting_single").head(1)
    dummy = counting.with_columns(id=pl.lit("dummy-count"), video_kind=pl.lit("black"), ground_truth=pl.lit("0"),
                                  answer_value=pl.lit(0.0))
    qa = schemas.conform("qa", pl.concat([qa, dummy], how="diagonal_relaxed"))
    tables = {"qa": qa, "objects": objects, "rooms": rooms, "object_visibility": visibility, "scans": scene["scans"],
              "pinpoint_neighbors": neighbors}
    page = render_report(tables, video_file=lambda rel: None, title="t", samples_per_type=8, budgets=(BUDGET,))  # every counting question
    return qa, objects, page


def _checks(page: str) -> dict[str, tuple[str, list[dict]]]:
    """Question id -> (check kind, one dict of data attributes per fact), as the page shows them."""
    found = {}
    for item in page.split('<div class="q">')[1:]:
        qid = unescape(item.split(" · ", 1)[0].split(">", 1)[1])
        check = re.search(r'<div class="check" data-check="([a-z_]+)">(.*?)</ul></div>', item)
        if check is None:
            found[qid] = ("", [])
            continue
        facts = [{k: unescape(v) for k, v in re.findall(r'data-([a-z0-9-]+)="([^"]*)"', li)}
                 for li in re.findall(r"<li([^>]*)>", check.group(2))]
        found[qid] = (check.group(1), facts)
    return found


def _answer_text(row: dict) -> str:
    for option in row["options"] or []:
        letter, _, text = option.partition(". ")
        if letter == row["ground_truth"]:
            return text
    return row["ground_truth"]


def _agrees(row: dict, kind: str, facts: list[dict], labels: dict[int, str]) -> None:
    answer = _answer_text(row)
    value = row["answer_value"]
    if kind == "appearance_order":
        assert [float(f["first-seen-s"]) for f in facts] == sorted(float(f["first-seen-s"]) for f in facts)
        assert ", ".join(f["category"] for f in facts) == answer  # shown in time order = the answer's order
        assert all(int(f["frame"]) == _first_frame(int(f["object"])) for f in facts)
    elif kind == "counting":
        shown = {int(i) for f in facts for i in f["objects"].split()}
        assert len(shown) == value  # distinct instances shown = the count (none in a dummy video)
        if row["video_kind"] != "real":
            assert value == 0 and all(f["scene-objects"] for f in facts)
        else:
            assert {f["category"] for f in facts} == {labels[i] for i in row["used_obj_ids"]}
    elif kind == "object_size":
        [fact] = facts
        assert int(fact["longest-cm"]) == value
    elif kind == "room_size":
        [fact] = facts
        assert round(float(fact["area-m2"]), 1) == value
    elif kind == "abs_distance":
        [fact] = facts
        assert round(float(fact["distance-m"]), 1) == value
    elif kind == "rel_distance":
        distances = {f["option"]: float(f["distance-m"]) for f in facts}
        assert len(distances) == len(row["options"])
        pick = max if "farthest" in row["question_type"] else min
        assert pick(distances, key=distances.get) == answer
    elif kind == "direction":
        angle = float(facts[0]["angle-deg"])
        bins = {f["label"]: (float(f["from-deg"]), float(f["to-deg"])) for f in facts[1:]}
        assert set(bins) == set(MODES[json.loads(row["geometry"])["mode"]].labels)
        low, high = bins[answer]
        assert low <= angle < high, (angle, answer, bins)
    elif kind == "route":
        assert ", ".join(f"Turn {f['turn'].capitalize()}" for f in facts) == answer
    elif kind == "presence":
        [fact] = facts
        assert (fact["target"] != "") == (row["ground_truth"] == "Yes")
        if fact["target"]:
            assert int(fact["target"]) in row["used_obj_ids"]
    elif kind == "reference_mcq":  # options nearest first: the first is the answer, nearer than every other
        assert [f["option"] for f in facts] and sorted(f["option"] for f in facts) == sorted(
            o.partition(". ")[2] for o in row["options"])
        assert facts[0]["option"] == answer and facts[0]["distance-m"]
        assert all(not f["distance-m"] or float(f["distance-m"]) > float(facts[0]["distance-m"]) for f in facts[1:])
    elif kind == "free_form_localization":
        text = row["ground_truth"]
        for f in facts:
            if "support" in f:
                assert f["support"] in text
            else:  # each reference as the answer words it: its label and distance in whole centimetres
                assert f["label"] in text and f"{int(float(f['distance-cm']) + 0.5)} cm" in text, (f, text)
    elif kind == "structured_localization":
        truth = json.loads(row["ground_truth"])
        assert [f for f in facts if "support" in f] == ([{"support": truth["support_surface"]}]
                                                       if truth["support_surface"] is not None else [])
        references = [f for f in facts if "reference" in f]
        assert [(f["label"], f["relation"], round(float(f["distance-cm"]), 1)) for f in references] == [
            (r["object"], r["relation"], r["distance_cm"]) for r in truth["references"]]
    else:
        raise AssertionError(f"no rule for check {kind!r}")


def test_every_question_type_shows_what_its_answer_follows_from(scene_questions):
    qa, objects, page = scene_questions
    labels = dict(zip(objects["object_id"].to_list(), objects["category"].to_list()))
    rows = {r["id"]: r for r in qa.iter_rows(named=True)}
    checks = _checks(page)
    checked_types = set()
    for qid, (kind, facts) in checks.items():
        row = rows[qid]
        assert kind and facts, f"{row['profile']} {row['question_type']}: no check shown ({qid})"
        _agrees(row, kind, facts, labels)
        checked_types.add((row["profile"], row["question_type"]))
    every_type = set(qa.select("profile", "question_type").unique().iter_rows())
    assert checked_types == every_type  # every type of all three profiles is shown and checked
    assert {p for p, _ in every_type} == {"revsi", "vsibench", "pinpointqa"} and len(every_type) >= 27
    assert "dummy-count" in checks


def test_appearance_order_shows_first_appearance_frames_in_answer_order(tmp_path):
    """The issue's case: the mug's best frame comes before the cup's, the cup is seen first; the page must show the
    cup's first frame first, with its time."""
    key = "synthetic/synth0000_00"
    tables = _tables()
    frames = 6
    objects = tables["objects"].with_columns(
        category=pl.Series(["cup", "mug", "sofa", "tv", "bed"]), raw_label=pl.Series(["cup", "mug", "sofa", "tv", "bed"]))
    first = {0: (1, 0.1), 1: (3, 0.3), 2: (4, 0.4), 3: (5, 0.5)}  # object -> (first frame, seconds): cup, mug, sofa, tv
    visibility_rows = []
    for obj, (frame, _) in first.items():
        for f in range(frame, frames):  # each object most visible in the last frame but the cup's best is its last
            pixels = 500 - 50 * f if obj == 1 else 100 + 10 * f
            visibility_rows.append({"key": key, "frame_index": f, "object_id": obj, "visible_pixels": pixels,
                                    "frame_fraction": 0.1, "bbox": [2 + obj, 2, 20, 16]})
    qa = tables["qa"].head(1).with_columns(
        id=pl.lit("appearance"), profile=pl.lit("vsibench"), question_type=pl.lit("obj_appearance_order"),
        options=pl.lit(["A. mug, cup, sofa, tv", "B. cup, mug, sofa, tv"]), ground_truth=pl.lit("B"),
        video=pl.lit("v.mp4"), geometry=pl.lit(json.dumps({"first_seen_s": {"cup": 0.1, "mug": 0.3, "sofa": 0.4, "tv": 0.5},
                                                           "order": ["cup", "mug", "sofa", "tv"]})),
    )
    tables.update(
        qa=qa, objects=objects,
        object_visibility=schemas.from_rows("object_visibility", [
            {"key": key, "budget": "all", "object_id": o, "visible": True, "first_frame": f, "first_timestamp": s,
             "best_frame": frames - 1, "rule": "fraction"} for o, (f, s) in first.items()]),
        frame_samples=schemas.from_rows("frame_samples", [
            {"key": key, "budget": "all", "rank": r, "frame_index": r, "timestamp": r / 10} for r in range(frames)]),
        visibility=schemas.from_rows("visibility", visibility_rows),
    )
    video = write_video(tmp_path / "v.mp4", frames=frames)
    page = render_report(tables, video_file=lambda rel: video if rel == "v.mp4" else None, title="t", budgets=BUDGETS)
    captions = re.findall(r"<figcaption>f(\d+) · ([\d.]+) s</figcaption>", page)
    assert captions == [("1", "0.1"), ("3", "0.3"), ("4", "0.4"), ("5", "0.5")]
    assert re.findall(r'alt="frame \d+: first ([a-z]+)"', page) == ["cup", "mug", "sofa", "tv"]
    kind, facts = _checks(page)["appearance"]
    assert kind == "appearance_order" and [f["category"] for f in facts] == ["cup", "mug", "sofa", "tv"]


def test_shown_frames_box_as_many_named_objects_as_they_can():
    """Six chairs each best seen in its own frame, four frames shown: the frame holding the last three is one of them
    (the first four frames in frame order left two chairs unboxed)."""
    from pipeline.release.report import covering_frames

    rows = [{"frame_index": f, "object_id": f} for f in range(6)] + [{"frame_index": 5, "object_id": o} for o in (3, 4)]
    seen = pl.DataFrame(rows)
    frames = covering_frames(list(range(6)), seen, 4)
    assert len(frames) == 4 and 5 in frames and frames == sorted(frames)
    assert set(seen.filter(pl.col("frame_index").is_in(frames))["object_id"]) == set(range(6))
    assert covering_frames([3, 1, 1], seen, 4) == [1, 3]  # every best frame when they fit, as before
