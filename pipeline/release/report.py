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
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import polars as pl

from pipeline import seeding
from pipeline.groups import sorted_groups
from pipeline.release.answer_check import ScanFacts, answer_check_html, first_appearances, scan_facts
from pipeline.release.churn import CHURN_COLUMNS, cause_text, churn_totals
from pipeline.release.palette import object_colours
from pipeline.release.plan_view import MAX_TICKS, ScenePlan, plan_svg, scene_plan
from pipeline.scene.scan_notes import notes_html
from pipeline.qa.stats import baseline_rows

VideoFile = Callable[[str], Path | None]  # video path relative to the output root -> local file, None if absent
FramesOf = Callable[[list[str]], pl.DataFrame | None]  # scan keys -> their rows of the frames table (camera poses)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #dde;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ccd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f2f4f8}td.l,th.l{text-align:left}.ok{color:#11772b}.bad{color:#b00020;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{border:1px solid #e3e6ee;padding:6px;border-radius:4px}
.chart h3{font-size:12px;margin:0 0 4px 0}.q{border:1px solid #e3e6ee;border-radius:4px;padding:10px;margin:12px 0}
.frames{display:flex;flex-wrap:wrap;gap:6px}.frames img{width:240px;border:1px solid #ccd}
.meta{color:#667;font-size:12px}.check{font-size:13px;background:#f8faf5;border-left:3px solid #9bbf7a;padding:4px 10px;margin:6px 0}
.check ul{margin:2px 0;padding-left:18px}.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin-top:6px}
.swatch{display:inline-block;width:12px;height:12px;border:2px solid;margin-right:4px;vertical-align:-2px}
.dim{color:#889}
.shot{position:relative;display:inline-block;width:240px;margin:0}.shot img{display:block;width:240px}
.shot svg{position:absolute;left:1px;top:1px;width:240px;height:calc(100% - 2px)}
.shot figcaption{position:absolute;right:4px;top:3px;font-size:11px;background:rgba(255,255,255,.8);padding:0 3px}
.evidence{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}.evidence>div:last-child{flex:1;min-width:250px}
.planbox{max-width:420px}
.planbox svg.plan{border:1px solid #ccd;max-width:100%;height:auto}.plancap{font-size:12px;color:#445;margin:4px 0}
.stamp{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:13px;background:#f6f7fa;
border:1px solid #e3e6ee;border-radius:4px;padding:8px 12px;margin:8px 0}.stamp dt{color:#667}.stamp dd{margin:0}
code{font-size:12px}
"""

# What a sample with no named object is about, so the reviewer knows why no box is drawn.
ROOM_CAPTION = "This question is about the room as a whole, so no object is boxed: frames of the room from its video."
NO_OBJECT_CAPTION = (
    "This question names no object of the scan (it asks about the room, or about an object the scan does not "
    "contain), so no box is drawn: frames of the room from its video."
)


def _esc(x) -> str:
    return html.escape(str(x))


_NUMBER = re.compile(r"(<b>)?[-+]?(\d[\d,]*(\.\d+)?|\.\d+)%?(</b>)?|n/a")


def _numeric(cell) -> bool:
    return isinstance(cell, (int, float)) or bool(_NUMBER.fullmatch(str(cell)))


def _number_column(cells: list) -> bool:
    """Every filled cell a number or a percentage, and at least one filled (an empty column is a text column)."""
    filled = [c for c in cells if str(c) != ""]
    return bool(filled) and all(_numeric(c) for c in filled)


def _table(headers: list[str], rows: Iterable[list], left: int = 1) -> str:
    """A table whose text columns are left-aligned and whose number columns are right-aligned (the first ``left``
    columns are always left-aligned)."""
    rows = [list(r) for r in rows]
    text = [i < left or not _number_column([r[i] for r in rows if i < len(r)]) for i in range(len(headers))]
    cls = lambda i: "l" if i >= len(text) or text[i] else ""  # noqa: E731
    head = "".join(f'<th class="{cls(i)}">{_esc(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{cls(i)}">{c}</td>' for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def bar_chart_svg(labels: list[str], values: list[float], title: str, width: int = 260, height: int = 150) -> str:
    """A small bar chart as inline SVG, each bar labelled with its count (and its answer below, up to 12 bars)."""
    n = max(1, len(values))
    top = max(values) if values and max(values) > 0 else 1.0
    bar_w = (width - 20) / n
    count_size = 9 if bar_w >= 14 else 7
    bars = []
    for i, (label, v) in enumerate(zip(labels, values)):
        h = (height - 44) * (v / top)
        x = 10 + i * bar_w
        y = height - 20 - h
        bars.append(
            f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" fill="#4a78c2">'
            f"<title>{_esc(label)}: {v:g}</title></rect>"
        )
        if n <= 24:
            bars.append(
                f'<text class="count" x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" font-size="{count_size}" '
                f'text-anchor="middle" fill="#1d2330">{v:g}</text>'
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
    """Letter counts for choices, bins for numbers, label counts for short categorical answers (yes/no).

    ``group``: ``ground_truth``, ``answer_value`` and ``n_options`` (each question's number of options)."""
    values = group["answer_value"].drop_nulls().to_numpy()
    if group["n_options"].max() or (values.size == 0 and group["ground_truth"].n_unique() <= 12):
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


def answerability_table(qa: pl.DataFrame, object_visibility: pl.DataFrame, budgets: tuple[str, ...]) -> str:
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
    smaller = [b for b in budgets if b != "all"]
    rows = []
    for (profile,), group in sorted(base.group_by(["profile"]), key=lambda kv: kv[0]):
        pairs = list(zip(group["key"].to_list(), group["used_obj_ids"].to_list()))
        cells = []
        for b in smaller:
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
        + _table(["profile", "all-frame questions", *smaller], rows)
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
    boxes: list[tuple[int, tuple[int, int, int, int], str]] = field(default_factory=list)  # (object, bbox, colour)
    frame_index: int | None = None  # the source frame (marked on the plan); None for a room frame
    seconds: float | None = None  # the frame's time in the video, shown where the answer reads times (appearance)
    uri: str | None = None  # the frame as a data URI, once shot; None: the frame could not be read
    size: tuple[int, int] = (0, 0)  # the decoded frame's width and height (the boxes' pixel space)


@dataclass
class GalleryItem:
    row: dict
    used: list[int]
    video: Path | None
    caption: str = ""
    shots: list[Shot] = field(default_factory=list)
    plan: str = ""  # the top-down plan's HTML (plan_view), "" when the scan has nothing to draw
    check: str = ""  # the facts the answer follows from (answer_check), "" when none applies


def _frame_uri(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode() if ok else ""


def _legend(used: list[int], labels: dict[tuple[str, int], str], key: str, boxed: set[int]) -> str:
    """One swatch per named object, in its box colour, with its id and label; objects without a box say so."""
    items = []
    colours = object_colours(used)
    for obj in dict.fromkeys(used):
        colour = colours[obj]
        label = labels.get((key, obj), "")
        text = f"object {obj}" + (f": {label}" if label else "")
        note = "" if obj in boxed else ' <span class="dim">(in no frame shown)</span>'
        items.append(f'<span data-object="{obj}"><span class="swatch" style="border-color:{colour}"></span>'
                     f'{_esc(text)}{note}</span>')
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
    facts: ScanFacts | None = None,
) -> GalleryItem:
    """Which frames a sample question shows and the boxes drawn on them; nothing is decoded yet.

    ``facts``: the question's scan (``answer_check.scan_facts``); an appearance-order question shows each named
    category's first-appearance frame in time order, the frames its answer is read from (``first_appearances``).
    """
    used = list(row["used_obj_ids"] or [])
    real = row["video_kind"] == "real"
    video = video_file(row["video"]) if real and row["video"] else None
    item = GalleryItem(row, used, video)
    firsts = first_appearances(row, facts) if facts is not None and _is_appearance(row) else []
    if video is not None and firsts:
        samples = frame_samples.filter((pl.col("key") == row["key"]) & (pl.col("budget") == row["budget"]))
        rank_of = dict(zip(samples["frame_index"].to_list(), samples["rank"].to_list()))
        colours = object_colours(used)
        seen = visibility.filter((pl.col("key") == row["key"]) & pl.col("object_id").is_in(used)) if visibility.height else visibility
        for category, obj, frame_index, seconds in firsts[:max_frames]:
            if frame_index not in rank_of:
                continue
            box = seen.filter((pl.col("object_id") == obj) & (pl.col("frame_index") == frame_index)) if seen.height else seen
            boxes = [(obj, tuple(b), colours[obj]) for b in (box["bbox"].to_list() if box.height else [])]
            item.shots.append(Shot(video, rank_of[frame_index], f"frame {frame_index}: first {category}", boxes,
                                   frame_index=frame_index, seconds=seconds))
        item.caption = "Each category's first-appearance frame, in time order (the order the answer gives)."
    elif video is not None and not used:
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
        colours = object_colours(used)
        for frame_index in covering_frames(best, seen, max_frames):
            boxes = [
                (obj["object_id"], tuple(obj["bbox"]), colours[obj["object_id"]])
                for obj in seen.filter(pl.col("frame_index") == frame_index).sort("object_id").iter_rows(named=True)
            ]
            item.shots.append(Shot(video, rank_of[frame_index], f"frame {frame_index}", boxes, frame_index=frame_index))
    return item


def covering_frames(best: list[int], seen: pl.DataFrame, max_frames: int) -> list[int]:
    """Up to ``max_frames`` of the objects' best frames, in frame order, chosen to box as many named objects as they
    can (each pick the frame boxing most objects not yet boxed; ties: the earlier frame).

    With more best frames than shown, the first ones in frame order left later objects unboxed: a counting
    question's fifth chair, a relative-distance question's last option. The same frames as before when they fit.
    """
    candidates = sorted(set(best))
    if len(candidates) <= max_frames:
        return candidates
    boxed_in = {f: set(seen.filter(pl.col("frame_index") == f)["object_id"].to_list()) for f in candidates}
    chosen: list[int] = []
    covered: set[int] = set()
    while len(chosen) < max_frames:
        frame = max((f for f in candidates if f not in chosen), key=lambda f: (len(boxed_in[f] - covered), -f))
        chosen.append(frame)
        covered |= boxed_in[frame]
    return sorted(chosen)


def shoot(shots: list[Shot]) -> None:
    """Decode, draw and encode every shot, video by video in frame order (``Shot.uri``).

    Each video is decoded once, forward, in rank order, whatever order the
    questions show its frames in; a frame two questions show is decoded and
    encoded once per question showing it (the same bytes each time).
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
                shot.uri = _frame_uri(last[1])  # boxes are drawn over it in SVG (render_item), in legend colours
                shot.size = (int(last[1].shape[1]), int(last[1].shape[0]))
        finally:
            frames.close()


def render_item(item: GalleryItem, labels: dict[tuple[str, int], str] | None = None) -> str:
    """A sample question with its shot frames (``shoot`` first), its options, answer and box legend."""
    row, used, video, caption = item.row, item.used, item.video, item.caption
    real = row["video_kind"] == "real"
    shown = [shot for shot in item.shots if shot.uri is not None]
    images = [_shot_html(shot) for shot in shown]
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
        f"<p>{_esc(row['question'])}</p><p>{options}</p><p><b>Answer:</b> {_esc(row['ground_truth'])}</p>{item.check}"
        f'<div class="evidence">{item.plan}<div><div class="frames">{frames_html}</div>{legend}{caption_html}</div></div></div>'
    )


def _shot_html(shot: Shot) -> str:
    """The frame with its boxes drawn over it as SVG rectangles (crisp at any zoom, colours exactly the legend's)."""
    width, height = shot.size
    boxes = "".join(
        f'<rect data-object="{obj}" x="{x0}" y="{y0}" width="{max(x1 - x0, 1)}" height="{max(y1 - y0, 1)}" fill="none" '
        f'stroke="{colour}" stroke-width="{max(2, round(width / 160))}"/>'
        f'<text x="{x0 + 3}" y="{y0 + max(12, round(width / 28))}" font-size="{max(12, round(width / 28))}" '
        f'fill="{colour}" stroke="#fff" stroke-width="3" paint-order="stroke" font-weight="700">{obj}</text>'
        for obj, (x0, y0, x1, y1), colour in shot.boxes
    )
    overlay = (
        f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" font-family="system-ui,sans-serif">{boxes}</svg>'
        if boxes and width else ""
    )
    seconds = f" · {shot.seconds:.1f} s" if shot.seconds is not None else ""
    caption = f"<figcaption>f{shot.frame_index}{seconds}</figcaption>" if shot.frame_index is not None else ""
    return f'<figure class="shot"><img alt="{_esc(shot.alt)}" src="{shot.uri}">{overlay}{caption}</figure>'


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
    budgets: tuple[str, ...],
    excluded_scans: dict | None = None,
    verdicts: list[dict] | None = None,
    churn_rows: list[dict] | None = None,
    previous_version: str | None = None,
    sampler_validity: str = "",
    release: dict | None = None,
    frames_of: FramesOf | None = None,
    question_rows: Callable[[list[str]], pl.DataFrame] | None = None,
    baselines: list[dict] | None = None,
    visibility_of: FramesOf | None = None,
) -> str:
    """The page; ``sampler_validity`` is the frame samplers' validity section (``pipeline.sampling.validity``);
    ``verdicts`` are ``verdict_outcomes`` (each verdict, applied or why not), ``churn_rows`` the ``churn`` of this
    release against the one it follows (shown when given), ``previous_version`` that release's name, ``release`` what names the release
    at the top (``release_stamp``), ``frames_of`` the camera poses of the sampled questions' scans when ``tables``
    has no ``frames`` table (the plans' camera paths), ``question_rows`` the full rows of the sampled questions
    (by id) when ``tables["qa"]`` holds only the columns the counts, charts and baselines read; ``baselines`` the
    real-video ``baseline_rows`` when the caller has them (the release writes the same rows to its manifest: the
    blind baseline is worth computing once); ``visibility_of`` the per-frame visibility of the sampled questions'
    scans when ``tables`` has no ``visibility`` table (millions of rows at thousands of scans, a few scans shown)."""
    qa = tables["qa"]
    budget_names = tuple(budgets)  # the run's frame_budgets(config): the columns of every per-budget table
    frame_samples = tables.get("frame_samples", pl.DataFrame())
    visibility = tables.get("visibility")
    object_visibility = tables.get("object_visibility", pl.DataFrame())
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_esc(title)}</title><style>{CSS}</style></head><body>"]
    scans = tables.get("scans", pl.DataFrame())
    warned = _warned_scans(scans)
    warned_text = "" if warned is None else f" {warned.height} of {scans.height} scans with warnings."
    released = scans.height if "key" in scans.columns else qa["key"].n_unique()
    left_out = (excluded_scans or {}).get("failed_scans", [])
    over = (f"the {released} released scans of {released + len(left_out)} registered" if left_out
            else f"{qa['key'].n_unique()} scans")
    parts.append(f"<h1>{_esc(title)}</h1>")
    parts.append(exclusions_html(released, excluded_scans))  # before anything else: a partial release says so first
    parts.append(f"<p class=meta>{qa.height} questions over {over}.{warned_text}</p>")
    parts.append(release_stamp(release, gate))

    # Counts per type and budget: real videos per budget, dummy videos apart (the charts count real videos only).
    types = sorted(qa.select("profile", "question_type").unique().iter_rows())  # distinct pairs: no list of every row
    counts = {(p, t, b): 0 for p, t in types for b in budget_names}
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
            ["profile", "question type", *budget_names, "real videos", "dummy videos"],
            [
                [p, t, *[counts[(p, t, b)] for b in budget_names], sum(counts[(p, t, b)] for b in budget_names), dummies[(p, t)]]
                for p, t in types
            ],
            left=2,
        )
    )

    if churn_rows is not None:
        parts.append(churn_section(churn_rows, previous_version))

    # Answer distributions (real videos).
    parts.append(
        "<h2>Answer distributions</h2><p class=meta>Real-video questions of every budget; the number after each "
        "title is the chart's total.</p><div class=charts>"
    )
    # Only what the charts read, one chart's rows at a time: the real-video rows copied and split at once were
    # 3 GB at 10,000 scans (the option texts above all: a chart needs only their number).
    charted = qa.select(
        "id", "profile", "question_type", "video_kind", "ground_truth", "answer_value",
        pl.col("options").list.len().fill_null(0).alias("n_options"),
    )
    for (profile, t), group in sorted_groups(charted, ["profile", "question_type"], where=pl.col("video_kind") == "real"):
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
        "<em>adversary</em>, <em>+ context</em>, <em>category prior</em>: the learned blind adversary's held-out "
        "score (trees on the question; with the scene's other questions; the category prior alone), by scene; "
        "<em>candidates</em>: questions the answer-distribution control saw, <em>dropped</em>: those it removed; "
        "<em>before</em>: the content baseline before it; <em>95% CI</em>: the width of a score's interval on this "
        "many questions (flagged over 20 points: too few to rank models).</p>"
    )
    real = pl.col("video_kind").fill_null("real") == "real"
    if charted.select(real.any()).item():
        rows = baselines if baselines is not None else baseline_rows(qa, tables.get("qa_distribution_drops"), where=real)
        pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        ci = lambda r: "n/a" if r["ci95_width"] is None else f"{100 * r['ci95_width']:.1f}" + (" (wide)" if r["ci_wide"] else "")  # noqa: E731
        parts.append(
            _table(
                ["profile", "question type", "budget", "answer", "by letter", "by content", "best constant", "at",
                 "blind", "adversary", "+ context", "category prior", "questions", "candidates", "dropped", "before", "95% CI (points)"],
                [[r["profile"], r["question_type"], r["budget"], _esc(r["answer"]), pct(r["frequency"]), pct(r["content"]),
                  pct(r["best_constant"]), "" if r["best_constant_answer"] is None else f"{r['best_constant_answer']:g}",
                  pct(r["blind"]), pct(r.get("adversary")), pct(r.get("adversary_context")), pct(r.get("category_prior")),
                  r["questions"], r["candidates"], r["dropped"], pct(r["before"]), ci(r)]
                 for r in sorted(rows, key=lambda r: (r["profile"], r["question_type"], r["budget"]))],
                left=3,
            )
        )

    # Visibility per budget.
    if object_visibility.height:
        parts.append("<h2>Visible objects per budget</h2>")
        rows = []
        for b in budget_names:
            g = object_visibility.filter(pl.col("budget") == b)
            if g.height:
                rows.append([b, g.height, int(g["visible"].sum()), f"{100 * g['visible'].mean():.1f}%"])
        parts.append(_table(["budget", "objects", "visible", "share"], rows))
        parts.append(answerability_table(qa, object_visibility, budget_names))
    if sampler_validity:
        parts.append(sampler_validity)

    if warned is not None:
        parts.append(_warnings_section(warned, scans.height))

    # Gate results.
    if gate is not None:
        docs = (release or {}).get("data_docs")
        where = f'<a href="{_esc(docs)}">the Data Docs</a>' if docs else "data_docs/index.html"
        parts.append(f"<h2>Expectations</h2><p class=meta>The same results with their details: {where}.</p>")
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
    # Per type, its rows' positions in table order (a group of the whole table would copy every column).
    positions = qa.select("question_type").with_row_index("_row").group_by("question_type").agg(pl.col("_row"))
    for t, rows in sorted(zip(positions["question_type"].to_list(), positions["_row"].to_list()), key=lambda kv: kv[0]):
        rng = seeding.rng(seed, "report-gallery", t)
        picks = sorted(rng.choice(len(rows), size=min(samples_per_type, len(rows)), replace=False).tolist())
        samples += [qa.row(rows[i], named=True) for i in picks]
    if question_rows is not None and samples:
        whole = {row["id"]: row for row in question_rows([row["id"] for row in samples]).iter_rows(named=True)}
        samples = [whole[row["id"]] for row in samples]
    # The sampled questions' scans only, once: every item would otherwise scan every scan's frames.
    shown = sorted({row["key"] for row in samples})
    if visibility is None:
        visibility = (visibility_of(shown) if visibility_of is not None and shown else None)
    frame_samples, visibility = (
        df.filter(pl.col("key").is_in(shown)) if "key" in df.columns else df
        for df in (frame_samples, pl.DataFrame() if visibility is None else visibility)
    )
    objects = tables.get("objects", pl.DataFrame())
    labels = {}
    if {"key", "object_id", "category"} <= set(objects.columns):
        shown_objects = objects.filter(pl.col("key").is_in(shown))
        labels = dict(zip(zip(shown_objects["key"].to_list(), shown_objects["object_id"].to_list()),
                          shown_objects["category"].to_list()))
    facts = _scan_facts(tables, shown)
    items = [plan_item(row, video_file, frame_samples, visibility, frames_per_question, facts.get(row["key"]))
             for row in samples]
    for item in items:
        item.check = answer_check_html(item.row, _geometry(item.row), facts.get(item.row["key"], ScanFacts()))
    shoot([shot for item in items for shot in item.shots])
    attach_plans(items, tables, frame_samples, shown, frames_of)
    parts.extend(render_item(item, labels) for item in items)
    parts.append("</body></html>")
    return "".join(parts)


def exclusions_html(released: int, excluded: dict | None) -> str:
    """The report's first lines when the release leaves scans out: how many of the registered scans it holds, and
    each scan left out with its one-line reason (the manifest's ``checks.excluded_scans``); "" for a complete
    release. Without it a partial release read as a complete one: its header counted only the scans it holds."""
    excluded = excluded or {}
    failed, skipped = excluded.get("failed_scans", []), excluded.get("skipped_folders", [])
    if not failed and not skipped:
        return ""
    lines = []
    if failed:
        registered = released + len(failed)
        lines.append(f'<p class="bad">Partial release: {released} of {registered} registered scans released, '
                     f'{len(failed)} left out.</p>')
    items = [
        f'<li data-excluded="{_esc(f["key"])}"><code>{_esc(f["key"])}</code>'
        f'{" (" + _esc(f["state"].replace("_", " ")) + ")" if f.get("state") else ""}: {_esc(f["error"])}</li>'
        for f in failed
    ]
    if skipped:
        lines.append(f"<p>{len(skipped)} folder{'s' * (len(skipped) != 1)} under the scans root skipped by discovery "
                     "(not registered as scans).</p>")
        items += [f"<li>skipped folder {_esc(line)}</li>" for line in skipped]
    return f'<section id="excluded-scans">{"".join(lines)}<ul>{"".join(items)}</ul></section>'


STAMP_START, STAMP_END = "<!-- release stamp -->", "<!-- /release stamp -->"


def release_stamp(release: dict | None, gate: dict | None) -> str:
    """What names this release, first on the page: version, code revision, config digest, build date, gate verdict
    and links to the Data Docs and the manifest (paths relative to the report, so the links work wherever the
    release folder is copied).

    It sits between ``STAMP_START`` and ``STAMP_END``: the build bench compares two builds' reports without it
    (their code revision and date differ; the rest of the page must be the same bytes).
    """
    if not release and gate is None:
        return ""
    release = release or {}
    rows = []
    if release.get("version"):
        rows.append(("release", f"<code>{_esc(release['version'])}</code>"))
    if release.get("code_revision"):
        rows.append(("code revision", f"<code>{_esc(release['code_revision'])}</code>"))
    if release.get("config_digest"):
        rows.append(("config digest", f"<code>{_esc(release['config_digest'])}</code> (sha256 of the manifest's config)"))
    if release.get("built_at"):
        rows.append(("built", _esc(release["built_at"])))
    if gate is not None:
        results = gate.get("results", [])
        failed = sum(not r["success"] for r in results)
        verdict = (f'<span class="ok">passed</span>: all {len(results)} expectations hold' if gate.get("success")
                   else f'<span class="bad">FAILED</span>: {failed} of {len(results)} expectations fail')
        rows.append(("quality gate", verdict))
    links = [(text, href) for text, href in (("Data Docs", release.get("data_docs")), ("manifest.json", release.get("manifest"))) if href]
    if links:
        rows.append(("files", " · ".join(f'<a href="{_esc(href)}">{_esc(text)}</a>' for text, href in links)))
    body = "".join(f"<dt>{_esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return f'{STAMP_START}<dl class="stamp">{body}</dl>{STAMP_END}'


def without_stamp(page: str) -> str:
    """The report page without its release stamp (for comparing two builds of the same release)."""
    start, end = page.find(STAMP_START), page.find(STAMP_END)
    return page if start < 0 or end < 0 else page[:start] + page[end + len(STAMP_END):]


def _answer_text(row: dict) -> str:
    """The answer as the option text (``"left"``), not its letter: the plan shades the answer's sector or segment."""
    truth = str(row["ground_truth"])
    for option in row["options"] or []:
        letter, _, text = option.partition(". ")
        if letter == truth and text:
            return text
    return truth


def attach_plans(
    items: list[GalleryItem],
    tables: dict[str, pl.DataFrame],
    frame_samples: pl.DataFrame,
    keys: list[str],
    frames_of: FramesOf | None,
) -> None:
    """Each sample question's top-down plan (``GalleryItem.plan``), drawn from its scan's rooms, objects and poses.

    Only the sampled questions' scans are read, each scan's footprints and poses once for all its questions.
    """
    def of_keys(df: pl.DataFrame | None) -> pl.DataFrame:
        if df is None or "key" not in df.columns:
            return pl.DataFrame({"key": []}, schema={"key": pl.String})
        return df.filter(pl.col("key").is_in(keys))

    def by_key(df: pl.DataFrame | None) -> dict[str, pl.DataFrame]:  # split once: a filter per item costs more
        df = of_keys(df)
        return {k: part for (k,), part in df.partition_by("key", as_dict=True).items()} if df.height else {}

    objects, rooms = by_key(tables.get("objects")), by_key(tables.get("rooms"))
    frames = tables.get("frames")
    if frames is None and frames_of is not None and keys:
        frames = frames_of(keys)
    frames = by_key(frames)
    budgets: dict[tuple[str, str], list[int]] = {}
    if {"key", "budget", "frame_index"} <= set(frame_samples.columns):
        for (key, budget), part in of_keys(frame_samples).partition_by(["key", "budget"], as_dict=True).items():
            budgets[(key, budget)] = part["frame_index"].to_list()
    empty = pl.DataFrame()
    scenes: dict[str, ScenePlan] = {}
    for item in items:
        key = item.row["key"]
        if key not in scenes:
            scenes[key] = scene_plan(objects.get(key, empty), rooms.get(key, empty), frames.get(key, empty))
        item.plan = plan_html(item, scenes[key], budgets.get((key, item.row["budget"]), []))


def _geometry(row: dict) -> dict:
    """A question's audit record (its ``geometry`` JSON); {} when absent or not an object."""
    try:
        geometry = json.loads(row["geometry"]) if row.get("geometry") else {}
    except (TypeError, ValueError):
        geometry = {}
    return geometry if isinstance(geometry, dict) else {}


def _is_appearance(row: dict) -> bool:
    return str(row["question_type"]).endswith("appearance_order")


def _scan_facts(tables: dict[str, pl.DataFrame], keys: list[str]) -> dict[str, ScanFacts]:
    """Per shown scan, what the answer checks read (its objects, rooms and first appearances), split once."""
    def by_key(name: str) -> dict[str, pl.DataFrame]:
        df = tables.get(name)
        if df is None or "key" not in df.columns or not keys:
            return {}
        return {k: part for (k,), part in df.filter(pl.col("key").is_in(keys)).partition_by("key", as_dict=True).items()}

    objects, rooms, firsts = by_key("objects"), by_key("rooms"), by_key("object_visibility")
    neighbours = by_key("pinpoint_neighbors")
    empty = pl.DataFrame()
    return {k: scan_facts(objects.get(k, empty), rooms.get(k, empty), firsts.get(k, empty), neighbours.get(k))
            for k in keys}


def plan_html(item: GalleryItem, scene: ScenePlan, budget_frames: list[int]) -> str:
    """The plan of one sample question with its caption; "" when its scan has no room, object or pose to draw."""
    row = item.row
    geometry = _geometry(row)
    if row["options"]:
        geometry.setdefault("correct", _answer_text(row))
    real = row["video_kind"] == "real"
    shown = [s.frame_index for s in item.shots if s.frame_index is not None and s.uri is not None]
    svg, caption = plan_svg(scene, item.used, geometry, object_colours(item.used), budget_frames if real else [], shown)
    if not svg:
        return ""
    path = ""
    if scene.camera_xy:
        ticks = " with ticks" if len(budget_frames) <= MAX_TICKS else ""
        path = (f" Grey: the camera path; dots{ticks}: the {len(budget_frames)} frames of budget {row['budget']}"
                + (" (tick: where the camera looks)" if ticks else "") + ("; rings: the frames shown here" if shown else "") + "."
                if real else " Grey: the camera path (this dummy video shows none of its frames).")
    legend = ("Seen from above (x right, y up): floor polygon, every object's footprint (grey), the question's objects "
              "in their box colours." + path)
    return (f'<div class="planbox"><div class="meta"><b>Plan</b></div>{svg}'
            f'<p class="plancap">{_esc(caption)} {_esc(legend)}</p></div>')


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
        f"Gone by cause: {_esc(cause_text(total, 'gone'))}; new by cause: {_esc(cause_text(total, 'new'))}. "
        "Questions a reviewer accepted are kept while their scan is released; the previous release's questions "
        "are kept unless a bound forces them out.</p>"
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
