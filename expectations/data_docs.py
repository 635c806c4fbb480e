"""The gate's Data Docs: Great Expectations' validation results as static pages that open offline.

Great Expectations' own site builder loads jQuery, Bootstrap, bootstrap-table,
Vega and Font Awesome from public CDNs and lists validations with scripts, so
offline its index is blank and its pages unstyled; it also needs a 4 MB
``static/`` folder of fonts. These pages are rendered here instead, from the
same validation results GX returned: plain HTML with inline CSS and inline
SVG status icons, no script, no request beyond the page itself. Every
expectation leads with its plain-language meaning (``Rule.meaning``), then
what a failure means, the Great Expectations rule as configured, the verdict
over the whole view (polars) and GX's verdict on the rows it validated.

Nothing here carries a time or a path outside the site, so the same tables
give byte-identical pages.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from expectations.derived import COLUMN_MEANINGS

INDEX = "index.html"
PAGES = "validations"

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7fb}
header{background:#1f3a5f;color:#fff;padding:14px 28px}header a{color:#cfe0ff}header h1{margin:0;font-size:20px}
main{padding:18px 28px;max-width:1280px}h2{font-size:17px;margin:26px 0 8px}
.summary{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}.card{background:#fff;border:1px solid #dfe3ec;border-radius:6px;
padding:10px 14px;min-width:130px}.card b{display:block;font-size:22px}.card span{color:#5b6475;font-size:12px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%;margin:8px 0}
th,td{border:1px solid #dfe3ec;padding:6px 9px;text-align:left;vertical-align:top}th{background:#eef1f7;font-weight:600}
td.n{text-align:right;white-space:nowrap}tr.failed td{background:#fff4f4}
.icon{width:16px;height:16px;vertical-align:-3px;flex:none}.status{display:flex;gap:6px;align-items:center;white-space:nowrap}
.meaning{font-weight:600}.rule{color:#5b6475;font-size:12px;margin-top:3px}.helper{color:#5b6475;font-size:12px;margin-top:3px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;background:#f1f3f8;padding:1px 4px;border-radius:3px;
word-break:break-word}.ok{color:#1e7e34}.bad{color:#b00020;font-weight:600}.meta{color:#5b6475;font-size:12px}
"""

ICON_PASSED = (
    '<svg class="icon" viewBox="0 0 16 16" width="16" height="16" role="img" aria-label="passed">'
    '<title>passed</title><circle cx="8" cy="8" r="8" fill="#1e8e3e"/>'
    '<path d="M4.4 8.3l2.4 2.4 4.8-5" stroke="#fff" stroke-width="2" fill="none" stroke-linecap="round"/></svg>'
)
ICON_FAILED = (
    '<svg class="icon" viewBox="0 0 16 16" width="16" height="16" role="img" aria-label="failed">'
    '<title>failed</title><circle cx="8" cy="8" r="8" fill="#c5221f"/>'
    '<path d="M5.2 5.2l5.6 5.6M10.8 5.2l-5.6 5.6" stroke="#fff" stroke-width="2" stroke-linecap="round"/></svg>'
)


@dataclass
class ExpectationOutcome:
    """One expectation of a suite: its meaning, its configuration and both verdicts."""

    rule: str  # our rule name, "<table>.<what>"
    meaning: str  # what holds when it passes, in plain words
    guards: str  # what a failure means
    expectation_type: str  # Great Expectations' snake_case type
    kwargs: dict
    success: bool  # decided over the whole view (polars), confirmed by GX on its rows
    unexpected_count: int  # over the whole view
    failing_rows: list[str]  # ids of the first failing rows
    gx_success: bool | None  # GX's verdict on the rows it validated (None: GX raised)
    gx_unexpected_count: int | None = None
    gx_observed: str = ""  # GX's observed value, for table-level rules
    gx_error: str = ""


@dataclass
class SuiteValidation:
    """One validation: a suite run against its view."""

    suite: str
    rows: int  # rows of the view, all decided by polars
    sample_rows: int  # rows Great Expectations validated (every row, in batches)
    gx_version: str
    expectations: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(e.success for e in self.expectations)

    @property
    def failed(self) -> int:
        return sum(not e.success for e in self.expectations)


def outcome_from_gx(
    rule, result, *, unexpected_count: int, failing_rows: list[str], success: bool,
    gx_success: bool | None = None, gx_unexpected_count: int | None = None,
) -> ExpectationOutcome:
    """An ``ExpectationOutcome`` from our rule, GX's ``ExpectationValidationResult`` and the polars verdict.

    ``gx_success`` and ``gx_unexpected_count``, when given, are GX's verdict and count added up over every batch
    it validated (``result`` is then one of those batches' results, for the configuration and observed value).
    """
    config = result.expectation_config
    details = result.result or {}
    error = ""
    if result.exception_info and result.exception_info.get("raised_exception"):
        error = str(result.exception_info.get("exception_message") or "Great Expectations raised an error")
    observed = details.get("observed_value")
    return ExpectationOutcome(
        rule=rule.name,
        meaning=rule.meaning,
        guards=rule.guards,
        expectation_type=str(config.type),
        kwargs={k: v for k, v in dict(config.kwargs).items() if k not in ("batch_id", "result_format")},
        success=success,
        unexpected_count=unexpected_count,
        failing_rows=list(failing_rows),
        gx_success=None if error else (bool(result.success) if gx_success is None else gx_success),
        gx_unexpected_count=details.get("unexpected_count") if gx_unexpected_count is None else gx_unexpected_count,
        gx_observed="" if observed is None else json.dumps(observed, default=str)[:400],
        gx_error=error.splitlines()[0][:300] if error else "",
    )


def _esc(x) -> str:
    return html.escape(str(x))


def _words(text: str) -> str:
    """Escaped text with `column` names set as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _esc(text))


def _icon(ok: bool) -> str:
    return ICON_PASSED if ok else ICON_FAILED


def _page(title: str, header: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head>'
        f"<body><header>{header}</header><main>{body}</main></body></html>"
    )


def page_name(suite: str) -> str:
    return f"{PAGES}/{re.sub(r'[^A-Za-z0-9_.-]', '_', suite)}.html"


def _cards(items: list[tuple[str, str]]) -> str:
    return '<div class="summary">' + "".join(f"<div class=card><b>{v}</b><span>{_esc(k)}</span></div>" for k, v in items) + "</div>"


def render_index(validations: list[SuiteValidation]) -> str:
    total = sum(len(v.expectations) for v in validations)
    failed = sum(v.failed for v in validations)
    ok = failed == 0
    rows = []
    for v in validations:
        rows.append(
            f'<tr class="{"" if v.success else "failed"}"><td><span class=status>{_icon(v.success)}'
            f'{"passed" if v.success else "failed"}</span></td>'
            f'<td><a href="{page_name(v.suite)}">{_esc(v.suite)}</a></td><td class=n>{v.rows:,}</td>'
            f"<td class=n>{v.sample_rows:,}</td><td class=n>{len(v.expectations)}</td>"
            f"<td class=n>{len(v.expectations) - v.failed}</td><td class=n>{v.failed}</td></tr>"
        )
    failures = [
        f'<li><a href="{page_name(v.suite)}#{_esc(e.rule)}">{_esc(e.rule)}</a>: {_words(e.meaning)} — '
        f'{e.unexpected_count:,} {"row fails" if e.unexpected_count == 1 else "rows fail"}'
        f"{' (e.g. ' + _esc(', '.join(e.failing_rows[:5])) + ')' if e.failing_rows else ''}</li>"
        for v in validations for e in v.expectations if not e.success
    ]
    gx_version = validations[0].gx_version if validations else ""
    body = (
        _cards([("validations", str(len(validations))), ("expectations", str(total)), ("passed", str(total - failed)),
                ("failed", str(failed))])
        + f'<p class=meta>Each validation is one expectation suite run against its table (a view of the released table '
        f"plus the helper columns the gate computes across tables). Every rule is decided over all rows; Great "
        f"Expectations {_esc(gx_version)} validates every row too, in batches (row rules over slices, their unexpected "
        f"counts added up; uniqueness over the key columns, equal keys in one batch), and must reach the same "
        f"verdict.</p>"
        + "<h2>Validations</h2><table><tr><th>status</th><th>suite</th><th>rows checked</th><th>rows GX validated</th>"
        "<th>expectations</th><th>passed</th><th>failed</th></tr>" + "".join(rows) + "</table>"
        + (("<h2>Failed expectations</h2><ul>" + "".join(failures) + "</ul>") if failures else "")
    )
    header = f"<h1><span class=status>{_icon(ok)} scan2qa release gate: {'all expectations passed' if ok else f'{failed} of {total} expectations failed'}</span></h1>"
    return _page("scan2qa Data Docs", header, body)


def _kwargs_text(kwargs: dict) -> str:
    parts = []
    for key in sorted(kwargs):
        value = json.dumps(kwargs[key], default=str)
        parts.append(f"{key}={value if len(value) <= 300 else value[:300] + '…'}")
    return ", ".join(parts)


def _helper_note(kwargs: dict) -> str:
    column = kwargs.get("column")
    if column in COLUMN_MEANINGS:
        return f'<div class=helper>helper column <code>{_esc(column)}</code>: {_esc(COLUMN_MEANINGS[column])}</div>'
    return ""


def _gx_cell(e: ExpectationOutcome, sample_rows: int) -> str:
    if e.gx_success is None:
        return f'<span class=bad>raised</span> <span class=meta>{_esc(e.gx_error)}</span>'
    verdict = '<span class=ok>pass</span>' if e.gx_success else '<span class=bad>fail</span>'
    detail = ""
    if e.gx_unexpected_count is not None:
        detail = f" · {e.gx_unexpected_count:,} unexpected of {sample_rows:,} rows"
    elif e.gx_observed:
        detail = f" · observed <code>{_esc(e.gx_observed)}</code>"
    return verdict + f"<span class=meta>{detail}</span>"


def render_validation(v: SuiteValidation) -> str:
    rows = []
    for e in v.expectations:
        whole = (
            f"<span class=ok>0 failing</span> of {v.rows:,} rows" if e.success
            else f"<span class=bad>{e.unexpected_count:,} failing</span> of {v.rows:,} rows"
            + (f"<div class=meta>first: {_esc(', '.join(e.failing_rows[:10]))}</div>" if e.failing_rows else "")
        )
        rows.append(
            f'<tr class="{"" if e.success else "failed"}" id="{_esc(e.rule)}">'
            f'<td><span class=status>{_icon(e.success)}{"passed" if e.success else "failed"}</span></td>'
            f"<td><div class=meaning>{_words(e.meaning)}</div><div class=rule>{_esc(e.rule)}</div>{_helper_note(e.kwargs)}</td>"
            f"<td>{_esc(e.guards)}</td>"
            f"<td><code>{_esc(e.expectation_type)}</code><div class=rule>{_esc(_kwargs_text(e.kwargs))}</div></td>"
            f"<td>{whole}</td><td>{_gx_cell(e, v.sample_rows)}</td></tr>"
        )
    body = (
        f'<p><a href="../{INDEX}">← all validations</a></p>'
        + _cards([("rows checked", f"{v.rows:,}"), ("rows GX validated", f"{v.sample_rows:,}"),
                  ("expectations", str(len(v.expectations))), ("failed", str(v.failed))])
        + "<table><tr><th>status</th><th>what must hold</th><th>a failure means</th><th>Great Expectations rule</th>"
        "<th>all rows (polars)</th><th>Great Expectations on its rows</th></tr>" + "".join(rows) + "</table>"
    )
    header = (
        f'<h1><span class=status>{_icon(v.success)} validation of {_esc(v.suite)}: '
        f'{"passed" if v.success else f"{v.failed} failed"}</span></h1>'
    )
    return _page(f"{v.suite} · scan2qa Data Docs", header, body)


def write_site(folder: str | Path, validations: list[SuiteValidation]) -> Path:
    """Write ``index.html`` and one page per validation into ``folder``; returns the index path."""
    folder = Path(folder)
    (folder / PAGES).mkdir(parents=True, exist_ok=True)
    for v in validations:
        (folder / page_name(v.suite)).write_text(render_validation(v), encoding="utf-8")
    index = folder / INDEX
    index.write_text(render_index(validations), encoding="utf-8")
    return index
