"""Cross-table facts turned into per-row columns, so a plain expectation can guard them.

Great Expectations validates one table at a time. Referential integrity,
answerability and distribution bounds need other tables, so they are computed
here with polars as boolean (or numeric) columns on a *view* of the released
table; the suites then expect those columns to be true (or within bounds)
and Data Docs show the failing rows by id.
"""

from __future__ import annotations

import json

import polars as pl

from pipeline.scoring.metrics import frequency_baseline

DUMMY_KINDS = ("query_drop", "first_frame", "black")
COUNTING_PREFIXES = ("object_counting",)


def _letters(options: list[str] | None) -> list[str]:
    return [o.split(".", 1)[0].strip() for o in (options or [])]


def qa_view(qa: pl.DataFrame, objects: pl.DataFrame, scans: pl.DataFrame, object_visibility: pl.DataFrame) -> pl.DataFrame:
    """The qa table plus one boolean column per cross-table rule."""
    object_keys = set(zip(objects["key"].to_list(), objects["object_id"].to_list()))
    scan_keys = set(scans["key"].to_list())
    visible = set(
        zip(
            *object_visibility.filter(pl.col("visible"))
            .select("key", "budget", "object_id")
            .to_dict(as_series=False)
            .values()
        )
    )
    objects_exist, answerable, scan_exists, options_distinct, answer_in_options, count_ok = [], [], [], [], [], []
    for row in qa.iter_rows(named=True):
        ids = row["used_obj_ids"] or []
        real = row["video_kind"] == "real"
        # Annotation-only scans (no scan row) reference objects by their annotation ids.
        objects_exist.append(all((row["key"], i) in object_keys for i in ids))
        scan_exists.append(row["key"] in scan_keys)
        answerable.append(not real or all((row["key"], row["budget"], i) in visible for i in ids))
        opts = row["options"] or []
        letters = _letters(opts)
        texts = [o.split(".", 1)[1].strip() if "." in o else o for o in opts]
        options_distinct.append(len(set(texts)) == len(texts) and len(set(letters)) == len(letters))
        answer_in_options.append(not opts or row["ground_truth"] in letters)
        if row["question_type"].startswith(COUNTING_PREFIXES):
            value = row["answer_value"]
            count_ok.append(value is not None and (value >= 1 or (not real and value == 0)))
        else:
            count_ok.append(True)
    return qa.with_columns(
        pl.Series("used_objects_exist", objects_exist, dtype=pl.Boolean),
        pl.Series("scan_exists", scan_exists, dtype=pl.Boolean),
        pl.Series("answerable", answerable, dtype=pl.Boolean),
        pl.Series("options_distinct", options_distinct, dtype=pl.Boolean),
        pl.Series("answer_in_options", answer_in_options, dtype=pl.Boolean),
        pl.Series("count_in_range", count_ok, dtype=pl.Boolean),
        pl.col("geometry").map_elements(_is_json, return_dtype=pl.Boolean).alias("geometry_is_json"),
    )


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


def qa_distribution(qa: pl.DataFrame, min_questions: int = 40) -> pl.DataFrame:
    """Per (profile, budget, question_type) over real-video questions: frequency baseline and letter skew.

    Both are null for a type with fewer than ``min_questions`` questions: a
    handful of questions has a high constant-answer score and a lumpy letter
    spread by chance alone.
    """
    real = qa.filter(pl.col("video_kind") == "real")
    rows = []
    for (profile, budget, qtype), group in sorted(
        real.group_by(["profile", "budget", "question_type"]), key=lambda kv: tuple(str(k) for k in kv[0])
    ):
        enough = group.height >= min_questions
        rows.append(
            {
                "profile": profile,
                "budget": budget,
                "question_type": qtype,
                "questions": group.height,
                "frequency_baseline": frequency_baseline(group, by=("question_type",))["score"][0] if enough else None,
                "letter_deviation": _letter_deviation(group, min_questions),
            }
        )
    schema = {
        "profile": pl.String,
        "budget": pl.String,
        "question_type": pl.String,
        "questions": pl.Int64,
        "frequency_baseline": pl.Float64,
        "letter_deviation": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _member(df: pl.DataFrame, keys: set, key_columns: list[str], name: str) -> pl.DataFrame:
    values = [tuple(r) in keys for r in df.select(key_columns).iter_rows()]
    return df.with_columns(pl.Series(name, values, dtype=pl.Boolean))


def build_views(tables: dict[str, pl.DataFrame], min_questions_for_distribution: int = 40) -> dict[str, pl.DataFrame]:
    """Views of every released table present in ``tables``, keyed by suite table name."""
    from pipeline import schemas

    get = lambda name: tables.get(name, schemas.empty(name))  # noqa: E731
    scans, objects = get("scans"), get("objects")
    scan_keys = {(k,) for k in scans["key"].to_list()}
    object_keys = set(zip(objects["key"].to_list(), objects["object_id"].to_list()))
    views: dict[str, pl.DataFrame] = {}
    if "scans" in tables:
        views["scans"] = scans
    if "objects" in tables:
        extent_ok = [bool(e) and all(v > 0 for v in e) for e in objects["extent"].to_list()]
        views["objects"] = _member(objects, scan_keys, ["key"], "scan_exists").with_columns(
            pl.Series("extent_positive", extent_ok, dtype=pl.Boolean)
        )
    for name in ("rooms", "frame_samples"):
        if name in tables:
            views[name] = _member(tables[name], scan_keys, ["key"], "scan_exists")
    if "object_visibility" in tables:
        views["object_visibility"] = _member(tables["object_visibility"], object_keys, ["key", "object_id"], "object_exists")
    if "pinpoint_targets" in tables:
        views["pinpoint_targets"] = _member(tables["pinpoint_targets"], object_keys, ["key", "object_id"], "object_exists")
    if "pinpoint_neighbors" in tables:
        views["pinpoint_neighbors"] = _member(
            tables["pinpoint_neighbors"], object_keys, ["key", "neighbor_id"], "object_exists"
        )
    if "qa" in tables:
        qa = tables["qa"]
        view = qa_view(qa, objects, scans, get("object_visibility"))
        numeric_ok = [
            t.startswith("object_counting") or v is None or v > 0
            for t, v in zip(view["question_type"].to_list(), view["answer_value"].to_list())
        ]
        views["qa"] = view.with_columns(pl.Series("numeric_positive", numeric_ok, dtype=pl.Boolean))
        views["qa_distribution"] = qa_distribution(qa, min_questions_for_distribution)
    return views
