"""One expectation suite per released table, as data.

Each rule names what it guards against, so a blocked release says which
expectation failed on which rows. Rules are (Great Expectations class name,
kwargs) pairs rather than expectation objects so this module imports without
Great Expectations (which costs seconds); the runner builds the objects.

Suites validate *views* (see ``expectations.derived``): the released table
plus columns that carry cross-table facts (referential integrity,
answerability) and the per-type distribution summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.schemas import BUDGETS, DATASETS, SCHEMAS

PROFILES = ("revsi", "vsibench", "pinpointqa")
RELATIONS = ("on", "under", "above", "below", "side_above", "side_below", "next_to", "near", "attached_to")
VIDEO_KINDS = ("real", "query_drop", "first_frame", "black")


@dataclass(frozen=True)
class Rule:
    name: str  # "<table>.<what>"
    expectation: str  # Great Expectations class name
    kwargs: dict[str, Any]
    guards: str  # what a failure means, for reviewers


@dataclass
class Suite:
    table: str  # the view validated
    id_column: str | None  # column that names failing rows in reports
    rules: list[Rule] = field(default_factory=list)


def _true(table: str, column: str, guards: str) -> Rule:
    return Rule(f"{table}.{column}", "ExpectColumnValuesToBeInSet", {"column": column, "value_set": [True]}, guards)


def _columns(table: str) -> Rule:
    return Rule(
        f"{table}.schema",
        "ExpectTableColumnsToMatchOrderedList",
        {"column_list": list(SCHEMAS[table].names) + _DERIVED.get(table, [])},
        "columns missing, extra or out of order against pipeline/schemas.py",
    )


def _not_null(table: str, *columns: str) -> list[Rule]:
    return [
        Rule(f"{table}.{c}_not_null", "ExpectColumnValuesToNotBeNull", {"column": c}, f"{c} left empty")
        for c in columns
    ]


def _in_set(table: str, column: str, values, guards: str) -> Rule:
    return Rule(f"{table}.{column}_in_set", "ExpectColumnValuesToBeInSet", {"column": column, "value_set": list(values)}, guards)


def _between(table: str, column: str, lo=None, hi=None, guards: str = "", strict_min: bool = False) -> Rule:
    kwargs: dict[str, Any] = {"column": column, "min_value": lo, "max_value": hi}
    if strict_min:
        kwargs["strict_min"] = True
    return Rule(f"{table}.{column}_range", "ExpectColumnValuesToBeBetween", kwargs, guards)


def _unique(table: str, columns: list[str], guards: str) -> Rule:
    if len(columns) == 1:
        return Rule(f"{table}.{columns[0]}_unique", "ExpectColumnValuesToBeUnique", {"column": columns[0]}, guards)
    return Rule(
        f"{table}.{'_'.join(columns)}_unique", "ExpectCompoundColumnsToBeUnique", {"column_list": columns}, guards
    )


# Columns the views add to each released table (see expectations.derived).
_DERIVED: dict[str, list[str]] = {
    "scans": [],
    "objects": ["scan_exists", "extent_positive"],
    "rooms": ["scan_exists"],
    "frame_samples": ["scan_exists"],
    "object_visibility": ["object_exists"],
    "qa": [
        "used_objects_exist",
        "scan_exists",
        "answerable",
        "options_distinct",
        "answer_in_options",
        "count_in_range",
        "geometry_is_json",
        "numeric_positive",
    ],
    "pinpoint_targets": ["object_exists"],
    "pinpoint_neighbors": ["object_exists"],
}


def build_suites(frequency_ceiling: float = 0.7, letter_tolerance: float = 0.05) -> list[Suite]:
    return [
        Suite(
            "scans",
            "key",
            [
                _columns("scans"),
                *_not_null("scans", "key", "dataset", "scene_id", "checksum"),
                _unique("scans", ["key"], "a scan listed twice"),
                _in_set("scans", "dataset", DATASETS, "unknown dataset name"),
                _between("scans", "frame_count", 0, None, "negative frame count"),
            ],
        ),
        Suite(
            "objects",
            "key",
            [
                _columns("objects"),
                *_not_null("objects", "key", "object_id", "raw_label", "category"),
                _unique("objects", ["key", "object_id"], "two objects share an id in one scan"),
                _true("objects", "extent_positive", "an object box with a zero or negative side"),
                _true("objects", "scan_exists", "an object of a scan missing from scans"),
            ],
        ),
        Suite(
            "rooms",
            "key",
            [
                _columns("rooms"),
                _between("rooms", "area_m2", 0, None, "room area not positive", strict_min=True),
                _in_set("rooms", "kind", ("scene", "main"), "room kind is neither scene nor main"),
                _in_set("rooms", "source", ("annotated", "derived"), "room source unknown"),
                _true("rooms", "scan_exists", "a room of a scan missing from scans"),
            ],
        ),
        Suite(
            "frame_samples",
            "key",
            [
                _columns("frame_samples"),
                _in_set("frame_samples", "budget", BUDGETS, "unknown frame budget"),
                _unique("frame_samples", ["key", "budget", "rank"], "two frames at one rank of a budget"),
                _between("frame_samples", "timestamp", 0, None, "negative timestamp"),
                _true("frame_samples", "scan_exists", "frames of a scan missing from scans"),
            ],
        ),
        Suite(
            "object_visibility",
            "key",
            [
                _columns("object_visibility"),
                _in_set("object_visibility", "budget", BUDGETS, "unknown frame budget"),
                _between("object_visibility", "max_fraction", 0.0, 1.0, "frame fraction outside [0, 1]"),
                _unique("object_visibility", ["key", "budget", "object_id"], "an object decided twice for a budget"),
                _in_set("object_visibility", "rule", ("fraction", "pixel_floor", "override"), "unknown visibility rule"),
                _true("object_visibility", "object_exists", "visibility of an object missing from objects"),
            ],
        ),
        Suite(
            "qa",
            "id",
            [
                _columns("qa"),
                *_not_null("qa", "id", "key", "question_type", "question", "ground_truth", "budget", "profile"),
                _unique("qa", ["id"], "duplicated question id (reviewer verdicts would attach to the wrong question)"),
                _in_set("qa", "budget", BUDGETS, "unknown frame budget"),
                _in_set("qa", "profile", PROFILES, "unknown profile"),
                _in_set("qa", "video_kind", VIDEO_KINDS, "unknown video kind"),
                _true("qa", "options_distinct", "two options with the same letter or text"),
                _true("qa", "answer_in_options", "the answer letter is not among the options"),
                _true("qa", "used_objects_exist", "a question names an object missing from objects"),
                _true("qa", "scan_exists", "a question about a scan missing from scans"),
                _true("qa", "answerable", "a named object is not visible under the question's frame budget"),
                _true("qa", "count_in_range", "a counting answer below 1 on a real video (0 only on dummy videos)"),
                _true("qa", "numeric_positive", "a distance, size or area answer that is not positive"),
                _true("qa", "geometry_is_json", "the audit geometry is not valid JSON"),
            ],
        ),
        Suite(
            "qa_distribution",
            "question_type",
            [
                _between(
                    "qa_distribution",
                    "frequency_baseline",
                    0.0,
                    frequency_ceiling,
                    f"always giving the most frequent answer scores above {frequency_ceiling:.0%}: an answer prior",
                ),
                _between(
                    "qa_distribution",
                    "letter_deviation",
                    0.0,
                    letter_tolerance,
                    f"a correct letter's share is more than {letter_tolerance:.0%} away from uniform",
                ),
            ],
        ),
        Suite(
            "pinpoint_targets",
            "key",
            [
                _columns("pinpoint_targets"),
                _unique("pinpoint_targets", ["key", "object_id"], "a target listed twice"),
                _true("pinpoint_targets", "object_exists", "a target missing from objects"),
            ],
        ),
        Suite(
            "pinpoint_neighbors",
            "key",
            [
                _columns("pinpoint_neighbors"),
                _in_set("pinpoint_neighbors", "relation", RELATIONS, "a relation outside the nine of SPEC §5"),
                _between("pinpoint_neighbors", "shortest_distance", 0.0, None, "negative distance"),
                _between("pinpoint_neighbors", "centroid_distance", 0.0, None, "negative distance"),
                _true("pinpoint_neighbors", "object_exists", "a neighbour missing from objects"),
            ],
        ),
    ]
