"""A step that failed because a service blinked, told from a step that failed because its scan is bad.

A lost connection to Postgres (the instance), Redis (the broker) or the object
store says nothing about the scan: the same step a minute later succeeds. So
such a step is retried, with exponential backoff and jitter, within a bounded
budget (``step_retry``, raised by ``assets.run_errors.scan_failure`` and
``assets.scan_batches.each_scan``, which wrap the scan's work); when that runs
out, or a service was lost outside that work (an IO manager's read), the step
fails and, being an infrastructure failure, marks its run for the daemon's run
retries (``retry_run_after_infrastructure_failure``, a hook on every job in
``assets.jobs``). A scan's own error (``ScanError``: a truncated mesh) fails the
same way every time: it is a ``dg.Failure(allow_retries=False)`` and is named,
never retried; so is any other step error (a blocked release, a full disk).

Exceptions are recognised by class name anywhere in their chain (``__cause__``,
``__context__``), as ``pipeline.errors.UNREACHABLE`` does for the object store,
so psycopg2, SQLAlchemy, redis and botocore need not be imported here.
"""

from __future__ import annotations

import random

import dagster as dg

from pipeline.errors import UNREACHABLE

INFRASTRUCTURE = frozenset({
    # Postgres: psycopg2 and SQLAlchemy name a broken or refused connection so; dagster-postgres gives up with the
    # last one after its own few quick tries.
    "OperationalError", "InterfaceError", "DagsterPostgresException",
    # Redis (redis-py, kombu) and the OS: refused, reset, timed out.
    "ConnectionError", "TimeoutError", "BusyLoadingError", "BrokenPipeError",
    # The object store (pipeline.errors wraps botocore's and aiohttp's as StorageUnreachable).
    "StorageUnreachable", *(UNREACHABLE - {"NoCredentialsError"}),
    # A code server that did not answer (a daemon restarting).
    "DagsterUserCodeUnreachableError",
})

# Four tries after the first, waiting 5, 15, 35 and 75 s (Dagster's exponential backoff, +/- 5 s jitter): a service
# may be gone about two minutes before the step fails; the run retries (deploy/dagster.yaml) then cover longer outages.
STEP_MAX_RETRIES = 4
STEP_RETRY_DELAY_S = 5
RETRY_ON_ASSET_OR_OP_FAILURE_TAG = "dagster/retry_on_asset_or_op_failure"  # spelled out: Dagster exports no constant
# dagster-postgres opens a connection for every call and retries a refused one only 5 times in about 11 s, with no
# setting to change it, so a 15 s restart of Postgres breaks whatever Dagster process was writing. Seven tries wait
# 0.2 s doubling, about 50 s in all: the daemon, run workers and Celery workers ride out a database restart.
POSTGRES_CONNECT_RETRIES = 7
POSTGRES_CONNECT_BASE_DELAY_S = 0.2


def infrastructure_cause(exc: BaseException | None) -> BaseException | None:
    """The exception in ``exc``'s chain that says a service did not answer, if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if any(cls.__name__ in INFRASTRUCTURE for cls in type(exc).__mro__):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def patient_postgres_connections() -> None:
    """Raise dagster-postgres's connection retries to ``POSTGRES_CONNECT_RETRIES`` in this process (called where the
    deployment's processes load: the ``assets`` package, the instance's run launcher module)."""
    try:
        from dagster_postgres import utils
    except ImportError:  # an instance without Postgres (a local build): nothing to make patient
        return
    utils.retry_pg_connection_fn.__defaults__ = (POSTGRES_CONNECT_RETRIES, POSTGRES_CONNECT_BASE_DELAY_S)


def step_retry(exc: BaseException) -> dg.RetryRequested:
    """Dagster's request to run the current step again after a backoff (``STEP_MAX_RETRIES`` at most); raise it
    ``from`` the exception that lost the service. Once they are spent the step fails, naming that exception."""
    attempt = dg.OpExecutionContext.get().retry_number + 1
    # Exponential backoff with a +-50% jitter, so the steps a restart failed together do not all come back at once.
    wait = STEP_RETRY_DELAY_S * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
    return dg.RetryRequested(max_retries=STEP_MAX_RETRIES, seconds_to_wait=wait)


@dg.failure_hook(name="retry_run_after_infrastructure_failure")
def retry_run_after_infrastructure_failure(context: dg.HookContext) -> None:
    """A step that failed for an infrastructure reason (its step retries spent) lets the daemon retry the run:
    the instance's ``retry_on_asset_or_op_failure`` stays false, so a run failed by its scan's own error is not."""
    exc = context.op_exception
    if isinstance(exc, dg.Failure) and not exc.allow_retries:
        return  # a scan's own error, whatever it was raised while handling
    cause = infrastructure_cause(exc)
    if cause is None:
        return
    context.log.warning(f"{context.step_key}: failed for an infrastructure reason ({type(cause).__name__}: "
                        f"{str(cause).strip().splitlines()[0] if str(cause).strip() else ''}); the run will be retried")
    context.instance.add_run_tags(context.run_id, {RETRY_ON_ASSET_OR_OP_FAILURE_TAG: "true"})
