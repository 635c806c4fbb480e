"""One expectation suite per released table, as data.

Each rule says in plain words what must hold (``meaning``, shown first in
Data Docs and given to Great Expectations as the expectation's description)
and what a failure means (``guards``), so a blocked release says which
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

from pipeline.schemas import DATASETS, SCHEMAS

PROFILES = ("revsi", "vsibench", "pinpointqa")
RELATIONS = ("on", "under", "above", "below", "side_above", "side_below", "next_to", "near", "attached_to")
VIDEO_KINDS = ("real", "query_drop", "first_frame", "black")
DUMMY_KINDS = VIDEO_KINDS[1:]


@dataclass(frozen=True)
class Rule:
    name: str  # "<table>.<what>"
    expectation: str  # Great Expectations class name
    kwargs: dict[str, Any]
    guards: str  # what a failure means, for reviewers
    meaning: str = ""  # what holds when it passes, in plain words (Data Docs, GX's description)


@dataclass
class Suite:
    table: str  # the view validated
    id_column: str | None  # column that names failing rows in reports
    rules: list[Rule] = field(default_factory=list)


def _true(table: str, column: str, guards: str, meaning: str) -> Rule:
    """A helper column of the view must be true: ``meaning`` says what that stands for."""
    return Rule(
        f"{table}.{column}", "ExpectColumnValuesToBeInSet", {"column": column, "value_set": [True]}, guards, meaning
    )


def _words(columns) -> str:
    return ", ".join(f"`{c}`" for c in columns)


def _columns(table: str) -> Rule:
    return Rule(
        f"{table}.schema",
        "ExpectTableColumnsToMatchOrderedList",
        {"column_list": list(SCHEMAS[table].names) + _DERIVED.get(table, [])},
        "columns missing, extra or out of order against pipeline/schemas.py",
        f"the {table} table has exactly the columns pipeline/schemas.py lists, in that order (then the gate's helper columns)",
    )


def _not_null(table: str, *columns: str) -> list[Rule]:
    return [
        Rule(f"{table}.{c}_not_null", "ExpectColumnValuesToNotBeNull", {"column": c}, f"{c} left empty",
             f"every row of {table} has a `{c}`")
        for c in columns
    ]


def _in_set(table: str, column: str, values, guards: str) -> Rule:
    values = list(values)
    meaning = f"every `{column}` is one of {', '.join(map(str, values))}"
    return Rule(f"{table}.{column}_in_set", "ExpectColumnValuesToBeInSet", {"column": column, "value_set": values}, guards, meaning)


def _between(
    table: str, column: str, lo=None, hi=None, guards: str = "", strict_min: bool = False, meaning: str = ""
) -> Rule:
    kwargs: dict[str, Any] = {"column": column, "min_value": lo, "max_value": hi}
    if strict_min:
        kwargs["strict_min"] = True
    low = None if lo is None else f"{'above' if strict_min else 'at least'} {lo:g}"
    high = None if hi is None else f"at most {hi:g}"
    meaning = meaning or f"every `{column}` (where present) is {' and '.join(b for b in (low, high) if b)}"
    return Rule(f"{table}.{column}_range", "ExpectColumnValuesToBeBetween", kwargs, guards, meaning)


def _unique(table: str, columns: list[str], guards: str) -> Rule:
    meaning = f"no two rows of {table} share {'a' if len(columns) == 1 else 'one'} {_words(columns)}"
    if len(columns) == 1:
        return Rule(f"{table}.{columns[0]}_unique", "ExpectColumnValuesToBeUnique", {"column": columns[0]}, guards, meaning)
    return Rule(
        f"{table}.{'_'.join(columns)}_unique", "ExpectCompoundColumnsToBeUnique", {"column_list": columns}, guards, meaning
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
    "dummy_videos": ["scan_exists", "objects_exist", "object_set", "frames_match_kind", "path_names_video"],
    "qa_distribution_drops": ["scan_exists", "not_released"],
}


# Profiles that reproduce a benchmark's biases on purpose (vsibench) are bounded only against a degenerate
# generator: (nearly) one answer for a whole type. VSI-Bench's own counting baseline is 62.1%, and 40-frame
# synthetic scenes gave the vsibench profile 71-76%, which is the scenes' prior, not a fault to block a release on.
REPRODUCED_FREQUENCY_CEILING = 0.95


def build_suites(
    frequency_ceiling: float = 0.7, letter_tolerance: float = 0.05, *, budgets: tuple[str, ...]
) -> list[Suite]:
    """The suites of the released tables; ``budgets`` (the run's ``frame_budgets(config)``) are the only budget
    names a table may hold."""
    budgets = tuple(budgets)
    reproduced_ceiling = max(REPRODUCED_FREQUENCY_CEILING, frequency_ceiling)
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
                _true("objects", "extent_positive", "an object box with a zero or negative side",
                      "every object box has three positive side lengths"),
                _true("objects", "scan_exists", "an object of a scan missing from scans",
                      "every object belongs to a scan listed in scans"),
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
                _true("rooms", "scan_exists", "a room of a scan missing from scans", "every room belongs to a scan listed in scans"),
            ],
        ),
        Suite(
            "frame_samples",
            "key",
            [
                _columns("frame_samples"),
                _in_set("frame_samples", "budget", budgets, "unknown frame budget"),
                _unique("frame_samples", ["key", "budget", "rank"], "two frames at one rank of a budget"),
                _between("frame_samples", "timestamp", 0, None, "negative timestamp"),
                _true("frame_samples", "scan_exists", "frames of a scan missing from scans",
                      "every sampled frame belongs to a scan listed in scans"),
            ],
        ),
        Suite(
            "object_visibility",
            "key",
            [
                _columns("object_visibility"),
                _in_set("object_visibility", "budget", budgets, "unknown frame budget"),
                _between("object_visibility", "max_fraction", 0.0, 1.0, "frame fraction outside [0, 1]"),
                _unique("object_visibility", ["key", "budget", "object_id"], "an object decided twice for a budget"),
                _in_set("object_visibility", "rule", ("fraction", "pixel_floor", "override"), "unknown visibility rule"),
                _true("object_visibility", "object_exists", "visibility of an object missing from objects",
                      "every visibility decision is about an object listed in objects"),
            ],
        ),
        Suite(
            "qa",
            "id",
            [
                _columns("qa"),
                *_not_null("qa", "id", "key", "question_type", "question", "ground_truth", "budget", "profile"),
                _unique("qa", ["id"], "duplicated question id (reviewer verdicts would attach to the wrong question)"),
                _in_set("qa", "budget", budgets, "unknown frame budget"),
                _in_set("qa", "profile", PROFILES, "unknown profile"),
                _in_set("qa", "video_kind", VIDEO_KINDS, "unknown video kind"),
                _true("qa", "options_distinct", "two options with the same letter or text",
                      "every choice question's options have distinct letters and distinct texts"),
                _true("qa", "answer_in_options", "the answer letter is not among the options",
                      "every choice question's answer letter is one of its options"),
                _true("qa", "used_objects_exist", "a question names an object missing from objects",
                      "every object a question names is listed in objects for its scan"),
                _true("qa", "scan_exists", "a question about a scan missing from scans",
                      "every question is about a scan listed in scans"),
                _true("qa", "answerable", "a named object is not visible under the question's frame budget",
                      "every question names only objects visible in its budget's frames (dummy videos excepted)"),
                _true("qa", "count_in_range", "a counting answer below 1 on a real video (0 only on dummy videos)",
                      "every counting answer is at least 1 on a real video and 0 or more on a dummy video"),
                _true("qa", "numeric_positive", "a distance, size or area answer that is not positive",
                      "every distance, size or area answer is a positive number"),
                _true("qa", "geometry_is_json", "the audit geometry is not valid JSON",
                      "every question's audit geometry (the measurements behind its answer) is valid JSON"),
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
                    meaning=f"for every profile with an answer-distribution control (revsi), budget and question type "
                    f"with enough questions, always giving the most frequent answer scores at most {frequency_ceiling:.0%}",
                ),
                _between(
                    "qa_distribution",
                    "reproduced_frequency_baseline",
                    0.0,
                    reproduced_ceiling,
                    f"always giving the most frequent answer scores above {reproduced_ceiling:.0%}: a degenerate generator",
                    meaning=f"for every profile that reproduces a benchmark's biases on purpose (vsibench), budget and "
                    f"question type with enough questions, always giving the most frequent answer scores at most "
                    f"{reproduced_ceiling:.0%} (its priors are the benchmark's; only a near-constant type is a fault)",
                ),
                _between(
                    "qa_distribution",
                    "letter_deviation",
                    0.0,
                    letter_tolerance,
                    f"a correct letter's share is more than {letter_tolerance:.0%} away from uniform",
                    meaning=f"for every profile, budget and question type with enough questions, each correct letter's "
                    f"share is within {letter_tolerance:.0%} of an even spread",
                ),
            ],
        ),
        Suite(
            "dummy_videos",
            "video_id",
            [
                _columns("dummy_videos"),
                *_not_null("dummy_videos", "key", "video_id", "kind", "path"),
                _in_set("dummy_videos", "kind", DUMMY_KINDS, "a dummy video of an unknown kind"),
                _unique("dummy_videos", ["key", "kind", "object_set"],
                        "one object set mapped to two videos of a kind (a question would play either)"),
                _true("dummy_videos", "scan_exists", "a dummy video of a scan missing from scans",
                      "every dummy video belongs to a scan listed in scans"),
                _true("dummy_videos", "objects_exist", "a dummy video hides an object missing from objects",
                      "every object a dummy video leaves out is listed in objects for its scan"),
                _true("dummy_videos", "frames_match_kind", "a dummy video whose frames are not what its kind shows",
                      "every dummy video lists 16 frames: source frames for query_drop, one source frame 16 times "
                      "for first_frame, only black frames (-1) for black"),
                _true("dummy_videos", "path_names_video", "a row whose path is not its video's file",
                      "every dummy video's path is videos/dummy/<kind>/<video_id>.mp4"),
            ],
        ),
        Suite(
            "qa_distribution_drops",
            "id",
            [
                _columns("qa_distribution_drops"),
                *_not_null("qa_distribution_drops", "id", "key", "profile", "budget", "question_type", "reason"),
                _unique("qa_distribution_drops", ["id"], "a question recorded as dropped twice"),
                _in_set("qa_distribution_drops", "profile", PROFILES, "unknown profile"),
                _in_set("qa_distribution_drops", "budget", budgets, "unknown frame budget"),
                _in_set("qa_distribution_drops", "video_kind", VIDEO_KINDS, "unknown video kind"),
                _true("qa_distribution_drops", "scan_exists", "a dropped question about a scan missing from scans",
                      "every dropped question is about a scan listed in scans"),
                _true("qa_distribution_drops", "not_released", "a question recorded as dropped is in qa",
                      "no question the answer-distribution control dropped is among the released questions"),
            ],
        ),
        Suite(
            "pinpoint_targets",
            "key",
            [
                _columns("pinpoint_targets"),
                _unique("pinpoint_targets", ["key", "object_id"], "a target listed twice"),
                _true("pinpoint_targets", "object_exists", "a target missing from objects",
                      "every PinpointQA target is an object listed in objects"),
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
                _true("pinpoint_neighbors", "object_exists", "a neighbour missing from objects",
                      "every PinpointQA neighbour is an object listed in objects"),
            ],
        ),
    ]
