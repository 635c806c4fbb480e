"""Run the suites and say which rule failed on which rows; Great Expectations validates every row.

Every rule is decided by ``expectations.checks`` in polars over the whole
view, with Great Expectations' semantics (nulls and NaN ignored by column
rules, every member of a duplicated group failing a uniqueness rule); that
decision names the failing rows and is what an asset check reads without
importing GX. The gate then has Great Expectations validate *every row* of
each released view, batch by batch (``gx_batches``): row rules over slices
of at most ``GX_BATCH_ROWS`` rows, their unexpected counts summed; a
uniqueness rule over the key columns alone, hash-partitioned so that equal
keys always share a batch (a duplicate is never split across two). GX's
verdict per rule must equal the polars one (a disagreement is an error, never
a silent pass), and the Data Docs' "rows GX validated" equals the table's row
count. Batches keep GX's pandas conversion bounded: at 10,000 scans the qa
view is millions of rows with list columns, which one pandas frame would hold
as Python objects all at once. GX is imported without the parts it never
runs (``expectations.gx_import``). The validation results are kept on the
report (``GateReport.validations``) and rendered once by
``expectations.data_docs`` into offline pages; GX's own site builder (CDN
scripts, a temporary folder) is not used. Great Expectations is imported
here, lazily, only when a gate actually runs.

One gate per release: ``run_gate`` (Great Expectations, Data Docs) runs once,
in the ``release`` step, over exactly the tables it releases. The Dagster
asset checks attached to each table's asset (``assets.table_checks``) call
``decide_suites`` instead: the same rules decided in polars over that table
(one scan's partition, or the dataset-wide ``qa``), so a broken table stops
its own partition early without importing Great Expectations at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import polars as pl

from expectations.checks import Decided, RuleCheck, SlicedView, decide
from expectations.data_docs import SuiteValidation, outcome_from_gx, write_site
from expectations.derived import build_views
from expectations.gc_freeze import older_objects_frozen
from expectations.gx_import import import_great_expectations
from expectations.suites import Rule, Suite, build_suites

# What GX reports per expectation. The Data Docs show GX's verdict, its unexpected count and, for table-level
# rules, its observed value (``data_docs.outcome_from_gx``); BASIC gives all three. COMPLETE made GX compute
# two more metrics per column rule (the full unexpected index list and its pandas query) that nothing reads:
# the failing rows a report names are decided over the whole view in polars (``checks.failing_ids``).
RESULT_FORMAT = "BASIC"


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
    validations: list[SuiteValidation] = field(default_factory=list, repr=False)  # for Data Docs, not serialised

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


def _rule_results(suite: Suite, decided: Decided) -> list[RuleResult]:
    checks = decided.checks
    return [
        RuleResult(
            name=rule.name,
            table=suite.table,
            success=checks[rule.name].success,
            unexpected_count=0 if checks[rule.name].success else checks[rule.name].unexpected_count,
            failing_rows=[] if checks[rule.name].success else decided.failing_ids(checks[rule.name].positions),
            guards=rule.guards,
        )
        for rule in suite.rules
    ]


def decide_suites(
    tables: dict[str, pl.DataFrame],
    suite_tables: list[str] | tuple[str, ...],
    *,
    frequency_ceiling: float = 0.7,
    letter_tolerance: float = 0.05,
    min_questions_for_distribution: int = 40,
    extra_suites: tuple[Suite, ...] = (),
    budgets: tuple[str, ...],
) -> GateReport:
    """The rules of the suites named in ``suite_tables``, decided in polars over views of ``tables``; no GX.

    ``budgets`` are the known frame budgets (the run's ``pipeline.frames.budgets.frame_budgets(config)``); a sampled benchmark's
    tables carry its sampler's label (``pipeline.sampling``).

    ``tables`` holds the suite's table and the tables its cross-table columns need (``expectations.derived``);
    a suite whose view cannot be built from them is left out.
    """
    views = build_views(tables, min_questions_for_distribution=min_questions_for_distribution)
    report = GateReport(success=True)
    for suite in [*build_suites(frequency_ceiling, letter_tolerance, budgets=budgets), *extra_suites]:
        if suite.table not in views and suite.table in tables and suite in extra_suites:
            views[suite.table] = tables[suite.table]  # a table checked per scan but not released: no derived columns
        if suite.table in suite_tables and suite.table in views:
            report.results.extend(_rule_results(suite, decide(views[suite.table], suite.rules, suite.id_column)))
    report.success = all(r.success for r in report.results)
    return report


def _context():
    gx = import_great_expectations()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    # No default Data Docs site: GX would give it a folder in the system temp directory.
    stores = InMemoryStoreBackendDefaults(init_temp_docs_sites=False)
    ctx = gx.get_context(mode="ephemeral", project_config=DataContextConfig(store_backend_defaults=stores))
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


def _to_pandas(df: pl.DataFrame):
    # Lists are plain Python objects for GX; the view's scalar columns keep their types.
    return df.to_pandas(use_pyarrow_extension_array=False)


def run_gate(
    tables: dict[str, pl.DataFrame],
    *,
    docs_dir: str | None = None,
    frequency_ceiling: float = 0.7,
    letter_tolerance: float = 0.05,
    min_questions_for_distribution: int = 40,
    budgets: tuple[str, ...],
) -> GateReport:
    """Validate every released table present in ``tables``; write Data Docs into ``docs_dir`` when given.

    Without ``docs_dir`` nothing is written anywhere: ``write_site(folder,
    report.validations)`` renders the same pages later (the release does, into
    its staging folder).
    """
    views = build_views(tables, min_questions_for_distribution=min_questions_for_distribution)
    suites = [s for s in build_suites(frequency_ceiling, letter_tolerance, budgets=budgets) if s.table in views]
    report = GateReport(success=True)
    with older_objects_frozen() as heap:  # GX's import and validation make many objects: collect only those
        ctx = _context()
        gx = import_great_expectations()
        heap.freeze_now()  # GX's modules stay: the validations' collections walk only their own objects
        # One dataframe asset for every view: each suite's batch carries its own view. An asset per table cost
        # an asset and a batch definition per suite, each re-serialising the context's datasource config.
        views_asset = ctx.data_sources.add_pandas("scan2qa").add_dataframe_asset(name="released_table_views")
        whole_view = views_asset.add_batch_definition_whole_dataframe("whole_view")
        for suite in suites:
            results, validation = _run_suite(gx, whole_view, suite, views[suite.table])
            report.results.extend(results)
            report.validations.append(validation)
    report.success = all(r.success for r in report.results)
    if docs_dir:
        report.data_docs = str(write_site(docs_dir, report.validations))
    return report


GX_BATCH_ROWS = 200_000  # rows of one GX batch: a slice of the view, or one hash partition of a uniqueness key


def _uniqueness(rule: Rule) -> bool:
    return "Unique" in rule.expectation


def _row_batches(view: pl.DataFrame | SlicedView) -> Iterator[pl.DataFrame]:
    """The whole view in row order, a bounded slice at a time (an empty view is one empty batch)."""
    if isinstance(view, SlicedView):
        pieces = view.slices()
    else:
        pieces = (view.slice(start, GX_BATCH_ROWS) for start in range(0, view.height, GX_BATCH_ROWS))
    empty = True
    for piece in pieces:
        empty = False
        yield piece
    if empty:
        yield view if isinstance(view, pl.DataFrame) else pl.DataFrame()


def _key_batches(view: pl.DataFrame | SlicedView, columns: list[str]) -> Iterator[pl.DataFrame]:
    """A uniqueness rule's key columns of every row, split by a hash of the key so equal keys share a batch."""
    if isinstance(view, SlicedView):
        keys = view.columns(columns)
    else:
        present = [c for c in columns if c in view.columns]
        keys = view.select(present)
    parts = max(1, math.ceil(keys.height / GX_BATCH_ROWS))
    if parts == 1 or not keys.width:
        yield keys
        return
    bucket = keys.select((pl.struct(keys.columns).hash(seed=0) % parts).alias("_part"))["_part"]
    for part in range(parts):
        yield keys.filter(bucket == part)


@dataclass
class _GXVerdict:
    """GX's results for one rule over every batch: the verdict and counts added up, the first result for the page."""

    first: object = None
    success: bool = True
    unexpected: int | None = None
    raised: bool = False
    rows: int = 0

    def add(self, result, rows: int) -> None:
        raised = bool(result.exception_info and result.exception_info.get("raised_exception"))
        if self.first is None or raised or (self.first.success and not result.success and not self.raised):
            self.first = result  # the page shows a failing (or raising) batch's result when there is one
        self.raised = self.raised or raised
        self.rows += rows
        self.success = self.success and bool(result.success)
        count = (result.result or {}).get("unexpected_count")
        if count is not None:
            self.unexpected = (self.unexpected or 0) + int(count)


def _validate(gx, whole_view, name: str, expectations: list, batches: Iterator[pl.DataFrame], verdicts: dict) -> None:
    """Validate ``expectations`` on each batch, adding GX's result per rule into ``verdicts``."""
    if not expectations:
        return
    for frame in batches:
        batch = whole_view.get_batch(batch_parameters={"dataframe": _to_pandas(frame)})
        # The suite is built whole and validated on the batch directly: adding expectations one by one to a suite
        # in the context's store re-serialised the whole suite each time, and a Checkpoint adds stores, freshness
        # checks and a run record around the same validator call. The results are the same objects.
        validation = batch.validate(gx.ExpectationSuite(name=name, expectations=expectations),
                                    result_format={"result_format": RESULT_FORMAT})
        for er in validation.results:
            verdicts.setdefault(er.expectation_config.meta["rule"], _GXVerdict()).add(er, frame.height)
        del batch, validation


def _gx_expectation(gx, rule: Rule, check: RuleCheck, rows: int):
    note = (
        f"Checked by polars on all {rows:,} rows: {check.unexpected_count:,} failing. Great Expectations "
        f"validated all {rows:,} rows too, in batches of at most {GX_BATCH_ROWS:,}"
        + (" (the key columns, equal keys in one batch)." if _uniqueness(rule) else ".")
    )
    meta = {"rule": rule.name, "guards": rule.guards, "notes": {"format": "markdown", "content": [note]}}
    return getattr(gx.expectations, rule.expectation)(**rule.kwargs, meta=meta, description=rule.meaning or None)


def _run_suite(gx, whole_view, suite: Suite, view: pl.DataFrame | SlicedView) -> tuple[list[RuleResult], SuiteValidation]:
    decided = decide(view, suite.rules, suite.id_column)
    checks, height = decided.checks, decided.height
    verdicts: dict[str, _GXVerdict] = {}
    row_rules = [r for r in suite.rules if not _uniqueness(r)]
    _validate(gx, whole_view, suite.table, [_gx_expectation(gx, r, checks[r.name], height) for r in row_rules],
              _row_batches(view), verdicts)
    for rule in (r for r in suite.rules if _uniqueness(r)):
        columns = list(rule.kwargs.get("column_list") or [rule.kwargs["column"]])
        _validate(gx, whole_view, suite.table, [_gx_expectation(gx, rule, checks[rule.name], height)],
                  _key_batches(view, columns), verdicts)
    results: list[RuleResult] = []
    validated = max((v.rows for v in verdicts.values()), default=0)
    page = SuiteValidation(suite.table, height, validated, gx.__version__)
    for rule in suite.rules:
        verdict = verdicts[rule.name]
        check = checks[rule.name]
        if verdict.raised:
            check = RuleCheck(False, 0, [])  # as when Great Expectations could not evaluate it on the whole view
        elif verdict.success != check.success:
            raise RuntimeError(
                f"{rule.name}: Great Expectations says {'pass' if verdict.success else 'fail'} on all {verdict.rows} "
                f"rows where polars over all {height} rows says {'pass' if check.success else 'fail'}"
            )
        results.append(
            RuleResult(
                name=rule.name,
                table=suite.table,
                success=check.success,
                unexpected_count=0 if check.success else check.unexpected_count,
                failing_rows=[] if check.success else decided.failing_ids(check.positions),
                guards=rule.guards,
            )
        )
        page.expectations.append(
            outcome_from_gx(
                rule, verdict.first, unexpected_count=results[-1].unexpected_count,
                failing_rows=results[-1].failing_rows, success=results[-1].success,
                gx_success=None if verdict.raised else verdict.success, gx_unexpected_count=verdict.unexpected,
            )
        )
    return results, page
