"""Score reports as JSON, a Markdown table and a self-contained HTML page.

The HTML page draws its bar charts as inline SVG with inline CSS: it opens from
a file, offline, in any browser, with no CDN and no JavaScript, so it can be
attached to a release or an issue as is.
"""

from __future__ import annotations

import html
import json
from pathlib import Path


def _pct(value: float | None) -> str:
    return "n/s" if value is None else f"{100.0 * value:.1f}"


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_markdown(report: dict) -> str:
    lines = [
        "# scan2qa evaluation",
        "",
        f"- parsing mode: `{report['mode']}`",
        f"- questions: {report['questions']}, missing predictions: {report['missing']}, "
        f"parse failures: {report['parse_failures']}",
        f"- **overall: {_pct(report['overall'])}** (random {_pct(report['baselines']['random'])}, "
        f"frequency {_pct(report['baselines']['frequency'])})",
        "",
        "Scores are percentages; `n/s` = not scored.",
    ]
    for note in report["notes"]:
        lines.append(f"> note: {note}")
    for group in report["groups"]:
        lines += ["", f"## {group['name']}", ""]
        if group["overall"] is None and group.get("dummy_metrics"):
            lines.append(f"{group['questions']} questions (no overall: its probes read in opposite directions)")
        else:
            lines.append(f"overall **{_pct(group['overall'])}** over {group['questions']} questions")
        if "avg_macro" in group:
            lines.append(f"(avg micro {_pct(group['avg_micro'])}, avg macro {_pct(group['avg_macro'])})")
        if group.get("dummy_metrics"):
            lines += ["", "| dummy-video probe | score | random | frequency |", "|---|---:|---:|---:|"]
            for name, score in group["dummy_metrics"].items():
                rnd = group["baselines"]["random"]["dummy_metrics"].get(name)
                freq = group["baselines"]["frequency"]["dummy_metrics"].get(name)
                better = " (lower is better)" if name in group.get("lower_is_better", ()) else ""
                lines.append(f"| {name}{better} | {_pct(score)} | {_pct(rnd)} | {_pct(freq)} |")
        lines += ["", "| task | score | random | frequency |", "|---|---:|---:|---:|"]
        for task, score in group["tasks"].items():
            rnd = group["baselines"]["random"]["tasks"].get(task)
            freq = group["baselines"]["frequency"]["tasks"].get(task)
            lines.append(f"| {task} | {_pct(score)} | {_pct(rnd)} | {_pct(freq)} |")
        lines += [
            "",
            "| question type | n | score | missing | parse failures | random | frequency (answer) |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for qtype, entry in group["types"].items():
            answer = entry["frequency_answer"]
            answer = "" if answer is None else f" ({answer if len(answer) <= 12 else answer[:12] + '…'})"
            lines.append(
                f"| {qtype} | {entry['questions']} | {_pct(entry['score'])} | {entry['missing']} | "
                f"{entry['parse_failures']} | {_pct(entry['chance'])} | {_pct(entry['frequency'])}{answer} |"
            )
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem;color:#222;max-width:70rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
td:first-child,th:first-child{text-align:left}.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.3rem .6rem}
.legend span{display:inline-block;margin-right:1rem}.sw{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem}
"""
_SERIES = (("model", "#3366cc"), ("random", "#bbbbbb"), ("frequency", "#ff9900"))


def _bar_chart(rows: list[tuple[str, float | None, float | None, float | None]]) -> str:
    """Horizontal grouped bars (model, random, frequency) per task, scores in [0, 1]."""
    label_w, bar_w, bar_h, gap = 230, 420, 10, 10
    row_h = 3 * bar_h + gap
    height = len(rows) * row_h + 30
    width = label_w + bar_w + 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for tick in (0, 25, 50, 75, 100):
        x = label_w + bar_w * tick / 100
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 6}" font-size="10" text-anchor="middle">{tick}</text>')
    for i, (name, *values) in enumerate(rows):
        y0 = i * row_h
        parts.append(
            f'<text x="{label_w - 6}" y="{y0 + 1.8 * bar_h:.1f}" font-size="11" text-anchor="end">{html.escape(name)}</text>'
        )
        for j, ((series, colour), value) in enumerate(zip(_SERIES, values)):
            y = y0 + j * bar_h
            if value is None:
                parts.append(f'<text x="{label_w + 2}" y="{y + bar_h - 1}" font-size="9" fill="#999">not scored</text>')
                continue
            w = max(bar_w * min(max(value, 0.0), 1.0), 0.5)
            parts.append(
                f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" fill="{colour}">'
                f"<title>{series}: {100 * value:.1f}</title></rect>"
            )
            if j == 0:
                parts.append(f'<text x="{label_w + w + 3:.1f}" y="{y + bar_h - 1}" font-size="9">{100 * value:.1f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def to_html(report: dict) -> str:
    esc = html.escape
    body = [
        "<h1>scan2qa evaluation</h1>",
        f"<p>parsing mode <code>{esc(report['mode'])}</code>; {report['questions']} questions, "
        f"{report['missing']} missing predictions, {report['parse_failures']} parse failures.</p>",
        f"<p><strong>overall {_pct(report['overall'])}</strong> &mdash; random {_pct(report['baselines']['random'])}, "
        f"frequency {_pct(report['baselines']['frequency'])}</p>",
    ]
    body += [f'<p class="note">{esc(note)}</p>' for note in report["notes"]]
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{s}</span>' for s, c in _SERIES)
    for group in report["groups"]:
        body.append(f"<h2>{esc(group['name'])}</h2>")
        if group["overall"] is None and group.get("dummy_metrics"):
            body.append(f"<p>{group['questions']} questions (no overall: its probes read in opposite directions)")
        else:
            body.append(f"<p>overall <strong>{_pct(group['overall'])}</strong> over {group['questions']} questions")
        if "avg_macro" in group:
            body.append(f" (avg micro {_pct(group['avg_micro'])}, avg macro {_pct(group['avg_macro'])})")
        body.append("</p>")
        rows = [
            (
                task,
                score,
                group["baselines"]["random"]["tasks"].get(task),
                group["baselines"]["frequency"]["tasks"].get(task),
            )
            for task, score in group["tasks"].items()
        ]
        body.append(f'<div class="legend">{legend}</div>')
        body.append(_bar_chart(rows))
        body.append(
            "<table><tr><th>question type</th><th>n</th><th>score</th><th>missing</th><th>parse failures</th>"
            "<th>random</th><th>frequency</th><th>frequency answer</th></tr>"
        )
        for qtype, e in group["types"].items():
            body.append(
                f"<tr><td>{esc(qtype)}</td><td>{e['questions']}</td><td>{_pct(e['score'])}</td><td>{e['missing']}</td>"
                f"<td>{e['parse_failures']}</td><td>{_pct(e['chance'])}</td><td>{_pct(e['frequency'])}</td>"
                f"<td>{esc(str(e['frequency_answer'] or '')[:40])}</td></tr>"
            )
        body.append("</table>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>scan2qa evaluation</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def summary_lines(report: dict) -> list[str]:
    """A few lines for a terminal: overall, baselines and each group's overall (the files hold the rest)."""
    lines = [
        f"overall {_pct(report['overall'])} (random {_pct(report['baselines']['random'])}, "
        f"frequency {_pct(report['baselines']['frequency'])}) over {report['questions']} questions, "
        f"{report['missing']} missing, {report['parse_failures']} parse failures"
    ]
    for group in report["groups"]:
        probes = ", ".join(f"{k} {_pct(v)}" for k, v in (group.get("dummy_metrics") or {}).items())
        lines.append(f"  {group['name']}: " + (probes if probes else f"overall {_pct(group['overall'])}"))
    lines += [f"  note: {note}" for note in report["notes"]]
    return lines


def write_reports(report: dict, out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "scores.json", "markdown": out / "scores.md", "html": out / "scores.html"}
    paths["json"].write_text(to_json(report), encoding="utf-8")
    paths["markdown"].write_text(to_markdown(report), encoding="utf-8")
    paths["html"].write_text(to_html(report), encoding="utf-8")
    return paths
