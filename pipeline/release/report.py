"""The reviewer's page for a release: one self-contained HTML file, readable offline.

Everything is inline (CSS, SVG charts, frames as data URIs) so the page opens
from a mail attachment or a shared drive with no network and no scripts.
It shows what a reviewer checks before signing a release off: how many
questions of each type per budget, how the answers are distributed (answer
priors show up here first), the frequency baselines, how many named objects
are visible per budget, which expectations ran, and sample questions with the
frames where their objects are seen and the objects' boxes drawn.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import cv2
import numpy as np
import polars as pl

from pipeline import seeding
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
.meta{color:#667;font-size:12px}
"""


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


def _read_frame(video: Path, rank: int) -> np.ndarray | None:
    cap = cv2.VideoCapture(str(video))
    try:
        cap.set(cv2.CAP_PROP_POS_FRAMES, rank)
        ok, frame = cap.read()
        return frame if ok else None
    finally:
        cap.release()


def _frame_uri(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode() if ok else ""


def _gallery_item(
    row: dict, video_file: VideoFile, frame_samples: pl.DataFrame, visibility: pl.DataFrame, max_frames: int
) -> str:
    used = list(row["used_obj_ids"] or [])
    images = []
    video = video_file(row["video"]) if row["video_kind"] == "real" and used and row["video"] else None
    if video is not None:
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
            image = _read_frame(video, rank_of[frame_index])
            if image is None:
                continue
            for obj in seen.filter(pl.col("frame_index") == frame_index).iter_rows(named=True):
                x0, y0, x1, y1 = obj["bbox"]
                colour = BOX_COLOURS[used.index(obj["object_id"]) % len(BOX_COLOURS)]
                cv2.rectangle(image, (x0, y0), (x1, y1), colour, 2)
                cv2.putText(image, str(obj["object_id"]), (x0 + 3, y0 + 14), cv2.FONT_HERSHEY_SIMPLEX, 0.5, colour, 1)
            images.append(f'<img alt="frame {frame_index}" src="{_frame_uri(image)}">')
    options = "<br>".join(_esc(o) for o in (row["options"] or []))
    frames_html = "".join(images) or '<span class="meta">no frame with the named objects is available</span>'
    return (
        f'<div class="q"><div class="meta">{_esc(row["id"])} · {_esc(row["key"])} · budget {_esc(row["budget"])} · '
        f'{_esc(row["question_type"])} · video {_esc(row["video_kind"])} · objects {_esc(used)}</div>'
        f"<p>{_esc(row['question'])}</p><p>{options}</p><p><b>Answer:</b> {_esc(row['ground_truth'])}</p>"
        f'<div class="frames">{frames_html}</div></div>'
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
) -> str:
    qa = tables["qa"]
    frame_samples = tables.get("frame_samples", pl.DataFrame())
    visibility = tables.get("visibility", pl.DataFrame())
    object_visibility = tables.get("object_visibility", pl.DataFrame())
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{_esc(title)}</title><style>{CSS}</style></head><body>"]
    parts.append(f"<h1>{_esc(title)}</h1><p class=meta>{qa.height} questions over {qa['key'].n_unique()} scans.</p>")

    # Counts per type and budget.
    types = sorted(set(zip(qa["profile"].to_list(), qa["question_type"].to_list())))
    counts = {(p, t, b): 0 for p, t in types for b in BUDGETS}
    for (p, t, b), g in qa.group_by(["profile", "question_type", "budget"]):
        counts[(p, t, b)] = g.height
    parts.append("<h2>Questions per type and frame budget</h2><p class=meta>All video kinds: real videos and the 16-frame dummy-video probes (the answer charts below count real videos only).</p>")
    parts.append(
        _table(
            ["profile", "question type", *BUDGETS, "total"],
            [[p, t, *[counts[(p, t, b)] for b in BUDGETS], sum(counts[(p, t, b)] for b in BUDGETS)] for p, t in types],
            left=2,
        )
    )

    # Answer distributions (real videos).
    parts.append("<h2>Answer distributions</h2><p class=meta>Real-video questions only, so a type's total here excludes its dummy-video probes counted above.</p><div class=charts>")
    # Only what the charts and baselines read: copying every column of a million questions costs gigabytes.
    charted = ["id", "profile", "budget", "question_type", "video_kind", "ground_truth", "options", "answer_value"]
    real = qa.select(charted).filter(pl.col("video_kind") == "real")
    for (profile, t), group in sorted(real.group_by(["profile", "question_type"]), key=lambda kv: kv[0]):
        labels, values = _histogram(group)
        if labels:
            parts.append(bar_chart_svg(labels, values, f"{profile} · {t} ({group.height})"))
    parts.append("</div>")

    # Frequency baselines: one row per profile (revsi and vsibench share type names), by letter and by content.
    parts.append(
        "<h2>Frequency baselines</h2><p class=meta>Always answering the most frequent answer of a type; numeric "
        "types: the mode scored with MRA; choices: by letter and by content (option text). <em>dropped</em>: "
        "questions the answer-distribution control removed; <em>before</em>: the content baseline before it.</p>"
    )
    if real.height:
        rows = baseline_rows(real, tables.get("qa_distribution_drops"))
        pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        parts.append(
            _table(
                ["profile", "question type", "budget", "answer", "by letter", "by content", "questions", "dropped", "before"],
                [[r["profile"], r["question_type"], r["budget"], _esc(r["answer"]), pct(r["frequency"]), pct(r["content"]),
                  r["questions"], r["dropped"], pct(r["before"])]
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

    # Gate results.
    if gate is not None:
        parts.append("<h2>Expectations</h2>")
        rows = []
        for r in gate.get("results", []):
            status = '<span class="ok">pass</span>' if r["success"] else '<span class="bad">FAIL</span>'
            rows.append([_esc(r["name"]), status, r["unexpected_count"], _esc(r["guards"]), _esc(", ".join(r["failing_rows"][:5]))])
        parts.append(_table(["expectation", "result", "failing rows", "guards against", "first failing ids"], rows, left=2))

    if rejected or orphan_verdicts:
        parts.append("<h2>Reviewer verdicts</h2>")
        parts.append(f"<p>{len(rejected or [])} questions excluded as rejected.</p>")
        if orphan_verdicts:
            parts.append("<p>Verdicts whose question no longer exists:</p><ul>" + "".join(f"<li>{_esc(o)}</li>" for o in orphan_verdicts) + "</ul>")

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
    for row in samples:
        parts.append(_gallery_item(row, video_file, frame_samples, visibility, frames_per_question))
    parts.append("</body></html>")
    return "".join(parts)


def write_report(path: Path, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(**kwargs), encoding="utf-8")
    return path


def gate_to_dict(gate) -> dict:
    """Accept a GateReport or an already-serialised dict."""
    return gate if isinstance(gate, dict) else json.loads(json.dumps(gate.to_dict()))
