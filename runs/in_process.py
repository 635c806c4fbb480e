"""Runs of the asset graph in this process: what ``scan2qa build``, its worker processes and the benches share.

One run of a selection (``materialize_quietly``) recorded in the instance ``DAGSTER_HOME`` names, under the code
location's job when it is one (so the UI can re-execute it), with a one-line failure a user can act on instead of
Dagster's wrapper. ``runs.build`` drives the whole build and ``runs.scan_pool`` its worker processes; both import
this module and never each other in a loop.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import dagster as dg

from pipeline.interrupts import raise_if_interrupted

QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
BUILD_JOB = "__ephemeral_asset_job__"  # the name dagster.materialize gives its runs (selections no job holds)


def run_failure(result: dg.ExecuteInProcessResult) -> str:
    """One line: the innermost cause of the first failed step (a ``ScanError`` names scan and file)."""
    from assets.run_errors import step_failure_line

    return step_failure_line(result.all_events) or "run failed before any step ran"


def failure_detail(result: dg.ExecuteInProcessResult) -> list[str]:
    """The lines after the first of the innermost error (a blocked release lists its failing expectations)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            return [line for line in error.message.strip().splitlines()[1:] if line.strip()]
    return []


def failed_checks(result: dg.ExecuteInProcessResult) -> list[str]:
    """Per failed asset check of the run: ``<asset> <check>: <which expectations failed>``."""
    lines = []
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            failures = evaluation.metadata.get("failures")
            text = failures.value if failures is not None else evaluation.description or "failed"
            lines.append(f"{evaluation.asset_key.to_user_string()} {evaluation.check_name}:")
            lines += [f"    {line}" for line in str(text).splitlines() if line.strip()]
    return lines


def materialize_quietly(
    assets, selection, resources, instance, partition_key=None, tags=None, on_event=None, details=None,
    job_name: str = BUILD_JOB,
) -> tuple[bool, str]:
    """One run of ``selection`` in this process; ``on_event`` hears its events as they are stored.

    With ``job_name`` one of the code location's jobs (``scan_job``, ``dataset_job``, whose selection
    ``selection`` must be), the run is recorded as a run of that job with its origin in the code location, so
    the UI can re-execute it (``runs.run_origin``). Returns (success, one-line error); ``details``, a list,
    receives the failed checks' expectations.
    """
    from assets.jobs import DATASET_JOB, SCAN_JOB, SCAN_TAGS
    from assets.partitions import scan_partitions
    from runs.run_origin import runs_from_code_location

    run_id = str(uuid.uuid4())  # a run id is a UUID4 (what Dagster's own make_new_run_id returns)
    located = job_name in (SCAN_JOB, DATASET_JOB)
    try:
        job_tags = {"scan2qa/phase": "dataset"} if job_name == DATASET_JOB else SCAN_TAGS if job_name == SCAN_JOB else None
        partitions = scan_partitions if partition_key is not None else None
        defs = dg.Definitions(
            jobs=[dg.define_asset_job(job_name, selection=selection, partitions_def=partitions, tags=job_tags)],
            assets=assets, resources=resources,
        )
        job = defs.resolve_job_def(job_name)
        if on_event is not None:
            instance.add_event_listener(run_id, on_event)
        with runs_from_code_location(instance, job_name) if located else contextlib.nullcontext():
            result = job.execute_in_process(
                run_config=QUIET_RUN_CONFIG,
                instance=instance,
                partition_key=partition_key,
                raise_on_error=False,
                run_id=run_id,
                tags=tags,
            )
    except Exception as exc:  # a definition or resource error outside any step
        return False, f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        getattr(instance, "_subscribers", {}).pop(run_id, None)  # listeners are per run; drop this one's
    raise_if_interrupted()  # a signal during the run made it fail: that is the build stopping, not a bad scan
    if result.success:
        return True, ""
    # A WARN check (the release's all_registered_scans_released) never fails a run: not what made this one fail.
    failed = [e for e in result.get_asset_check_evaluations()
              if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if details is not None:
        details.extend(failed_checks(result) or failure_detail(result))
    if failed:  # a table broke its expectation suite: say which table and which rules, not Dagster's wrapper
        return False, "expectations failed: " + "; ".join(
            f"{e.asset_key.to_user_string()} ({e.description or e.check_name})" for e in failed
        )
    return False, run_failure(result)


def open_instance() -> dg.DagsterInstance:
    """The instance ``DAGSTER_HOME`` names; ``build`` sets one up for the whole build when none is set."""
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def register_partitions(instance: dg.DagsterInstance, keys: list[str]) -> None:
    """Register ``keys`` (the worker processes register the scans they build, which are not all the scans)."""
    from assets.partitions import scan_partitions

    existing = set(instance.get_dynamic_partitions(scan_partitions.name))
    missing = [key for key in keys if key not in existing]
    if missing:
        instance.add_dynamic_partitions(scan_partitions.name, missing)
