"""The row-axis box record shared by ScanNet++, ARKitScenes, 3RScan, MultiScan and VSI-Bench.

Every one of those formats stores an annotated box as
``{centroid: 3 numbers, axesLengths: 3 numbers, normalizedAxes: 9 numbers}``
with one box axis per *row* of ``normalizedAxes``. ``parse_row_axes_box`` is
the single place that validates such a record; each reader passes its own
``where`` (the path of the record in its file, e.g. ``segGroups[3].obb``), so a
bad value fails with one line naming the file and the field::

    scannetpp/abc: scans/segments_anno.json: segGroups[3].obb.axesLengths: expected 3 finite numbers, got 2

Lengths may be zero (flat annotations exist) but not negative. The axes are
taken as stored: orthonormality is the caller's business (VSI-Bench snaps
its three-decimal rotations).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real

import numpy as np

from pipeline.errors import ScanError
from pipeline.geometry.obb import box_from_normalized_axes
from pipeline.scene.parsed import OrientedBox

ROW_AXES_FIELDS = (("centroid", 3), ("axesLengths", 3), ("normalizedAxes", 9))

_JSON_KINDS = ((str, "a string"), (bool, "a boolean"), (Real, "a number"), (Mapping, "an object"))


def _kind(value) -> str:
    """JSON-style name of what a value is, for "expected ..., got <kind>"."""
    if value is None:
        return "null"
    for kind, name in _JSON_KINDS:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _finite_numbers(value, size: int, field: str, *, key: str, file: str) -> np.ndarray:
    expected = f"{field}: expected {size} finite numbers"
    if not isinstance(value, (list, tuple)):
        raise ScanError(key, file, f"{expected}, got {_kind(value)}")
    if len(value) != size:
        raise ScanError(key, file, f"{expected}, got {len(value)}")
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, Real):
            raise ScanError(key, file, f"{expected}, got {_kind(item)} at [{i}]")
        if not math.isfinite(item):
            raise ScanError(key, file, f"{expected}, got {item} at [{i}]")
    return np.asarray(value, dtype=float)


def parse_row_axes_box(record, *, key: str, file: str, where: str) -> OrientedBox:
    """``{centroid, axesLengths, normalizedAxes}`` (one box axis per row) -> ``OrientedBox``, or a ScanError."""
    if not isinstance(record, Mapping):
        expected = "an object with centroid, axesLengths and normalizedAxes"
        raise ScanError(key, file, f"{where}: expected {expected}, got {_kind(record)}")
    values = {}
    for name, size in ROW_AXES_FIELDS:
        field = f"{where}.{name}"
        if name not in record:
            raise ScanError(key, file, f"{field}: missing")
        values[name] = _finite_numbers(record[name], size, field, key=key, file=file)
    lengths = values["axesLengths"]
    if np.any(lengths < 0):
        i = int(np.argmax(lengths < 0))
        problem = f"expected lengths of 0 or more, got {lengths[i]:g} at [{i}]"
        raise ScanError(key, file, f"{where}.axesLengths: {problem}")
    return box_from_normalized_axes(values["centroid"], lengths, values["normalizedAxes"])
