"""Run the suites with Great Expectations and say which rule failed on which rows.

An ephemeral GX context (nothing persisted but the Data Docs site) validates
each view through a Checkpoint whose UpdateDataDocsAction renders the
reviewer-facing Data Docs. Great Expectations is imported here, lazily, only
when a gate actually runs.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

import polars as pl

from expectations.derived import build_views
from expectations.suites import Suite, build_suites

MAX_LISTED_ROWS = 20


@dataclass
class RuleResult:
    name: str
    table: str
    success: bool
    unexpected_count: int
    failing_rows: list[str]  # ids (or keys) of the first failing rows
    guards: str


@dataclass
class GateReport:
    success: bool
    results: list[RuleResult] = field(default_factory=list)
    data_docs: str | None = None

    @property
    def failures(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success]

    def for_table(self, table: str) -> list[RuleResult]:
        return [r for r in self.results if r.table == table]

    def summary(self) -> str:
        if self.success:
            return f"all {len(self.results)} expectations passed"
        lines = [f"{len(self.failures)} of {len(self.results)} expectations failed:"]
        for r in self.failures:
            rows = ", ".join(r.failing_rows[:5]) + (" ..." if len(r.failing_rows) > 5 else "")
            lines.append(f"  {r.name} ({r.guards}): {r.unexpected_count} rows [{rows}]")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"success": self.success, "data_docs": self.data_docs, "results": [asdict(r) for r in self.results]}


def _context(docs_dir: str | None):
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    if docs_dir:
        ctx.add_data_docs_site(
            site_name="scan2qa",
            site_config={
                "class_name": "SiteBuilder",
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs_dir},
            },
        )
    return ctx


def _to_pandas(df: pl.DataFrame):
    # Lists are plain Python objects for GX; the view's scalar columns keep their types.
    return df.to_pandas(use_pyarrow_extension_array=False)


def _failing_rows(df: pl.DataFrame, id_column: str | None, result: dict) -> list[str]:
    index = result.get("unexpected_index_list") or result.get("partial_unexpected_index_list") or []
    rows: list[str] = []
    for item in index[:MAX_LISTED_ROWS]:
        position = item if isinstance(item, int) else None
        if isinstance(item, dict):
            position = item.get("index")
        if position is not None and id_column and 0 <= position < df.height:
            rows.append(str(df[id_column][position]))
        else:
            rows.append(str(item))
    return rows


def run_gate(
    tables: dict[str, pl.DataFrame],
    *,
    docs_dir: str | None = None,
    frequency_ceiling: float = 0.7,
    letter_tolerance: float = 0.05,
    min_questions_for_distribution: int = 40,
) -> GateReport:
    """Validate every released table present in ``tables``; build Data Docs into ``docs_dir``."""
    views = build_views(tables, min_questions_for_distribution=min_questions_for_distribution)
    suites = [s for s in build_suites(frequency_ceiling, letter_tolerance) if s.table in views]
    ctx = _context(docs_dir)
    import great_expectations as gx

    source = ctx.data_sources.add_pandas("scan2qa")
    report = GateReport(success=True)
    for suite in suites:
        report.results.extend(_run_suite(gx, ctx, source, suite, views[suite.table], docs_dir is not None))
    report.success = all(r.success for r in report.results)
    if docs_dir:
        report.data_docs = os.path.join(docs_dir, "index.html")
    return report


def _run_suite(gx, ctx, source, suite: Suite, view: pl.DataFrame, with_docs: bool) -> list[RuleResult]:
    asset = source.add_dataframe_asset(name=suite.table)
    batch = asset.add_batch_definition_whole_dataframe(f"{suite.table}_whole")
    gx_suite = ctx.suites.add(gx.ExpectationSuite(name=suite.table))
    for rule in suite.rules:
        expectation = getattr(gx.expectations, rule.expectation)(**rule.kwargs, meta={"rule": rule.name, "guards": rule.guards})
        gx_suite.add_expectation(expectation)
    definition = ctx.validation_definitions.add(
        gx.ValidationDefinition(data=batch, suite=gx_suite, name=f"{suite.table}_validation")
    )
    actions = [gx.checkpoint.UpdateDataDocsAction(name="data_docs")] if with_docs else []
    checkpoint = ctx.checkpoints.add(
        gx.Checkpoint(
            name=f"{suite.table}_gate",
            validation_definitions=[definition],
            actions=actions,
            result_format={"result_format": "COMPLETE"},
        )
    )
    outcome = checkpoint.run(batch_parameters={"dataframe": _to_pandas(view)})
    rules = {rule.name: rule for rule in suite.rules}
    results: list[RuleResult] = []
    for validation in outcome.run_results.values():
        for er in validation.results:
            rule = rules[er.expectation_config.meta["rule"]]
            res = er.result or {}
            count = int(res.get("unexpected_count") or 0)
            if not er.success and count == 0 and "observed_value" in res:
                count = 1
            results.append(
                RuleResult(
                    name=rule.name,
                    table=suite.table,
                    success=bool(er.success),
                    unexpected_count=count if not er.success else 0,
                    failing_rows=[] if er.success else _failing_rows(view, suite.id_column, res),
                    guards=rule.guards,
                )
            )
    return results
