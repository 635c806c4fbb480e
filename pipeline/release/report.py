"""The reviewer's page for a release: one self-contained HTML file, readable offline.

Everything is inline (CSS, SVG charts, frames as data URIs) so the page opens
from a mail attachment or a shared drive with no network and no scripts.
It shows what a reviewer checks before signing a release off: how many
questions of each type per budget, how the answers are distributed (answer
priors show up here first), the frequency baselines, how many named objects
are visible per budget, which scans had warnings, which expectations ran, and
sample questions with the frames where their objects are seen, the objects'
boxes drawn and a legend naming each box.

Counts and charts agree: the count table counts real-video questions per
budget, with the dummy-video (evidence-absent) questions in a column of their
own, and each answer chart is drawn from the same real-video questions, so a
chart's total is its row's "real videos" total.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import polars as pl

from pipeline import seeding
from pipeline.release.churn import CHURN_COLUMNS, churn, churn_totals
from pipeline.scene.scan_notes import notes_html
from pipeline.schemas import BUDGETS
from pipeline.qa.stats import baseline_rows

VideoFile = Callable[[str], Path | None]  # video path relative to the output root -> local file, None if absent
BOX_COLOURS = [(0, 200, 255), (80, 220, 0), (255, 120, 0), (200, 0, 255)]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #dde;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ccd;padding:3px 8px;text-align:right}
th{background:#f2f4f8}td.l,th.l{text-align:left}.ok{color:#11772b}.bad{color:#b00020;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #e3e6ee;padding:6px;border-radius:4px}
.chart h3{font-size:12px;margin:0 0 4px 0}.q{border:1px solid #e3e6ee;border-radius:4px;padding:10px;margin:12px 0}
.frames{display:flex;flex-wrap:wrap;gap:6px}.frames img{width:240px;border:1px solid #ccd}
.meta{color:#667;font-size:12px}.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin-top:6px}
.swatch{display:inline-block;width:12px;height:12px;border:2px solid;margin-right:4px;vertical-align:-2px}
.dim{color:#889}
"""

# What a sample with no named object is about, so the reviewer knows why no box is drawn.
ROOM_CAPTION = "This question is about the room as a whole, so no object is boxed: frames of the room from its video."
NO_OBJECT_CAPTION = (
    "This question names no object of the scan (it asks about the room, or about an object the scan does not "
    "contain), so no box is drawn: frames of the room from its video."
)


def _esc(x) -> str:
    return html.escape(str(x))


def _table(headers: list[str], rows: Iterable[list], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{_esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def bar_chart_svg(labels: list[str], values: list[float], title: str, width: int = 260, height: int = 140) -> str:
    """A small labelled bar chart as inline SVG."""
    n = max(1, len(values))
    top = max(values) if values and max(values) > 0 else 1.0
    bar_w = (width - 20) / n
    bars = []
    for i, (label, v) in enumerate(zip(labels, values)):
        h = (height - 36) * (v / top)
        x = 10 + i * bar_w
        y = height - 20 - h
        bars.append(
            f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" fill="#4a78c2">'
            f"<title>{_esc(label)}: {v:g}</title></rect>"
        )
        if n <= 12:
            bars.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 6}" font-size="9" text-anchor="middle">{_esc(label)}</text>'
            )
    return (
        f'<div class="chart"><h3>{_esc(title)}</h3><svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img"><line x1="8" y1="{height - 20}" x2="{width - 8}" y2="{height - 20}" '
        f'stroke="#999"/>{"".join(bars)}</svg></div>'
    )


def _histogram(group: pl.DataFrame) -> tuple[list[str], list[float]]:
    """Letter counts for choices, bins for numbers, label counts for short categorical answers (yes/no)."""
    values = group["answer_value"].drop_nulls().to_numpy()
    if group["options"].list.len().max() or (values.size == 0 and group["ground_truth"].n_unique() <= 12):
        counts = group["ground_truth"].value_counts().sort("ground_truth")
        return counts["ground_truth"].to_list(), [float(c) for c in counts["count"].to_list()]
    if values.size == 0:
        return [], []
    distinct = np.unique(values)
    if len(distinct) <= 15 and np.all(distinct == np.round(distinct)):
        # Counts and other small integers: one bar per answer, so a dominant "2" is plain to see.
        return [f"{v:g}" for v in distinct], [float(np.count_nonzero(values == v)) for v in distinct]
    counts, edges = np.histogram(values, bins=min(10, max(1, len(distinct))))
    return [f"{edges[i]:.3g}" for i in range(len(counts))], [float(c) for c in counts]


def answerability_table(qa: pl.DataFrame, object_visibility: pl.DataFrame) -> str:
    """Of the all-frame questions, the share whose named objects stay visible under each smaller budget.

    This is ReVSI's validity-under-sparse-frames measure (its Figure 3): how
    many all-frame answers a model fed 16, 32 or 64 frames could still
    support. Released questions of each budget are answerable by construction.
    """
    visible = {
        b: set(zip(g["key"].to_list(), g["object_id"].to_list()))
        for (b,), g in object_visibility.filter(pl.col("visible")).group_by(["budget"])
    }
    base = qa.select("key", "profile", "budget", "video_kind", "used_obj_ids").filter((pl.col("budget") == "all") & (pl.col("video_kind") == "real") & (pl.col("used_obj_ids").list.len() > 0))
    rows = []
    for (profile,), group in sorted(base.group_by(["profile"]), key=lambda kv: kv[0]):
        pairs = list(zip(group["key"].to_list(), group["used_obj_ids"].to_list()))
        cells = []
        for b in ("16", "32", "64"):
            seen = visible.get(b, set())
            ok = sum(all((key, i) in seen for i in ids) for key, ids in pairs)
            cells.append(f"{100 * ok / len(pairs):.1f}%")
        rows.append([profile, len(pairs), *cells])
    if not rows:
        return ""
    return (
        "<h2>Answerability of all-frame questions under smaller budgets</h2>"
        "<p class=meta>Share of the all-frame questions whose named objects are all visible under the budget's frames "
        "(SPEC §3 rule); the released questions of each budget are generated from that budget's visibility.</p>"
        + _table(["profile", "all-frame questions", "16", "32", "64"], rows)
    )


class VideoFrames:
    """Frames of videos kept open, decoded forward where possible (``shoot`` asks for a video's frames in rank order).

    Opening a video and seeking (decoding from the keyframe before the frame) for every shown frame was
    most of the report's cost. Here the video stays open; a frame a few frames ahead of the last one read
    is reached by decoding forward, any other by a seek, so the decoded pixels are the same as a fresh
    open-and-seek gives (the decoder is deterministic and starts from the same keyframe or continues
    the same stream).
    """

    AHEAD = 12  # decode forward up to this many frames instead of seeking (the writer's keyframe interval)

    def __init__(self):
        self._open: dict[str, tuple[cv2.VideoCapture, int]] = {}  # video -> (capture, index of the next frame)

    def read(self, video: Path, rank: int) -> np.ndarray | None:
        name = str(video)
        cap, position = self._open.get(name, (None, 0))
        if cap is None:
            cap = cv2.VideoCapture(name)
        if not (position <= rank <= position + self.AHEAD):
            cap.set(cv2.CAP_PROP_POS_FRAMES, rank)
            position = rank
        ok = True
        while ok and position < rank:
            ok = cap.grab()
            position += 1
        ok, frame = cap.read() if ok else (False, None)
        self._open[name] = (cap, position + 1 if ok else -(2**31))  # after a failed read, the next one seeks
        return frame if ok else None

    def close(self) -> None:
        for cap, _ in self._open.values():
            cap.release()
        self._open.clear()


@dataclass
class Shot:
    """One frame a gallery item shows: which video frame, its alt text, and the boxes drawn on it."""

    video: Path
    rank: int
    alt: str
    boxes: list[tuple[int, tuple[int, int, int, int], tuple[int, int, int]]] = field(default_factory=list)
    uri: str | None = None  # the drawn frame as a data URI, once shot; None: the frame could not be read


@dataclass
class GalleryItem:
    row: dict
    used: list[int]
    video: Path | None
    caption: str = ""
    shots: list[Shot] = field(default_factory=list)


def _frame_uri(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode() if ok else ""


def _css_colour(bgr: tuple[int, int, int]) -> str:
    return f"rgb({bgr[2]},{bgr[1]},{bgr[0]})"


def _legend(used: list[int], labels: dict[tuple[str, int], str], key: str, boxed: set[int]) -> str:
    """One swatch per named object, in its box colour, with its id and label; objects without a box say so."""
    items = []
    for i, obj in enumerate(used):
        colour = _css_colour(BOX_COLOURS[i % len(BOX_COLOURS)])
        label = labels.get((key, obj), "")
        text = f"object {obj}" + (f": {label}" if label else "")
        note = "" if obj in boxed else ' <span class="dim">(in no frame shown)</span>'
        items.append(f'<span><span class="swatch" style="border-color:{colour}"></span>{_esc(text)}{note}</span>')
    return f'<div class="legend"><b>Boxes:</b>{"".join(items)}</div>' if items else ""


def _room_shots(video: Path, max_frames: int) -> list[Shot]:
    """A few evenly spaced frames of a video (first, middle, ...), for a question about the room itself."""
    cap = cv2.VideoCapture(str(video))
    try:
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
    finally:
        cap.release()
    ranks = sorted({int(r) for r in np.linspace(0, max(count - 1, 0), num=min(2, max_frames, max(count, 1)))})
    return [Shot(video, rank, f"frame {rank} of the video") for rank in ranks]


def plan_item(
    row: dict,
    video_file: VideoFile,
    frame_samples: pl.DataFrame,
    visibility: pl.DataFrame,
    max_frames: int,
) -> GalleryItem:
    """Which frames a sample question shows and the boxes drawn on them; nothing is decoded yet."""
    used = list(row["used_obj_ids"] or [])
    real = row["video_kind"] == "real"
    video = video_file(row["video"]) if real and row["video"] else None
    item = GalleryItem(row, used, video)
    if video is not None and not used:
        item.shots = _room_shots(video, max_frames)
        item.caption = ROOM_CAPTION if row["question_type"].startswith("room_size") else NO_OBJECT_CAPTION
    elif video is not None:
        samples = frame_samples.filter((pl.col("key") == row["key"]) & (pl.col("budget") == row["budget"]))
        rank_of = dict(zip(samples["frame_index"].to_list(), samples["rank"].to_list()))
        seen = visibility.filter(
            (pl.col("key") == row["key"]) & pl.col("object_id").is_in(used) & pl.col("frame_index").is_in(list(rank_of))
        )
        # Each named object's most prominent sampled frame, so every object of the question is shown.
        best = (
            seen.sort(["visible_pixels", "frame_index"], descending=[True, False])
            .group_by("object_id", maintain_order=True)
            .first()["frame_index"]
            .to_list()
        )
        for frame_index in sorted(set(best))[:max_frames]:
            boxes = [
                (obj["object_id"], tuple(obj["bbox"]), BOX_COLOURS[used.index(obj["object_id"]) % len(BOX_COLOURS)])
                for obj in seen.filter(pl.col("frame_index") == frame_index).iter_rows(named=True)
            ]
            item.shots.append(Shot(video, rank_of[frame_index], f"frame {frame_index}", boxes))
    return item


def shoot(shots: list[Shot]) -> None:
    """Decode, draw and encode every shot, video by video in frame order (``Shot.uri``).

    Each video is decoded once, forward, in rank order, whatever order the
    questions show its frames in; a frame two questions show is decoded once
    and drawn on a copy for each.
    """
    by_video: dict[str, list[Shot]] = {}
    for shot in shots:
        by_video.setdefault(str(shot.video), []).append(shot)
    for video, group in by_video.items():
        frames = VideoFrames()
        try:
            last: tuple[int, np.ndarray | None] | None = None
            for shot in sorted(group, key=lambda s: s.rank):
                if last is None or last[0] != shot.rank:
                    last = (shot.rank, frames.read(Path(video), shot.rank))
                if last[1] is None:
                    continue
                image = last[1].copy()
                for object_id, (x0, y0, x1, y1), colour in shot.boxes:
                    cv2.rectangle(image, (x0, y0), (x1, y1), colour, 2)
                    cv2.putText(image, str(object_id), (x0 + 3, y0 + 14), cv2.FONT_HERSHEY_SIMPLEX, 0.5, colour, 1)
                shot.uri = _frame_uri(image)
        finally:
            frames.close()


def render_item(item: GalleryItem, labels: dict[tuple[str, int], str] | None = None) -> str:
    """A sample question with its shot frames (``shoot`` first), its options, answer and box legend."""
    row, used, video, caption = item.row, item.used, item.video, item.caption
    real = row["video_kind"] == "real"
    shown = [shot for shot in item.shots if shot.uri is not None]
    images = [f'<img alt="{shot.alt}" src="{shot.uri}">' for shot in shown]
    boxed = {object_id for shot in shown for object_id, _, _ in shot.boxes}
    options = "<br>".join(_esc(o) for o in (row["options"] or []))
    if not real:
        missing = f"a dummy ({row['video_kind']}) video: the evidence is left out on purpose, so no frame is shown"
    elif video is None:
        missing = "the question's video is not available"
    elif not used:
        missing = caption.split(":")[0] + "; its video has no readable frame"
    else:
        missing = "no sampled frame shows the named objects"
    frames_html = "".join(images) or f'<span class="meta">{_esc(missing)}</span>'
    legend = _legend(used, labels or {}, row["key"], boxed) if images and used else ""
    caption_html = f'<div class="meta">{_esc(caption)}</div>' if caption and images else ""
    return (
        f'<div class="q"><div class="meta">{_esc(row["id"])} · {_esc(row["key"])} · budget {_esc(row["budget"])} · '
        f'{_esc(row["question_type"])} · video {_esc(row["video_kind"])} · objects {_esc(used)}</div>'
        f"<p>{_esc(row['question'])}</p><p>{options}</p><p><b>Answer:</b> {_esc(row['ground_truth'])}</p>"
        f'<div class="frames">{frames_html}</div>{legend}{caption_html}</div>'
    )


def render_report(
    tables: dict[str, pl.DataFrame],
    *,
    video_file: VideoFile,
    title: str,
    gate: dict | None = None,
    orphan_verdicts: list[str] | None = None,
    rejected: list[str] | None = None,
    samples_per_type: int = 2,
    frames_per_question: int = 4,
    seed: int = 0,
    excluded_scans: dict | None = None,
    verdicts: list[dict] | None = None,
    previous_qa: pl.DataFrame | None = None,
    previous_version: str | None = None,
) -> str:
    """The page; ``verdicts`` are ``verdict_outcomes`` (each verdict, applied or why not), ``previous_qa`` the
    qa table of the release this one follows (its churn is shown), ``previous_version`` its name."""
    qa = tables["qa"]
    frame_samples = tables.get("frame_samples", pl.DataFrame())
    visibility = tables.get("visibility", pl.DataFrame())
    object_visibility = tables.get("object_visibility", pl.DataFrame())
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_esc(title)}</title><style>{CSS}</style></head><body>"]
    scans = tables.get("scans", pl.DataFrame())
    warned = _warned_scans(scans)
    warned_text = "" if warned is None else f" {warned.height} of {scans.height} scans with warnings."
    parts.append(
        f"<h1>{_esc(title)}</h1><p class=meta>{qa.height} questions over {qa['key'].n_unique()} scans.{warned_text}</p>"
    )

    # Counts per type and budget: real videos per budget, dummy videos apart (the charts count real videos only).
    types = sorted(set(zip(qa["profile"].to_list(), qa["question_type"].to_list())))
    counts = {(p, t, b): 0 for p, t in types for b in BUDGETS}
    dummies = {(p, t): 0 for p, t in types}
    is_real = (pl.col("video_kind").fill_null("real") == "real").alias("_real")
    for (p, t, b, real_video), g in qa.select("profile", "question_type", "budget", is_real).group_by(
        ["profile", "question_type", "budget", "_real"]
    ):
        if real_video:
            counts[(p, t, b)] = g.height
        else:
            dummies[(p, t)] += g.height
    parts.append("<h2>Questions per type and frame budget</h2>")
    parts.append(
        "<p class=meta>Real-video questions per budget; the last column counts the dummy-video (evidence-absent) "
        "questions of the same type, which the answer charts below leave out: each chart's total is its row's "
        "&ldquo;real videos&rdquo; total.</p>"
    )
    parts.append(
        _table(
            ["profile", "question type", *BUDGETS, "real videos", "dummy videos"],
            [
                [p, t, *[counts[(p, t, b)] for b in BUDGETS], sum(counts[(p, t, b)] for b in BUDGETS), dummies[(p, t)]]
                for p, t in types
            ],
            left=2,
        )
    )

    if previous_qa is not None:
        parts.append(churn_section(churn(previous_qa, qa), previous_version))

    # Answer distributions (real videos).
    parts.append(
        "<h2>Answer distributions</h2><p class=meta>Real-video questions of every budget; the number after each "
        "title is the chart's total.</p><div class=charts>"
    )
    # Only what the charts and baselines read: copying every column of a million questions costs gigabytes.
    charted = ["id", "key", "scene_id", "profile", "budget", "question_type", "video_kind", "question", "ground_truth", "options", "answer_value"]
    real = qa.select(charted).filter(pl.col("video_kind") == "real")
    for (profile, t), group in sorted(real.group_by(["profile", "question_type"]), key=lambda kv: kv[0]):
        labels, values = _histogram(group)
        if labels:
            parts.append(bar_chart_svg(labels, values, f"{profile} · {t} ({group.height})"))
    parts.append("</div>")

    # Frequency baselines: one row per profile (revsi and vsibench share type names), by letter and by content.
    parts.append(
        "<h2>Frequency baselines</h2><p class=meta>Always answering the most frequent answer of a type; numeric "
        "types: the mode scored with MRA; choices: by letter and by content (option text). <em>best constant</em>: "
        "the best score of any one numeric answer (whatever the mode's tie-break), at the answer shown; "
        "<em>blind</em>: a guesser reading only the question and options, its prior fitted on other scenes; "
        "<em>candidates</em>: questions the answer-distribution control saw, <em>dropped</em>: those it removed; "
        "<em>before</em>: the content baseline before it; <em>95% CI</em>: the width of a score's interval on this "
        "many questions (flagged over 20 points: too few to rank models).</p>"
    )
    if real.height:
        rows = baseline_rows(real, tables.get("qa_distribution_drops"))
        pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        ci = lambda r: "n/a" if r["ci95_width"] is None else f"{100 * r['ci95_width']:.1f}" + (" (wide)" if r["ci_wide"] else "")  # noqa: E731
        parts.append(
            _table(
                ["profile", "question type", "budget", "answer", "by letter", "by content", "best constant", "at",
                 "blind", "questions", "candidates", "dropped", "before", "95% CI (points)"],
                [[r["profile"], r["question_type"], r["budget"], _esc(r["answer"]), pct(r["frequency"]), pct(r["content"]),
                  pct(r["best_constant"]), "" if r["best_constant_answer"] is None else f"{r['best_constant_answer']:g}",
                  pct(r["blind"]), r["questions"], r["candidates"], r["dropped"], pct(r["before"]), ci(r)]
                 for r in sorted(rows, key=lambda r: (r["profile"], r["question_type"], r["budget"]))],
                left=3,
            )
        )

    # Visibility per budget.
    if object_visibility.height:
        parts.append("<h2>Visible objects per budget</h2>")
        rows = []
        for b in BUDGETS:
            g = object_visibility.filter(pl.col("budget") == b)
            if g.height:
                rows.append([b, g.height, int(g["visible"].sum()), f"{100 * g['visible'].mean():.1f}%"])
        parts.append(_table(["budget", "objects", "visible", "share"], rows))
        parts.append(answerability_table(qa, object_visibility))

    if warned is not None:
        parts.append(_warnings_section(warned, scans.height))

    # Gate results.
    if gate is not None:
        parts.append("<h2>Expectations</h2><p class=meta>The same results with their details: data_docs/index.html.</p>")
        rows = []
        for r in gate.get("results", []):
            status = '<span class="ok">pass</span>' if r["success"] else '<span class="bad">FAIL</span>'
            rows.append([
                _esc(r["name"]), status, r["unexpected_count"], _esc(r.get("meaning", "")), _esc(r["guards"]),
                _esc(", ".join(r["failing_rows"][:5])),
            ])
        parts.append(
            _table(["expectation", "result", "failing rows", "what must hold", "a failure means", "first failing ids"], rows, left=2)
        )

    if verdicts:
        parts.append(verdicts_section(verdicts))
    elif rejected or orphan_verdicts:
        parts.append("<h2>Reviewer verdicts</h2>")
        parts.append(f"<p>{len(rejected or [])} questions excluded as rejected.</p>")
        if orphan_verdicts:
            parts.append("<p>Verdicts whose question no longer exists:</p><ul>" + "".join(f"<li>{_esc(o)}</li>" for o in orphan_verdicts) + "</ul>")

    parts.append(notes_html(tables.get("scans"), excluded_scans))  # excluded scans, per-scan warnings

    # Gallery.
    parts.append("<h2>Sample questions</h2>")
    samples = []
    for (t,), group in sorted(qa.group_by(["question_type"]), key=lambda kv: kv[0][0]):
        rng = seeding.rng(seed, "report-gallery", t)
        picks = sorted(rng.choice(group.height, size=min(samples_per_type, group.height), replace=False).tolist())
        samples += [group.row(i, named=True) for i in picks]
    # The sampled questions' scans only, once: every item would otherwise scan every scan's frames.
    shown = sorted({row["key"] for row in samples})
    frame_samples, visibility = (
        df.filter(pl.col("key").is_in(shown)) if "key" in df.columns else df for df in (frame_samples, visibility)
    )
    objects = tables.get("objects", pl.DataFrame())
    labels = {}
    if {"key", "object_id", "category"} <= set(objects.columns):
        shown_objects = objects.filter(pl.col("key").is_in(shown))
        labels = dict(zip(zip(shown_objects["key"].to_list(), shown_objects["object_id"].to_list()),
                          shown_objects["category"].to_list()))
    items = [plan_item(row, video_file, frame_samples, visibility, frames_per_question) for row in samples]
    shoot([shot for item in items for shot in item.shots])
    parts.extend(render_item(item, labels) for item in items)
    parts.append("</body></html>")
    return "".join(parts)


def verdicts_section(outcomes: list[dict]) -> str:
    """Every verdict: those applied (with the question), then those that could not be, and why."""
    applied = [o for o in outcomes if o["applied"]]
    not_applied = [o for o in outcomes if not o["applied"]]
    rejected = sum(o["verdict"] == "reject" for o in applied)
    accepted = len(applied) - rejected
    out = [
        "<h2>Reviewer verdicts</h2>",
        f"<p>{len(outcomes)} verdict{'s' * (len(outcomes) != 1)}: {len(applied)} applied ({rejected} rejected "
        f"question{'s' * (rejected != 1)} left out of this release, {accepted} accepted question"
        f"{'s' * (accepted != 1)} kept: a later release keeps them while their scan is in it), "
        f"{len(not_applied)} not applied.</p>",
    ]
    if applied:
        out.append("<h3>Applied</h3>")
        # The text of a rejected question, which the release no longer has; an accepted one is in the release.
        out.append(_table(
            ["question id", "verdict", "reviewer", "note", "scan", "question type", "rejected question"],
            [[_esc(o["qa_id"]), _esc(o["verdict"]), _esc(o["reviewer"]), _esc(o["note"]), _esc(o["key"]),
              _esc(o["question_type"]), _esc(o["question"]) if o["verdict"] == "reject" else ""] for o in applied],
            left=7,
        ))
    if not_applied:
        out.append("<h3>Not applied</h3>")
        out.append(_table(
            ["question id", "verdict", "reviewer", "note", "scan", "why"],
            [[_esc(o["qa_id"]), _esc(o["verdict"]), _esc(o["reviewer"]), _esc(o["note"]), _esc(o.get("key") or ""),
              _esc(o["reason"])] for o in not_applied],
            left=6,
        ))
    return "".join(out)


def churn_section(rows: list[dict], previous_version: str | None) -> str:
    """Questions kept, new and gone since the previous release, per profile and type."""
    name = f" {_esc(previous_version)}" if previous_version else ""
    head = f"<h2>Compared with the previous release{name}</h2>"
    if not rows:
        return head + "<p>Neither release has questions.</p>"
    total = churn_totals(rows)
    headers = ["profile", "question type", "previous", "now", "kept", "new", "new in earlier scans", "gone",
               "gone from released scans"]
    body = [[_esc(r["profile"]), _esc(r["question_type"]), *[r[c] for c in CHURN_COLUMNS[2:]]] for r in rows]
    body.append(["<b>all</b>", "", *[f"<b>{total[c]}</b>" for c in CHURN_COLUMNS[2:]]])
    return (
        head
        + f"<p class=meta>By question id: of the previous {total['previous']} questions {total['kept']} kept and "
        f"{total['gone']} gone ({total['gone_in_released_scans']} of them from scans this release still has); "
        f"{total['new']} new ({total['new_in_previous_scans']} of them from scans the previous release had). "
        "Questions a reviewer accepted are kept while their scan is released.</p>"
        + _table(headers, body, left=2)
    )


def _warned_scans(scans: pl.DataFrame) -> pl.DataFrame | None:
    """Scans with at least one warning (key, count, warnings), or None when the table carries no warnings column."""
    if "warnings" not in scans.columns or "key" not in scans.columns:
        return None
    counted = scans.select("key", pl.col("warnings").fill_null([]).alias("warnings")).with_columns(
        pl.col("warnings").list.len().alias("count")
    )
    return counted.filter(pl.col("count") > 0).sort("key")


def _warnings_section(warned: pl.DataFrame, scan_count: int, first: int = 3) -> str:
    """Per scan: how many warnings its reader raised, and the first few (a build goes on past them)."""
    head = "<h2>Scan warnings</h2>"
    if warned.height == 0:
        return head + f"<p>None of the {scan_count} scans has a warning.</p>"
    rows = [
        [_esc(r["key"]), r["count"], "<br>".join(_esc(w) for w in r["warnings"][:first]) + (" …" if r["count"] > first else "")]
        for r in warned.iter_rows(named=True)
    ]
    return (
        head + f"<p class=meta>{warned.height} of {scan_count} scans built with warnings "
        f"({int(warned['count'].sum())} in all); the first {first} of each are shown.</p>"
        + _table(["scan", "warnings", "first warnings"], rows)
    )


def write_report(path: Path, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(**kwargs), encoding="utf-8")
    return path


def gate_to_dict(gate) -> dict:
    """Accept a GateReport or an already-serialised dict."""
    return gate if isinstance(gate, dict) else json.loads(json.dumps(gate.to_dict()))
