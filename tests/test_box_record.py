"""The row-axis box record parser shared by the ScanNet++, ARKitScenes, 3RScan, MultiScan and VSI-Bench readers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.errors import ScanError
from pipeline.scene.readers.box_record import parse_row_axes_box

KEY, FILE, WHERE = "scannetpp/abc", "scans/segments_anno.json", "segGroups[3].obb"
# Box axes (rows): x' = world y, y' = world z, z' = world x.
GOOD = {"centroid": [1, 2, 0.5], "axesLengths": [2, 1, 0.5], "normalizedAxes": [0, 1, 0, 0, 0, 1, 1, 0, 0]}


def _error(record) -> str:
    with pytest.raises(ScanError) as info:
        parse_row_axes_box(record, key=KEY, file=FILE, where=WHERE)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{KEY}: {FILE}: {WHERE}")
    assert (info.value.key, info.value.file) == (KEY, FILE)
    return message.removeprefix(f"{KEY}: {FILE}: ")


def _with(**fields) -> dict:
    return {**GOOD, **fields}


def test_good_record_becomes_a_box_with_the_rows_as_axes():
    box = parse_row_axes_box(GOOD, key=KEY, file=FILE, where=WHERE)
    assert box.center.tolist() == [1.0, 2.0, 0.5]
    assert box.extent.tolist() == [2.0, 1.0, 0.5]
    rows = np.reshape(GOOD["normalizedAxes"], (3, 3))
    assert np.array_equal(box.rotation, rows.T)  # our boxes keep the axes as columns
    assert box.vertical_axis == 1


def test_zero_length_is_accepted():
    box = parse_row_axes_box(_with(axesLengths=[2, 0, 0.5]), key=KEY, file=FILE, where=WHERE)
    assert box.extent.tolist() == [2.0, 0.0, 0.5]


@pytest.mark.parametrize(
    "record, problem",
    [
        ([1, 2, 3], "segGroups[3].obb: expected an object with centroid, axesLengths and normalizedAxes, got list"),
        ("obb", "segGroups[3].obb: expected an object with centroid, axesLengths and normalizedAxes, got a string"),
        ({k: v for k, v in GOOD.items() if k != "centroid"}, "segGroups[3].obb.centroid: missing"),
        ({k: v for k, v in GOOD.items() if k != "normalizedAxes"}, "segGroups[3].obb.normalizedAxes: missing"),
        (_with(axesLengths=[1, 2]), "segGroups[3].obb.axesLengths: expected 3 finite numbers, got 2"),
        (_with(normalizedAxes=[1, 0, 0, 0, 1, 0, 0, 0, 1, 0]),
         "segGroups[3].obb.normalizedAxes: expected 9 finite numbers, got 10"),
        (_with(normalizedAxes=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
         "segGroups[3].obb.normalizedAxes: expected 9 finite numbers, got 3"),
        (_with(centroid=[0, math.nan, 0]), "segGroups[3].obb.centroid: expected 3 finite numbers, got nan at [1]"),
        (_with(centroid=[0, 0, math.inf]), "segGroups[3].obb.centroid: expected 3 finite numbers, got inf at [2]"),
        (_with(centroid="1 2 3"), "segGroups[3].obb.centroid: expected 3 finite numbers, got a string"),
        (_with(centroid=None), "segGroups[3].obb.centroid: expected 3 finite numbers, got null"),
        (_with(axesLengths=[1, "2", 3]),
         "segGroups[3].obb.axesLengths: expected 3 finite numbers, got a string at [1]"),
        (_with(axesLengths=[1, True, 3]),
         "segGroups[3].obb.axesLengths: expected 3 finite numbers, got a boolean at [1]"),
        (_with(axesLengths=[1, 2, -0.25]),
         "segGroups[3].obb.axesLengths: expected lengths of 0 or more, got -0.25 at [2]"),
    ],
    ids=[
        "list", "string", "missing-centroid", "missing-axes", "short-lengths", "long-axes", "nested-axes",
        "nan", "inf", "string-field", "null-field", "string-item", "boolean-item", "negative-length",
    ],
)
def test_bad_record_is_one_line_naming_file_and_field(record, problem):
    assert _error(record) == problem


def test_where_is_the_callers_context():
    with pytest.raises(ScanError) as info:
        parse_row_axes_box(_with(axesLengths=[1]), key="multiscan/s", file="s.annotations.json",
                           where="objects[1] (chair.1) obb")
    assert str(info.value) == (
        "multiscan/s: s.annotations.json: objects[1] (chair.1) obb.axesLengths: expected 3 finite numbers, got 1"
    )
