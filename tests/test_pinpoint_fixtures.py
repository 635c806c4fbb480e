"""Real geometry: the ScanNet fixture mesh and the MultiScan box-only annotation."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline import schemas
from pipeline.config import Config
from pipeline.pinpoint.relations import RELATIONS
from pipeline.pinpoint.representation import build_representation
from pipeline.scene.parsed import ParsedScan, SceneObject
from pipeline.scene.tables import object_rows


def _check(targets: pl.DataFrame, neighbors: pl.DataFrame, objects: pl.DataFrame) -> None:
    labels = objects["raw_label"].str.to_lowercase()
    for label in targets["label"]:
        assert (labels == label).sum() == 1  # unique in the scene
    assert set(neighbors["relation"]) <= set(RELATIONS)
    assert neighbors["shortest_distance"].min() >= 0
    assert neighbors.filter(pl.col("is_support")).group_by("target_id").len()["len"].max() in (None, 1)
    structural = set(objects.filter(pl.col("structural"))["object_id"])
    assert not structural & set(neighbors["neighbor_id"])
    assert set(neighbors["target_id"]) <= set(targets["object_id"])


@pytest.fixture(scope="module")
def scannet(fixtures_dir):
    from pipeline.scene.readers import read_scan

    config = Config(label_map=str(fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv"))
    parsed = read_scan(str(fixtures_dir / "scannet" / "scene0000_00"), config)
    rows, _ = object_rows(parsed)
    objects = schemas.from_rows("objects", rows)
    return parsed, objects, *build_representation(parsed.key, objects, parsed)


def test_scannet_fixture(scannet):
    parsed, objects, targets, neighbors = scannet
    _check(targets, neighbors, objects)
    assert targets.height >= 5 and neighbors.height >= 10
    assert set(neighbors["distance_source"]) == {"mesh"}
    support = dict(zip(targets["label"], targets["support_label"]))
    # what the scan shows: small appliances on the kitchen counter, the backpack on the floor
    assert support["toaster"] == "counter" and support["toaster oven"] == "counter"
    assert support["backpack"] == "floor" and support["tissue box"] == "nightstand"


def test_multiscan_box_only_annotation(fixtures_dir):
    from pipeline.scene.readers.multiscan import read_multiscan_annotations

    path = fixtures_dir / "multiscan" / "scene_00000_00.annotations.json"
    boxes = read_multiscan_annotations(path)
    parsed = ParsedScan(
        "multiscan", "scene_00000_00", str(path), None,
        [SceneObject(o.object_id, o.label, None, o.box) for o in boxes if o.box is not None],
    )
    rows, _ = object_rows(parsed)
    objects = schemas.from_rows("objects", rows)
    targets, neighbors = build_representation(parsed.key, objects, parsed)
    _check(targets, neighbors, objects)
    assert targets.height >= 1 and neighbors.height >= 1
    assert set(neighbors["distance_source"]) == {"box"} and set(targets["distance_source"]) == {"box"}
