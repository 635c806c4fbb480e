"""Cross-table facts turned into per-row columns, so a plain expectation can guard them.

Great Expectations validates one table at a time. Referential integrity,
answerability and distribution bounds need other tables, so they are computed
here with polars as boolean (or numeric) columns on a *view* of the released
table; the suites then expect those columns to be true (or within bounds)
and Data Docs show the failing rows by id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from expectations.checks import SlicedView
from pipeline.groups import sorted_groups
from pipeline.scoring.metrics import frequency_baseline
from pipeline.table_scan import TableParts

DUMMY_KINDS = ("query_drop", "first_frame", "black")

# What each helper column a view adds stands for (shown next to its expectation in Data Docs).
COLUMN_MEANINGS = {
    "scan_exists": "true when the row's scan key is in the scans table",
    "object_exists": "true when the row's (scan, object id) is in the objects table",
    "extent_positive": "true when all three sides of the object's box are positive",
    "used_objects_exist": "true when every id in used_obj_ids is an object of the question's scan",
    "answerable": "true on a dummy video, or when every object the question names is visible under its budget "
    "(object_visibility.visible)",
    "options_distinct": "true when no two options share a letter or a text",
    "answer_in_options": "true when the question has no options, or its answer letter is one of them",
    "count_in_range": "true for non-counting questions; for counting ones, an answer of at least 1 (0 on a dummy video)",
    "geometry_is_json": "true when the geometry column parses as JSON",
    "numeric_positive": "true for counting and non-numeric questions; otherwise the numeric answer is above 0",
    "objects_exist": "true when every id in object_ids is an object of the video's scan",
    "object_set": "the video's object_ids, sorted and comma-separated (one video per scan, kind and object set)",
    "frames_match_kind": "true when the video lists 16 frames: source frames (query_drop), one source frame 16 "
    "times (first_frame) or black frames, -1 (black)",
    "path_names_video": "true when path is videos/dummy/<kind>/<video_id>.mp4",
    "not_released": "true when the dropped question's id is not in the released qa table",
}
COUNTING_PREFIXES = ("object_counting",)
QA_DISTRIBUTION_COLUMNS = ["profile", "budget", "question_type", "id", "ground_truth", "options", "video_kind"]


def _letters(options: list[str] | None) -> list[str]:
    return [o.split(".", 1)[0].strip() for o in (options or [])]


def _flags(df: pl.DataFrame, names: list[str], compute) -> pl.DataFrame:
    """Per-row flags computed in Python once per distinct value of ``names`` (values repeat across rows)."""
    rows = df.select(names).with_row_index("_row").group_by(names).agg(pl.col("_row"))
    flags = [compute(*values) for values in zip(*(rows[c].to_list() for c in names))]
    return pl.DataFrame({"_row": rows["_row"], "_flags": flags}).explode("_row").sort("_row")


def _found(df: pl.DataFrame, keys: pl.DataFrame, on: list[str]) -> pl.Series:
    """Per row of ``df``: is its ``on`` tuple among ``keys`` (nulls equal, as in a Python set of tuples)."""
    marked = keys.select(on).unique().with_columns(pl.lit(True).alias("_found"))
    joined = df.select(on).join(marked, on=on, how="left", nulls_equal=True, maintain_order="left")
    return joined["_found"].fill_null(False)


def _all_found(qa: pl.DataFrame, keys: pl.DataFrame, on: list[str]) -> pl.Series:
    """Per qa row: is ``(key[, budget], i)`` among ``keys`` for every ``i`` of ``used_obj_ids`` (none: true)."""
    used = (
        qa.select(*on[:-1], pl.col("used_obj_ids").alias(on[-1]))
        .with_row_index("_row")
        .filter(pl.col(on[-1]).is_not_null())  # no list: nothing to look up
        .explode(on[-1], empty_as_null=False)
    )
    used = used.with_columns(_found(used, keys, on).alias("_found"))
    missing = used.filter(~pl.col("_found"))["_row"].to_numpy()
    ok = np.ones(qa.height, dtype=bool)
    ok[missing] = False
    return pl.Series(ok)


def _options_flags(options: list[str] | None, ground_truth: str | None) -> tuple[bool, bool]:
    opts = options or []
    letters = _letters(opts)
    texts = [o.split(".", 1)[1].strip() if "." in o else o for o in opts]
    distinct = len(set(texts)) == len(texts) and len(set(letters)) == len(letters)
    return distinct, (not opts or ground_truth in letters)


def qa_view(qa: pl.DataFrame, objects: pl.DataFrame, scans: pl.DataFrame, object_visibility: pl.DataFrame) -> pl.DataFrame:
    """The qa table plus one boolean column per cross-table rule.

    Membership is joins, not Python sets; the option checks run once per
    distinct (options, answer) pair. Annotation-only scans (no scan row)
    reference objects by their annotation ids.
    """
    real = (pl.col("video_kind") == "real").fill_null(False)
    visible = object_visibility.filter(pl.col("visible")).select("key", "budget", "object_id")
    objects_exist = _all_found(qa, objects.select("key", "object_id"), ["key", "object_id"])
    visible_all = _all_found(qa, visible, ["key", "budget", "object_id"])
    flags = _flags(qa, ["options", "ground_truth"], _options_flags)["_flags"]
    value = pl.col("answer_value")
    counting = pl.any_horizontal(pl.col("question_type").str.starts_with(p) for p in COUNTING_PREFIXES)
    count_ok = value.is_not_null() & ~value.is_nan() & ((value >= 1) | (~real & (value == 0)))
    return qa.with_columns(
        objects_exist.alias("used_objects_exist"),
        _found(qa, scans.select("key"), ["key"]).alias("scan_exists"),
        (~real | visible_all).alias("answerable"),
        pl.Series("options_distinct", [f[0] for f in flags.to_list()], dtype=pl.Boolean),
        pl.Series("answer_in_options", [f[1] for f in flags.to_list()], dtype=pl.Boolean),
        pl.when(counting).then(count_ok).otherwise(True).alias("count_in_range"),
        pl.Series("geometry_is_json", _json_flags(qa["geometry"]), dtype=pl.Boolean),
    )


def _json_flags(texts: pl.Series, rows: int = 100_000) -> list[bool | None]:
    """``_is_json`` per row (null stays null), a slice at a time so only one slice is ever Python strings."""
    return [
        None if t is None else _is_json(t)
        for start in range(0, texts.len(), rows)
        for t in texts.slice(start, rows).to_list()
    ]


def _is_json(text: str | None) -> bool:
    if text is None:
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _letter_deviation(group: pl.DataFrame, min_questions: int) -> float | None:
    """Largest gap between a correct letter's share and 1/k, over the questions with k options.

    Questions with different option counts (a one-turn route has 3 options, a
    longer one 4) are judged separately, as they are balanced; option counts
    with fewer than ``min_questions`` questions are too few to judge.
    """
    n_opts = group["options"].list.len()
    worst = None
    for k in sorted(set(n_opts.to_list()) - {0}):
        sub = group.filter(n_opts == k)
        if sub.height < min_questions:
            continue
        shares = sub["ground_truth"].value_counts(normalize=True)
        share = dict(zip(shares["ground_truth"].to_list(), shares["proportion"].to_list()))
        gap = max(abs(share.get(chr(ord("A") + i), 0.0) - 1.0 / k) for i in range(k))
        worst = gap if worst is None else max(worst, gap)
    return worst


def controls_distribution(profile: str) -> bool:
    """Whether a profile promises controlled answer priors (a ``balance`` rule on some task; unknown: yes).

    The ``vsibench`` profile has none on purpose: it reproduces VSI-Bench's
    rules and so its biases (counting's frequency baseline is 62.2% on the 288
    VSI-Bench scenes, VSI-Bench publishes 62.1%), and how far a scene set
    pushes them is a property of the scenes, not a generator fault.
    """
    from pipeline.qa.profiles import load_profile

    try:
        return any(rule.balance for rule in load_profile(profile).tasks.values())
    except Exception:  # not a qa profile the loader knows: judge it by the strict bound
        return True


def qa_distribution(qa: pl.DataFrame, min_questions: int = 40) -> pl.DataFrame:
    """Per (profile, budget, question_type) over real-video questions: frequency baseline and letter skew.

    Both are null for a type with fewer than ``min_questions`` questions: a
    handful of questions has a high constant-answer score and a lumpy letter
    spread by chance alone. The baseline sits in ``frequency_baseline`` for
    profiles that control their answer distribution and in
    ``reproduced_frequency_baseline`` for those that reproduce a benchmark's
    biases on purpose (``controls_distribution``), which the gate bounds only
    against a degenerate generator.
    """
    # One group at a time, with no filtered copy: at 10,000 scans the real-video rows with their options are
    # gigabytes, and splitting them into every group at once was the release's peak.
    rows = []
    for (profile, budget, qtype), group in sorted_groups(
        qa.select(QA_DISTRIBUTION_COLUMNS), ["profile", "budget", "question_type"],
        where=pl.col("video_kind") == "real",
    ):
        enough = group.height >= min_questions
        baseline = frequency_baseline(group, by=("question_type",))["score"][0] if enough else None
        controlled = controls_distribution(profile)
        rows.append(
            {
                "profile": profile,
                "budget": budget,
                "question_type": qtype,
                "questions": group.height,
                "frequency_baseline": baseline if controlled else None,
                "reproduced_frequency_baseline": None if controlled else baseline,
                "letter_deviation": _letter_deviation(group, min_questions),
            }
        )
    rows.sort(key=lambda row: (str(row["profile"]), str(row["budget"]), str(row["question_type"])))
    schema = {
        "profile": pl.String,
        "budget": pl.String,
        "question_type": pl.String,
        "questions": pl.Int64,
        "frequency_baseline": pl.Float64,
        "reproduced_frequency_baseline": pl.Float64,
        "letter_deviation": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def dummy_videos_view(dummy_videos: pl.DataFrame, scans: pl.DataFrame, objects: pl.DataFrame) -> pl.DataFrame:
    """The dummy_videos table plus its scan and objects membership, its object set as text (a uniqueness key
    Great Expectations can hash), and whether its frames and path are what its kind and id say."""
    from pipeline.frames.dummy_videos import BLACK_FRAME, DUMMY_FRAMES, dummy_video_path

    frames = pl.col("frame_indices")
    kind = pl.col("kind")
    counted = frames.list.len().fill_null(0) == DUMMY_FRAMES
    shown = (
        pl.when(kind == "black").then(frames.list.eval(pl.element() == BLACK_FRAME).list.all())
        .when(kind == "first_frame").then((frames.list.n_unique() == 1) & (frames.list.min() >= 0))
        .when(kind == "query_drop").then(frames.list.min() >= 0)
        .otherwise(False)
    )
    paths = [dummy_video_path(k, v) if k is not None and v is not None else None
             for k, v in zip(dummy_videos["kind"].to_list(), dummy_videos["video_id"].to_list())]
    used = dummy_videos.rename({"object_ids": "used_obj_ids"})
    return dummy_videos.with_columns(
        _found(dummy_videos, scans.select("key"), ["key"]).alias("scan_exists"),
        _all_found(used, objects.select("key", "object_id"), ["key", "object_id"]).alias("objects_exist"),
        pl.col("object_ids").list.sort().cast(pl.List(pl.String)).list.join(",").alias("object_set"),
        (counted & shown).fill_null(False).alias("frames_match_kind"),
        (pl.col("path") == pl.Series(paths, dtype=pl.String)).fill_null(False).alias("path_names_video"),
    )


def _member(df: pl.DataFrame, keys: pl.DataFrame, key_columns: list[str], name: str) -> pl.DataFrame:
    return df.with_columns(_found(df, keys.rename(dict(zip(keys.columns, key_columns))), key_columns).alias(name))


class Views(Mapping):
    """The suites' views by table, each built when it is asked for and held by no one here.

    The gate checks one suite at a time; views built all at once held a derived copy of every released table
    beside the tables themselves (3 GB more at 10,000 scans). A view is built on every access: each suite
    reads its own once. ``views[name] = df`` gives a table as its own view (a table checked but not released).
    """

    def __init__(self, builders: dict[str, Callable[[], pl.DataFrame]]):
        self._builders = builders

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self._builders[name]()

    def __setitem__(self, name: str, table: pl.DataFrame) -> None:
        self._builders[name] = lambda: table

    def __contains__(self, name: object) -> bool:  # Mapping's own would build the view to answer
        return name in self._builders

    def __iter__(self):
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)


def build_views(tables: dict[str, pl.DataFrame], min_questions_for_distribution: int = 40) -> Views:
    """Views of every released table present in ``tables``, keyed by suite table name (built on access)."""
    from pipeline import schemas

    get = lambda name: tables.get(name, schemas.empty(name))  # noqa: E731
    scans, objects = get("scans"), get("objects")
    object_keys = lambda: objects.select("key", "object_id")  # noqa: E731
    member = lambda name, keys, on, flag: lambda: _member(tables[name], keys(), on, flag)  # noqa: E731
    scan_keys = lambda: scans.select("key")  # noqa: E731
    views: dict[str, Callable[[], pl.DataFrame]] = {}
    if "scans" in tables:
        views["scans"] = lambda: scans
    if "objects" in tables:
        views["objects"] = lambda: _objects_view(objects, scan_keys())
    for name in ("rooms", "frame_samples"):
        if name in tables:
            views[name] = member(name, scan_keys, ["key"], "scan_exists")
    if "object_visibility" in tables:
        views["object_visibility"] = member("object_visibility", object_keys, ["key", "object_id"], "object_exists")
    if "pinpoint_targets" in tables:
        views["pinpoint_targets"] = member("pinpoint_targets", object_keys, ["key", "object_id"], "object_exists")
    if "pinpoint_neighbors" in tables:
        views["pinpoint_neighbors"] = member("pinpoint_neighbors", object_keys, ["key", "neighbor_id"], "object_exists")
    if "dummy_videos" in tables:
        views["dummy_videos"] = lambda: dummy_videos_view(tables["dummy_videos"], scans, objects)
    if "qa_distribution_drops" in tables:
        views["qa_distribution_drops"] = lambda: _drops_view(tables["qa_distribution_drops"], get("qa"), scan_keys())
    if "qa" in tables:
        qa = tables["qa"]
        visibility = get("object_visibility")
        if isinstance(qa, TableParts):  # too large to hold: its view a row group at a time, its columns on request
            views["qa"] = lambda: SlicedView(
                lambda: (qa_suite_view(piece, objects, scans, visibility) for piece in qa.slices()), qa.read
            )
            views["qa_distribution"] = lambda: qa_distribution(qa.read(QA_DISTRIBUTION_COLUMNS), min_questions_for_distribution)
        else:
            views["qa"] = lambda: qa_suite_view(qa, objects, scans, visibility)
            views["qa_distribution"] = lambda: qa_distribution(qa, min_questions_for_distribution)
    return Views(views)


def _objects_view(objects: pl.DataFrame, scan_keys: pl.DataFrame) -> pl.DataFrame:
    extent_ok = [bool(e) and all(v > 0 for v in e) for e in objects["extent"].to_list()]
    return _member(objects, scan_keys, ["key"], "scan_exists").with_columns(
        pl.Series("extent_positive", extent_ok, dtype=pl.Boolean)
    )


def _drops_view(drops: pl.DataFrame, released, scan_keys: pl.DataFrame) -> pl.DataFrame:
    drops = _member(drops, scan_keys, ["key"], "scan_exists")
    released_ids = released.read(["id"]) if isinstance(released, TableParts) else released.select("id")
    return drops.with_columns((~_found(drops, released_ids, ["id"])).alias("not_released"))


def qa_suite_view(qa: pl.DataFrame, objects: pl.DataFrame, scans: pl.DataFrame, object_visibility: pl.DataFrame) -> pl.DataFrame:
    """``qa_view`` plus ``numeric_positive``: the view the ``qa`` suite checks (row by row, but for uniqueness)."""
    value = pl.col("answer_value")
    numeric_ok = (
        pl.col("question_type").str.starts_with("object_counting")
        | value.is_null()
        | ((value > 0) & ~value.is_nan())
    )
    return qa_view(qa, objects, scans, object_visibility).with_columns(numeric_ok.alias("numeric_positive"))
