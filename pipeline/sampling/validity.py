"""What sampling does to validity: per type and sampler, how many all-frame answers stay right.

ReVSI's point in numbers: of the questions a benchmark answers from every
frame, how many are still right for the frames a model actually sees (about
67% of VSI-Bench's at 16 frames, 92% at 64 in ReVSI), how many change, and how
many have no answer at all. Read from ``sampled_answers`` tables
(``pipeline.sampling.answers``); the plot is a self-contained SVG.
"""

from __future__ import annotations

import html
import math

import polars as pl

ALL_TYPES = "(all types)"


def validity_table(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Rows per profile, sampler and question type (plus an all-types row): counts and the share that stays."""
    if outcomes.height == 0:
        return pl.DataFrame(schema={"profile": pl.String, "sampler": pl.String, "question_type": pl.String})
    per_scan = outcomes.unique(["sampler", "key"]).group_by("sampler").agg(frames=pl.col("frames").mean())

    def agg(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
        return df.group_by(by).agg(
            questions=pl.len(),
            stays=(pl.col("outcome") == "stays").sum(),
            changes=(pl.col("outcome") == "changes").sum(),
            unanswerable=(pl.col("outcome") == "unanswerable").sum(),
        )

    typed = agg(outcomes, ["profile", "sampler", "question_type"])
    total = agg(outcomes, ["profile", "sampler"]).with_columns(question_type=pl.lit(ALL_TYPES)).select(typed.columns)
    table = pl.concat([typed, total]).join(per_scan, on="sampler", how="left")
    table = table.with_columns(
        valid=(pl.col("stays") / pl.col("questions")),
        changed=(pl.col("changes") / pl.col("questions")),
        lost=(pl.col("unanswerable") / pl.col("questions")),
    )
    return table.sort("profile", "question_type", "frames", "sampler")


def markdown(table: pl.DataFrame) -> str:
    lines = ["| profile | question type | sampler | frames/scan | questions | stay | change | unanswerable | valid |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in table.iter_rows(named=True):
        lines.append(
            f"| {r['profile']} | {r['question_type']} | {r['sampler']} | {r['frames']:.1f} | {r['questions']} | "
            f"{r['stays']} | {r['changes']} | {r['unanswerable']} | {100 * r['valid']:.1f}% |"
        )
    return "\n".join(lines) + "\n"


def validity_svg(table: pl.DataFrame, width: int = 560, height: int = 320) -> str:
    """Share of all-frame answers still right against frames per scan (log axis), one line per profile."""
    rows = table.filter(pl.col("question_type") == ALL_TYPES).sort("frames")
    left, right, top, bottom = 50, 150, 20, 40
    frames = [max(float(f), 1.0) for f in rows["frames"].to_list()] or [1.0]
    lo, hi = math.log10(min(frames)), math.log10(max(frames))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def x(f: float) -> float:
        return left + (math.log10(max(f, 1.0)) - lo) / (hi - lo) * (width - left - right)

    def y(v: float) -> float:
        return top + (1.0 - v) * (height - top - bottom)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<line x1="{left}" y1="{y(0)}" x2="{width - right}" y2="{y(0)}" stroke="#999"/>',
             f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{y(1)}" stroke="#999"/>']
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{int(v * 100)}%</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 6}" font-size="11" text-anchor="middle">'
                 f'frames per scan (log scale)</text>')
    for i, (profile, group) in enumerate(sorted(rows.group_by("profile"), key=lambda kv: kv[0])):
        colour = colours[i % len(colours)]
        pts = [(x(float(r["frames"])), y(float(r["valid"])), r) for r in group.sort("frames").iter_rows(named=True)]
        parts.append(f'<polyline fill="none" stroke="{colour}" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b, _ in pts)}"/>')
        for a, b, r in pts:
            parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour}"/>')
            parts.append(f'<text x="{a + 4:.1f}" y="{b - 4:.1f}" font-size="9">{html.escape(r["sampler"])}</text>')
        parts.append(f'<text x="{width - right + 10}" y="{top + 14 * (i + 1)}" font-size="11" fill="{colour}">'
                     f'{html.escape(profile[0])}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">'
            f'<title>answers still right against frames seen</title>{"".join(parts)}</svg>\n')


def report_section(tables: dict, config) -> str:
    """The reviewer report's section for ``config.samplers``: validity per sampler (plot) and per type (table)."""
    from pipeline.frames.budgets import frame_budgets
    from pipeline.sampling.answers import compute_answers
    from pipeline.sampling.spec import parse_sampler

    if not config.samplers or "visibility" not in tables:
        return ""
    outcomes = pl.concat([compute_answers(parse_sampler(s, frame_budgets(config)), tables, config).outcomes for s in config.samplers])
    table = validity_table(outcomes)
    head = ("<h2>Validity under frame samplers</h2><p class=meta>Of the all-frame questions, how many answers stay "
            "right for the frames each configured sampler takes (config <code>samplers</code>), change, or have no "
            "answer (scan2qa answers computes them; frames per scan are averages).</p>")
    cells = "".join(
        f"<tr><td>{html.escape(r['profile'])}</td><td>{html.escape(r['question_type'])}</td>"
        f"<td>{html.escape(r['sampler'])}</td><td>{r['frames']:.1f}</td><td>{r['questions']}</td><td>{r['stays']}</td>"
        f"<td>{r['changes']}</td><td>{r['unanswerable']}</td><td>{100 * r['valid']:.1f}%</td></tr>"
        for r in table.iter_rows(named=True)
    )
    return (head + validity_svg(table) + "<table><tr><th>profile</th><th>type</th><th>sampler</th><th>frames</th>"
            "<th>questions</th><th>stay</th><th>change</th><th>unanswerable</th><th>valid</th></tr>" + cells + "</table>")
