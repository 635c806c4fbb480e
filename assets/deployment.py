"""Choices a deployment makes through its environment, read when the code location loads.

- ``SCAN2QA_EXECUTOR``: ``in_process`` (default) or ``celery`` — which jobs the
  sensors and the schedule request, and the code location's default executor:
  the one of every run of an asset selection no named job holds (a partition
  materialized from an asset's page, the ``dataset_automation`` sensor's
  dataset-wide runs). So a cluster's automatic rebuilds and UI reruns run on
  its Celery workers while a laptop's run in the run worker; ``scan_job`` and
  ``dataset_job`` stay in-process either way.
- ``SCAN2QA_AUTOMATION``: ``running`` (default) or ``stopped`` — whether the
  sensors and the schedule start with the daemon. A deployment driven by
  backfills (``scan2qa backfill``, ``make cluster-demo``) starts them stopped;
  they can be turned on from the UI at any time.
- ``SCAN2QA_SENSOR_INTERVAL``: seconds between ``scan_discovery`` evaluations
  (default 120; a test or a small demo may shorten it).
"""

from __future__ import annotations

import os

import dagster as dg

from assets.celery import DATASET_JOB_CELERY, SCAN_JOB_CELERY, celery_environment_defaults, scan2qa_celery_executor
from assets.env_values import env_seconds
from assets.jobs import DATASET_JOB, SCAN_JOB

EXECUTOR_VARIABLE = "SCAN2QA_EXECUTOR"
AUTOMATION_VARIABLE = "SCAN2QA_AUTOMATION"
INTERVAL_VARIABLE = "SCAN2QA_SENSOR_INTERVAL"


def _choice(variable: str, allowed: tuple[str, ...]) -> str:
    value = os.environ.get(variable, "").strip() or allowed[0]
    if value not in allowed:
        raise ValueError(f"{variable}={value!r}: expected one of {', '.join(allowed)}")
    return value


def requested_executor() -> str:
    return _choice(EXECUTOR_VARIABLE, ("in_process", "celery"))


def sensor_scan_job() -> str:
    return SCAN_JOB_CELERY if requested_executor() == "celery" else SCAN_JOB


def sensor_dataset_job() -> str:
    return DATASET_JOB_CELERY if requested_executor() == "celery" else DATASET_JOB


def default_executor() -> dg.ExecutorDefinition:
    """The executor of runs no named job holds (``Definitions(executor=...)``: the implicit asset job)."""
    if requested_executor() != "celery":
        return dg.in_process_executor
    celery_environment_defaults()
    return scan2qa_celery_executor()


def sensor_interval(default: int) -> int:
    return env_seconds(INTERVAL_VARIABLE, default)


def automation_running() -> bool:
    return _choice(AUTOMATION_VARIABLE, ("running", "stopped")) == "running"


def sensor_status() -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if automation_running() else dg.DefaultSensorStatus.STOPPED


def schedule_status() -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if automation_running() else dg.DefaultScheduleStatus.STOPPED
