"""Arrow schemas of every table that flows between steps.

Tables are the contract between pipeline steps, Dagster assets, Great
Expectations suites and exports: each is defined here once and everything else
imports it. Steps exchange polars DataFrames; ``conform`` casts a frame to its
schema (column set, order and types) so that two steps can never silently
disagree about a column, and Parquet files written from conformed frames are
byte-identical for identical content.

Conventions (SPEC §1): metres, z up. ``pose`` is the 4x4 camera-to-world
matrix in OpenCV camera axes, row-major (16 floats). ``intrinsics`` is the 3x3
pinhole matrix of the *output* image (after resizing), row-major (9 floats).
``rotation`` is the 3x3 OBB rotation whose *columns* are the box axes, stored
row-major (9 floats). ``frame_index`` is always the index of the frame in its
source stream, so it stays valid across budgets. ``budget`` is one of
the run's frame budgets (``pipeline.frames.budgets.frame_budgets``: ``"16"``,
``"32"``, ``"64"``, ``"all"`` by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.datasets import DATASET_NAMES

DATASETS: tuple[str, ...] = DATASET_NAMES  # pipeline/datasets.py

_f64 = pa.float64()
_i32 = pa.int32()
_str = pa.string()
_bool = pa.bool_()
_vec3 = pa.list_(_f64)
_mat = pa.list_(_f64)

SCHEMAS: dict[str, pa.Schema] = {
    # One row per scan: where it came from and what it holds.
    "scans": pa.schema(
        [
            ("key", _str),  # "{dataset}/{scene_id}"
            ("dataset", _str),
            ("scene_id", _str),
            ("source_uri", _str),
            ("source_frame_count", _i32),  # frames in the source stream
            ("frame_count", _i32),  # frames in the all-frame sequence (after fps resampling, valid poses only)
            ("dropped_frames", _i32),  # frames dropped for a NaN/inf pose
            ("fps", _f64),  # all-frame rate
            ("source_fps", _f64),
            ("image_width", _i32),
            ("image_height", _i32),
            ("has_frames", _bool),
            ("has_mesh", _bool),
            ("vertex_count", _i32),
            ("triangle_count", _i32),
            ("scene_type", _str),
            ("checksum", _str),  # sha256 over the input files' bytes
            ("warnings", pa.list_(_str)),
            ("image_rotation", _i32),  # degrees clockwise that turn the stored frames sky-up (ARKit, MultiScan)
        ]
    ),
    # One row per annotated object instance.
    "objects": pa.schema(
        [
            ("key", _str),
            ("object_id", _i32),
            ("raw_label", _str),
            ("category", _str),  # label map category (or the raw label where unmapped)
            ("nyu40_id", _i32),  # null where unmapped
            ("scannet200_id", _i32),  # null where not a ScanNet200 class
            ("label_mapped", _bool),
            ("center", _vec3),
            ("extent", _vec3),  # full side lengths along the rotation's columns
            ("rotation", _mat),  # 3x3, columns are box axes, row-major
            ("vertical_axis", pa.int8()),  # index of the rotation column most aligned with world z
            ("vertex_count", _i32),
            ("triangle_count", _i32),
            ("structural", _bool),  # wall, floor, ceiling, ...
            ("small_object", _bool),  # label in the PinpointQA small-object vocabulary
            ("box_source", _str),  # "mesh" (gravity-aligned OBB of the vertices) | "annotation"
        ]
    ),
    # Room polygons in the floor plane.
    "rooms": pa.schema(
        [
            ("key", _str),
            ("room_id", _i32),
            ("kind", _str),  # "scene" (whole captured space) | "main" (dominant room)
            ("polygon_wkb", pa.binary()),
            ("area_m2", _f64),
            ("source", _str),  # "annotated" | "derived"
        ]
    ),
    # Every frame of the source stream with its camera.
    "frames": pa.schema(
        [
            ("key", _str),
            ("frame_index", _i32),
            ("timestamp", _f64),  # seconds from the first frame
            ("pose", _mat),  # 4x4 camera-to-world, row-major; NaN where invalid
            ("intrinsics", _mat),  # 3x3 of the output image, row-major
            ("width", _i32),
            ("height", _i32),
            ("valid", _bool),  # finite pose
            ("in_all_frame", _bool),  # kept by the fps resampling of the all-frame sequence
            ("image_file", _str),  # colour image (or its container) relative to the scan folder; "" when none
            ("image_member", _i32),  # frame index inside a container image_file (.sens, video); -1 for an image file
        ]
    ),
    # Nested budget samples (SPEC §2).
    "frame_samples": pa.schema(
        [
            ("key", _str),
            ("budget", _str),
            ("rank", _i32),  # position within the budget's video
            ("frame_index", _i32),
            ("timestamp", _f64),
        ]
    ),
    # Sparse per-frame, per-object visible pixels (all-frame sequence).
    "visibility": pa.schema(
        [
            ("key", _str),
            ("frame_index", _i32),
            ("object_id", _i32),
            ("visible_pixels", _i32),
            ("frame_fraction", _f64),
            ("bbox", pa.list_(_i32)),  # x_min, y_min, x_max, y_max of the visible pixels
            # True: visible_pixels, frame_fraction and bbox are the full-resolution cast's (always with cast = full).
            # False: an estimate - of the coarse-to-fine cast (visibility.cast = adaptive: a count inside a sound
            # interval that no decision read; which rows exist is exact either way, and every object_visibility
            # column is the full cast's) or of a reduced grid (resolution_scale < 1). Null in tables written before
            # the column existed.
            ("pixels_exact", _bool),
        ]
    ),
    # Per budget and object: the SPEC §3 visibility decision. Every column is exact with either visibility.cast
    # (adaptive proves each count these read: pipeline/visibility/coarse_to_fine.py).
    "object_visibility": pa.schema(
        [
            ("key", _str),
            ("budget", _str),
            ("object_id", _i32),
            ("best_frame", _i32),  # null when never seen in the budget's frames
            ("max_fraction", _f64),
            ("max_pixels", _i32),
            ("frames_visible", _i32),  # sampled frames with at least one visible pixel
            ("first_frame", _i32),  # first sampled frame meeting the rule (appearance order)
            ("first_timestamp", _f64),
            ("visible", _bool),
            ("rule", _str),  # "fraction" | "pixel_floor" | "override"
        ]
    ),
    # Reviewer overrides of computed visibility.
    "visibility_overrides": pa.schema(
        [
            ("key", _str),
            ("object_id", _i32),
            ("frame_index", _i32),
            ("visible", _bool),
        ]
    ),
    # Dummy (evidence-absent) videos for the 16-frame budget.
    "dummy_videos": pa.schema(
        [
            ("key", _str),
            ("video_id", _str),  # the video file's id: hash of scan, kind and frame list (shared by equal videos)
            ("kind", _str),  # "query_drop" | "first_frame" | "black"
            ("object_ids", pa.list_(_i32)),
            ("frame_indices", pa.list_(_i32)),  # source frames; -1 for a black frame
            ("path", _str),  # relative to the output root
        ]
    ),
    # Questions. qa_candidates holds everything generated per scan; qa is the
    # filtered, balanced dataset-wide table.
    "qa": pa.schema(
        [
            ("id", _str),  # stable hash of scan, budget, type, question text and used objects
            ("key", _str),
            ("dataset", _str),
            ("scene_id", _str),
            ("profile", _str),  # "revsi" | "vsibench" | "pinpointqa"
            ("budget", _str),
            ("question_type", _str),
            ("template", _str),  # template id
            ("question", _str),
            ("options", pa.list_(_str)),  # "A. text"; empty for numeric questions
            ("ground_truth", _str),
            ("answer_value", _f64),  # numeric answer, null for choices
            ("used_obj_ids", pa.list_(_i32)),
            ("video", _str),  # video path relative to the output root
            ("video_kind", _str),  # "real" | "query_drop" | "first_frame" | "black"
            ("distance_source", _str),  # "obb" | "mesh" | null
            ("geometry", _str),  # JSON: the measurements behind the answer, for auditing
            ("instruction", _str),  # PinpointQA answer-format instruction, null elsewhere
            ("split", _str),  # "train" | "val" | "test" | null
        ]
    ),
    # Questions the answer-distribution control (pipeline/qa/distribution.py) dropped, and why.
    "qa_distribution_drops": pa.schema(
        [
            ("id", _str),
            ("key", _str),
            ("profile", _str),
            ("budget", _str),
            ("video_kind", _str),
            ("question_type", _str),
            ("answer", _str),  # correct option text (choices) or ground truth (numbers)
            ("answer_class", _str),  # the class the control counted: option text or log-space bin
            ("reason", _str),
        ]
    ),
    # What became of each all-frame question under one frame sampler (pipeline/sampling/answers.py).
    "sampled_answers": pa.schema(
        [
            ("id", _str),  # the all-frame question's id
            ("key", _str),
            ("profile", _str),
            ("question_type", _str),
            ("sampler", _str),  # the sampler's label (its budget name in the sampled qa table)
            ("frames", _i32),  # frames the sampler takes from the scan's all-frame video
            ("all_frame_answer", _str),
            ("answer", _str),  # ground truth under the sampled frames; null when unanswerable
            ("outcome", _str),  # "stays" | "changes" | "unanswerable"
            ("reason", _str),  # why it is unanswerable; null otherwise
        ]
    ),
    # Which registered scan partitions a release holds, decided from the Dagster instance (pipeline/release/membership.py).
    "scan_membership": pa.schema(
        [
            ("key", _str),  # "{dataset}/{scene_id}"
            ("state", _str),  # built | failed | checks_failed | in_progress | not_built | stale
            ("error", _str),  # one line: why the scan is not in the release ("" when built)
        ]
    ),
    # PinpointQA intermediate spatial representation.
    "pinpoint_targets": pa.schema(
        [
            ("key", _str),
            ("object_id", _i32),
            ("label", _str),
            ("category", _str),  # reported category (phone/smartphone/mobile phone -> phone)
            ("center", _vec3),
            ("support_object_id", _i32),  # null when no surface supports it
            ("support_label", _str),
            ("neighbor_count", _i32),
            ("distance_source", _str),  # "mesh" | "box"
        ]
    ),
    "pinpoint_neighbors": pa.schema(
        [
            ("key", _str),
            ("target_id", _i32),
            ("neighbor_id", _i32),
            ("neighbor_label", _str),
            ("centroid_distance", _f64),
            ("shortest_distance", _f64),
            ("horizontal_distance", _f64),
            ("vertical_offset", _f64),  # target centroid z minus neighbour centroid z
            ("contact", _bool),
            ("same_level", _bool),
            ("relation", _str),
            ("is_support", _bool),
            ("distance_source", _str),  # "mesh" | "box"
        ]
    ),
}
SCHEMAS["qa_candidates"] = SCHEMAS["qa"]
# PinpointQA questions: per scan (split null), then dataset-wide with scene-level splits.
SCHEMAS["pinpoint_qa_candidates"] = SCHEMAS["qa"]
SCHEMAS["pinpoint_qa"] = SCHEMAS["qa"]
# What Iterative Bias Pruning dropped from PinpointQA (the qa step appends it to ``qa_distribution_drops``).
SCHEMAS["pinpoint_qa_drops"] = SCHEMAS["qa_distribution_drops"]


def schema(name: str) -> pa.Schema:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise KeyError(f"no table schema named {name!r}; known: {sorted(SCHEMAS)}") from None


def empty(name: str) -> pl.DataFrame:
    return pl.from_arrow(schema(name).empty_table())


def from_rows(name: str, rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """Build a conformed frame from row dicts; missing nullable keys become null."""
    sch = schema(name)
    rows = list(rows)
    table = pa.Table.from_pylist(rows, schema=sch) if rows else sch.empty_table()
    return pl.from_arrow(table)


def selected_arrow(name: str, df: pl.DataFrame) -> pa.Table:
    """The frame's columns in its table's schema order as Arrow, not yet cast; fails on missing or extra columns."""
    sch = schema(name)
    missing = [f.name for f in sch if f.name not in df.columns]
    extra = [c for c in df.columns if c not in sch.names]
    if missing or extra:
        raise ValueError(f"table {name!r}: missing columns {missing}, unexpected columns {extra}")
    return df.select(sch.names).to_arrow()


def to_arrow(name: str, df: pl.DataFrame) -> pa.Table:
    """Cast a frame to its table's Arrow schema, failing on missing or extra columns."""
    return selected_arrow(name, df).cast(schema(name))


def conform(name: str, df: pl.DataFrame) -> pl.DataFrame:
    return pl.from_arrow(to_arrow(name, df))
