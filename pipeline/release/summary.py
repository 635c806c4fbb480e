"""The release in a few lines of Markdown, for the catalog: what a reviewer sees first without opening the report.

The Dagster UI renders Markdown metadata in place, whereas a link to a local
file is refused by the browser; so the verdict, the counts, the scans left
out and the baselines travel with the materialization itself (``assets.release``).
"""

from __future__ import annotations


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * float(x):.1f}%"


def _cell(text) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def release_summary_md(manifest: dict, registered: int) -> str:
    """The summary of a written release from its ``manifest.json`` and the number of registered scans."""
    checks = manifest.get("checks", {})
    results = checks.get("results", [])
    failed = [r for r in results if not r.get("success")]
    excluded = checks.get("excluded_scans", {}).get("failed_scans", [])
    counts = manifest.get("row_counts", {})
    released = registered - len(excluded)
    lines = [f"**Release {manifest.get('version', '')}**", ""]
    if excluded:
        lines.append(f"**Partial release: {released} of {registered} registered scans released, {len(excluded)} left out.**")
        lines += [f"- `{e['key']}` ({e['state'].replace('_', ' ')}): {_cell(e['error'])}" for e in excluded]
        lines.append("")
    gate = ("passed: all" if not failed else f"FAILED: {len(failed)} of") + f" {len(results)} expectations hold"
    lines += [
        f"- questions: {int(counts.get('qa', 0)):,} over {released} of {registered} registered scans",
        f"- quality gate {gate}",
        f"- rejected by reviewers: {len(checks.get('rejected_by_reviewers', []))}",
    ]
    if checks.get("churn"):
        from pipeline.release.churn import churn_line

        lines.append(f"- {churn_line(checks['churn']['totals'], checks['churn']['previous_release'])}")
    lines.append("")
    baselines = sorted(checks.get("baselines", []), key=lambda r: (r["profile"], r["question_type"], r["budget"]))
    if baselines:
        lines += ["| profile | question type | budget | questions | most frequent | by letter | by content | blind |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['profile']} | {r['question_type']} | {r['budget']} | {r['questions']} | {_cell(r['answer'])} | "
                  f"{_pct(r['frequency'])} | {_pct(r['content'])} | {_pct(r.get('blind'))} |" for r in baselines]
    return "\n".join(lines)
