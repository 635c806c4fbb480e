"""Several scans in one run: per-scan steps over a partition range, and what a failing scan does to it.

A backfill of 10,000 scans at one scan per run is 10,000 runs, and Dagster's
backfill daemon creates runs at tens a minute (docs/scaling.md, "At 10,000 scans"). With
``SCAN2QA_SCANS_PER_RUN`` above 1, every per-scan asset carries
``BackfillPolicy.multi_run`` of that size, so an asset backfill (the UI's
"Materialize" on the per-scan assets, ``instance.add_backfill``) makes one run
per range of that many scans. Runs of one scan (sensors, ``scan2qa build``,
a partition rerun) are unchanged.

In a run over a range each step does its scans one after another
(``each_scan``), with the code a one-scan run uses; the step's output holds one
table per scan (``ScanTables``) and the Parquet IO manager writes each to its
partition's file, the same bytes a one-scan run writes. Check results are
recorded per partition (``record_check_results``): Dagster 1.13 keeps one
result per check per step, so the step logs each scan's evaluation itself and
returns the range's verdict as the step's result.

A run of one scan whose step meets a bad scan fails with that scan's one line as the failure's description
(``assets.run_errors.scan_failure``). A scan of a range that fails (a ``ScanError`` naming its file, or a failed blocking check)
fails the step after every scan of the range has been tried, with one line per
failed scan (``BatchFailure``): Dagster records every partition of the run as
failed, the membership names the scan that broke with its own line and the
others as "not built: another scan of its run failed", and the
``rerun_batch_survivors`` sensor (``assets.batch_rerun``) reruns those others.
A scan is never released from a run that failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import dagster as dg
import polars as pl

from assets.infrastructure_errors import infrastructure_cause, step_retry
from assets.run_errors import scan_failure
from pipeline.table_scan import ScanTables  # noqa: F401 - a step over a range returns one

SCANS_PER_RUN_ENV = "SCAN2QA_SCANS_PER_RUN"
T = TypeVar("T")


def scans_per_run() -> int:
    """Scans per backfill run, read when the code location loads (a bad value is a one-line error there)."""
    text = os.environ.get(SCANS_PER_RUN_ENV, "1").strip() or "1"
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{SCANS_PER_RUN_ENV}={text!r}: expected a whole number of scans per run") from None
    if count < 1:
        raise ValueError(f"{SCANS_PER_RUN_ENV}={count}: expected at least 1 scan per run")
    return count


def scan_backfill_policy() -> dg.BackfillPolicy | None:
    """None at one scan per run: Dagster's default, a run per partition tagged with its key."""
    count = scans_per_run()
    return dg.BackfillPolicy.multi_run(max_partitions_per_run=count) if count > 1 else None


# What a per-scan table asset returns: its scan's polars DataFrame, or ``ScanTables`` over a range. Dagster takes no
# union as an output type, so the annotation says ``Any`` to it and this name to a reader.
PerScanTable = Any


class BatchFailure(dg.Failure):
    """Scans of a range that failed in one step; the first line counts them, then one line per scan."""

    def __init__(self, step: str, failures: Mapping[str, str], scans: int):
        lines = [f"{step}: {len(failures)} of {scans} scans of this run failed; the run built none of them"]
        lines += [f"{key}: {problem}" for key, problem in sorted(failures.items())]
        # Never retried: each scan's problem is its own (a lost connection is raised as such by ``each_scan``).
        super().__init__(description="\n".join(lines), metadata={"failed scans": dg.MetadataValue.json(dict(failures))},
                         allow_retries=False)


def in_range(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> bool:
    """The run covers a range of partitions (a multi-run backfill) rather than one partition."""
    return not context.has_partition_key


def failure_line(key: str, exc: BaseException) -> str:
    from pipeline.errors import ScanError

    if isinstance(exc, ScanError):
        text = str(exc)
        return text[len(key) + 2:] if text.startswith(f"{key}: ") else text
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def each_scan(context: dg.AssetExecutionContext, step: str, build: Callable[[str], T]) -> dict[str, T]:
    """``build(key)`` for every scan of the run, in key order.

    Every scan is tried, so the failure names all the scans of the range that fail at this step, not the first.
    """
    results: dict[str, T] = {}
    failures: dict[str, str] = {}
    keys = sorted(context.partition_keys)
    for key in keys:
        try:
            results[key] = build(key)
        except Exception as exc:  # noqa: BLE001 - reported per scan in BatchFailure
            if infrastructure_cause(exc) is not None:
                raise step_retry(exc) from exc  # a service blinked: the step is retried, not the scan blamed
            context.log.error(f"{key}: {failure_line(key, exc)}")
            failures[key] = failure_line(key, exc)
    if failures:
        raise BatchFailure(step, failures, len(keys))
    return results


def record_check_results(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    step: str,
    per_scan: Mapping[str, Iterable[dg.AssetCheckResult]],
) -> list[dg.AssetCheckResult]:
    """Log each scan's check results as that partition's evaluations; return one result per check for the step.

    A failed blocking check on any scan fails the step (``BatchFailure``): Dagster would otherwise block the
    steps after it for every scan of the range while recording the others' checks as passed.
    """
    log_event = context.log_event if hasattr(context, "log_event") else context.op_execution_context.log_event
    verdicts: dict[tuple[str, str], list[dg.AssetCheckResult]] = {}
    failures: dict[str, str] = {}
    for key, results in sorted(per_scan.items()):
        for result in results:
            asset_key = dg.AssetKey.from_coercible(result.asset_key)
            log_event(
                dg.AssetCheckEvaluation(
                    asset_key=asset_key,
                    check_name=result.check_name,
                    passed=result.passed,
                    metadata=result.metadata,
                    severity=result.severity,
                    description=result.description,
                    blocking=True,
                    partition=key,
                )
            )
            verdicts.setdefault((asset_key.to_user_string(), result.check_name), []).append(result)
            if not result.passed:
                failures.setdefault(key, f"expectations failed: {asset_key.to_user_string()} "
                                         f"({result.description or result.check_name})")
    if failures:
        raise BatchFailure(step, failures, len(per_scan))
    return [
        dg.AssetCheckResult(
            asset_key=asset, check_name=name, passed=True, severity=dg.AssetCheckSeverity.ERROR,
            metadata={"scans": len(results), "decided": "per scan: each partition's own evaluation"},
        )
        for (asset, name), results in sorted(verdicts.items())
    ]


def only_scan(table: pl.DataFrame, key: str) -> pl.DataFrame:
    return table.filter(pl.col("key") == key) if "key" in table.columns else table


def per_scan(
    context: dg.AssetExecutionContext, step: str, build: Callable[..., T], **tables: pl.DataFrame
) -> T | ScanTables:
    """``build(key, **tables)`` for the run's scan, or a ``ScanTables`` of it for every scan of the run's range,
    each given only its own rows of ``tables`` (a range's inputs hold every scan of the range)."""
    if not in_range(context):
        with scan_failure():
            return build(context.partition_key, **tables)
    return ScanTables(each_scan(
        context, step, lambda key: build(key, **{name: only_scan(table, key) for name, table in tables.items()})
    ))
