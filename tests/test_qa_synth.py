"""Questions on synthetic scenes, checked against the generator's ground-truth sidecar.

The sidecar (``<scene>.scan2qa_truth.json``) carries exact boxes and room
polygons; with every object visible at ``"all"`` the independent checker of
``test_qa_generation`` must agree with every generated answer.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import shapely
from shapely.geometry import MultiPolygon, Polygon

from pipeline import schemas
from pipeline.qa import finalize_qa, generate_candidates
from tests.test_qa_generation import Checker

synth_scene = pytest.importorskip("pipeline.synth.scene")
synth_writer = pytest.importorskip("pipeline.synth.scannet_writer")


def tables_from_truth(truth: dict):
    key = f"synthetic/{truth['scene_id']}"
    objects = schemas.from_rows(
        "objects",
        [
            {
                "key": key, "object_id": o["id"], "raw_label": o["label"], "category": o["label"],
                "center": o["box"]["center"], "extent": o["box"]["extent"],
                "rotation": np.asarray(o["box"]["rotation"]).reshape(9).tolist(),
                "vertical_axis": int(np.argmax(np.abs(np.asarray(o["box"]["rotation"])[2]))),
                "structural": o["structural"], "small_object": o["small"], "box_source": "annotation",
            }
            for o in truth["objects"]
        ],
    )
    rooms = []
    for i, room in enumerate(truth["rooms"]):
        geom = MultiPolygon([Polygon(p) for p in room["polygons"]]) if len(room["polygons"]) > 1 else Polygon(room["polygons"][0])
        rooms.append({"key": key, "room_id": i, "kind": room["kind"], "polygon_wkb": shapely.to_wkb(geom),
                      "area_m2": geom.area, "source": "annotated"})
    visibility = schemas.from_rows(
        "object_visibility",
        [{"key": key, "budget": "all", "object_id": o["id"], "visible": True, "first_timestamp": float(o["id"])}
         for o in truth["objects"]],
    )
    return key, objects, schemas.from_rows("rooms", rooms), visibility


@pytest.mark.parametrize("scene_index", [0, 1])
def test_synthetic_answers_agree_with_truth_sidecar(scene_index):
    truth = synth_writer.truth_dict(synth_scene.generate_scene(0, scene_index, 5))
    key, objects, rooms, visibility = tables_from_truth(truth)
    checker = Checker(objects, rooms, visibility, key)
    checker.objects = {k: v for k, v in checker.objects.items() if not v["structural"]}
    for profile in ("revsi", "vsibench"):
        candidates = generate_candidates(objects, rooms, visibility, None, None, key=key, budget="all",
                                         profile=profile, config=0)
        assert candidates.height > 0
        for row in candidates.iter_rows(named=True):
            checker.check(row)
        final = finalize_qa(candidates, profile=profile, seed=0)
        assert final.height > 0 and set(final["id"]) <= set(candidates["id"])
    sizes = candidates.filter(pl.col("question_type") == "object_size_estimation")
    assert sizes.height > 0
