"""One line saying why a run failed, read from its events: the same words on every path.

``scan2qa build`` reads the events of the run it just executed; the release's
membership and ``scan2qa backfill`` read a run's events from the instance. All
of them print the innermost cause of the first failed step (a ``ScanError``
already reads "<scan>: <file>: <problem>"; anything else is prefixed with the
step that raised it), so a user sees the same line in the terminal, the
manifest and the reviewer report.

A per-scan step that meets a bad scan fails with ``scan_failure``: a
``dg.Failure`` whose description is that one line (and whose metadata names the
scan, file and problem), raised from the ``ScanError`` so the UI shows the line
first and the trace below it, and the readers here still find the ``ScanError``
as the innermost cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import dagster as dg


@contextmanager
def scan_failure() -> Iterator[None]:
    """Turn a ``ScanError`` raised inside into the step's ``dg.Failure`` (the UI reads a Failure's description first;
    any other exception is left as Dagster shows it), never retried: the same scan fails the same way. A lost
    connection (``assets.infrastructure_errors``) instead asks Dagster to run the step again after a backoff."""
    from assets.infrastructure_errors import infrastructure_cause, step_retry
    from pipeline.errors import ScanError

    try:
        yield
    except ScanError as exc:
        raise dg.Failure(
            description=str(exc),
            metadata={"scan": exc.key, "file": dg.MetadataValue.path(exc.file), "problem": exc.problem},
            allow_retries=False,
        ) from exc
    except Exception as exc:
        if infrastructure_cause(exc) is None:
            raise
        raise step_retry(exc) from exc


def step_failure_line(events: Iterable[dg.DagsterEvent], key: str | None = None) -> str | None:
    """``key``: the scan asked about, when the run covered a range of scans (``assets.scan_batches``): its own
    line if it is one of the scans that failed, else that another scan of its run failed and which."""
    for event in events:
        if event.is_step_failure and key is not None:
            failed_scans = _failed_scans(event)
            if failed_scans is not None:
                return scan_line(key, failed_scans, event.step_key)
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            message = error.message.strip().splitlines()[0] if error.message.strip() else error.cls_name
            qualified_name, separator, text = message.partition(": ")
            if separator and qualified_name.rsplit(".", 1)[-1] == error.cls_name:
                message = text if error.cls_name == "ScanError" else f"{error.cls_name}: {text}"
            return message if error.cls_name == "ScanError" else f"{event.step_key}: {message}"
    return None


def scan_line(key: str, failed_scans: dict[str, str], step: str | None = None) -> str:
    """Scan ``key``'s line from a run over a range that failed on ``failed_scans`` (scan -> problem): its own
    problem, or which scans of its run failed (in ``step``, when known)."""
    if key in failed_scans:
        return f"{key}: {failed_scans[key]}"
    named = "; ".join(f"{other}: {problem}" for other, problem in sorted(failed_scans.items())[:3])
    more = f" and {len(failed_scans) - 3} more" if len(failed_scans) > 3 else ""
    where = f" in {step}" if step else ""
    return f"not built: another scan of its run failed{where} ({named}{more}); rerun this scan"


def _failed_scans(event: dg.DagsterEvent) -> dict[str, str] | None:
    """Scan -> problem, from a step over a range of scans that failed on some of them (``BatchFailure``)."""
    data = event.step_failure_data.user_failure_data
    value = data.metadata.get("failed scans") if data is not None and data.metadata else None
    found = getattr(value, "value", value)
    return dict(found) if isinstance(found, dict) else None


def batch_failed_scans(instance: dg.DagsterInstance, run_id: str) -> dict[str, str] | None:
    """Scan -> problem for a stored run over a range of scans that failed on some of them; None for any other run
    (one scan, a success, a run that died for a reason outside its scans)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        found = _failed_scans(entry.dagster_event) if entry.dagster_event is not None else None
        if found is not None:
            return found
    return None


def stored_run_failure(instance: dg.DagsterInstance, run_id: str, key: str | None = None) -> str:
    """Why the stored run ``run_id`` failed (for scan ``key``, when it covered several): its first failed step,
    else the innermost cause of the run's own failure (a run worker lost, a run-time limit, the executor losing
    its broker)."""
    steps = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    line = step_failure_line((entry.dagster_event for entry in steps if entry.dagster_event is not None), key)
    if line:
        return line
    ended = instance.all_logs(run_id, of_type={dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED})
    for entry in reversed(ended):
        event = entry.dagster_event
        error = getattr(event.event_specific_data, "error", None) if event else None
        while error is not None and error.cause is not None:
            error = error.cause
        if error is not None and error.message.strip():
            return f"run failed: {error.message.strip().splitlines()[0]}"
        message = ((event.message if event else "") or entry.user_message or "").strip()
        if message:
            return message.splitlines()[0]
    return "run failed before any step ran (see its event log in the UI)"


def stored_failed_checks(instance: dg.DagsterInstance, run_id: str, key: str | None = None) -> list[str]:
    """``<asset> (<check description>)`` for every check that failed in the stored run ``run_id`` (on scan
    ``key``, when given: a run over several scans records each scan's evaluations under its partition)."""
    failed = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data if entry.dagster_event else None
        if key is not None and evaluation is not None and evaluation.partition not in (None, key):
            continue
        if evaluation is not None and not evaluation.passed:
            failed.append(f"{evaluation.asset_key.to_user_string()} ({evaluation.description or evaluation.check_name})")
    return sorted(set(failed))
