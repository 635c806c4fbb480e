"""The Celery path: the same asset jobs with their steps executed by ``dagster-celery`` workers.

``scan_job_celery`` and ``dataset_job_celery`` select exactly what
``scan_job`` and ``dataset_job`` select; only the executor differs, so the UI,
the CLI and the sensors pick a path by job name. Steps are sent to the broker
named by ``SCAN2QA_CELERY_BROKER`` (a Redis URL) and picked up by workers
started with ``celery -A runs.celery_worker worker`` on any machine that has
the package and the same ``SCAN2QA_*`` / ``DAGSTER_*`` environment.

Why the Celery settings are what they are: a step is acknowledged only after it
ran (``task_acks_late``) and handed back to the queue when its worker process
dies (``task_reject_on_worker_lost``), so a killed worker's step runs again on
another worker instead of failing the run. A worker killed with its whole
process group (or its machine) neither acknowledges nor rejects: every worker
hands such a step back to the queue a minute or two later
(``assets.celery_orphans``), and Redis itself gives it out again once
``SCAN2QA_CELERY_VISIBILITY_TIMEOUT`` seconds (default 30 minutes: above the
longest step, so a step still running is never given to a second worker) have
passed since it was taken. A step that lost a service (Postgres, Redis, the
object store) is retried by Dagster with backoff (``assets.infrastructure_errors``),
so the executor's retries are on; a scan's own error is never retried.
Steps are idempotent:
every table and video is written to a temporary name and renamed, and the same
inputs give the same bytes, so a step run twice leaves what it would once.
Each worker process takes one step at a time (prefetch 1), so a long ray cast
never holds a queued step hostage. A step's Celery result is read once, by the
run worker polling for it within seconds of the step's end (the step's Dagster
events are in Postgres already), and a run whose worker died is retried as a new
run that never reads the old results; so Redis keeps each result
``SCAN2QA_CELERY_RESULT_EXPIRES`` seconds (default one hour) instead of days.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import dagster as dg
from dagster_celery import celery_executor
from dagster_celery.config import DEFAULT_CONFIG

from assets.jobs import DATASET_JOB, SCAN_JOB, build_jobs

CELERY_SUFFIX = "_celery"
SCAN_JOB_CELERY = SCAN_JOB + CELERY_SUFFIX
DATASET_JOB_CELERY = DATASET_JOB + CELERY_SUFFIX
BROKER_VARIABLE = "SCAN2QA_CELERY_BROKER"
BACKEND_VARIABLE = "SCAN2QA_CELERY_BACKEND"
VISIBILITY_TIMEOUT_VARIABLE = "SCAN2QA_CELERY_VISIBILITY_TIMEOUT"
RESULT_EXPIRES_VARIABLE = "SCAN2QA_CELERY_RESULT_EXPIRES"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
DEFAULT_VISIBILITY_TIMEOUT = 1800
DEFAULT_RESULT_EXPIRES = 3600


def broker_url() -> str:
    return os.environ.get(BROKER_VARIABLE, "").strip() or DEFAULT_BROKER


def backend_url() -> str:
    """Results go to the broker's Redis unless told otherwise (``rpc://`` needs an AMQP broker)."""
    return os.environ.get(BACKEND_VARIABLE, "").strip() or broker_url()


def _seconds(variable: str, default: int) -> int:
    value = os.environ.get(variable, "").strip()
    try:
        seconds = int(value) if value else default
    except ValueError:
        raise ValueError(f"{variable}={value!r}: expected whole seconds") from None
    if seconds < 1:
        raise ValueError(f"{variable}={value!r}: expected at least 1 second")
    return seconds


def visibility_timeout() -> int:
    return _seconds(VISIBILITY_TIMEOUT_VARIABLE, DEFAULT_VISIBILITY_TIMEOUT)


def result_expires() -> int:
    return _seconds(RESULT_EXPIRES_VARIABLE, DEFAULT_RESULT_EXPIRES)


def celery_settings() -> dict:
    """Settings shared by the executor (which sends steps) and the workers (which take them)."""
    return {
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {
            **DEFAULT_CONFIG["broker_transport_options"],
            "visibility_timeout": visibility_timeout(),
        },
        "result_expires": result_expires(),
    }


def scan2qa_celery_executor() -> dg.ExecutorDefinition:
    """The dagster-celery executor with broker and backend from the environment (read when a run starts)."""
    return celery_executor.configured(
        {
            "broker": {"env": BROKER_VARIABLE},
            "backend": {"env": BACKEND_VARIABLE},
            "config_source": celery_settings(),
            # Step retries: a step that lost a service asks for one (dg.RetryRequested with backoff); a scan's own
            # error never does (assets.infrastructure_errors). A worker that dies is Celery's to redeliver.
            "retries": {"enabled": {}},
        },
        name="scan2qa_celery",
    )


def celery_environment_defaults() -> None:
    """``{"env": ...}`` config needs the variables set: default both to the local Redis when unset."""
    os.environ.setdefault(BROKER_VARIABLE, broker_url())
    os.environ.setdefault(BACKEND_VARIABLE, backend_url())


def build_celery_jobs(assets: Sequence[object]) -> list[dg.UnresolvedAssetJobDefinition]:
    celery_environment_defaults()
    return build_jobs(assets, CELERY_SUFFIX, scan2qa_celery_executor(), ", each step run by a Celery worker")
