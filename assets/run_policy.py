"""Run tags that bound how long a run may hold a run-queue slot and how often it is retried.

The instance (``deploy/dagster.yaml``, the Helm values) turns on run monitoring
and run retries; these tags are the per-job limits they read. A run still
in progress after ``dagster/max_runtime`` seconds is hung or orphaned (its run
worker's machine lost with no health check to tell), so the monitoring daemon
fails it, which frees its slot, and run retries launch it again. The limit must
sit well above the longest honest run: a scan run is one scan's chain of steps
(minutes on a ScanNet scan), a dataset run reads every scan's tables.

- ``SCAN2QA_SCAN_RUN_MAX_SECONDS``: a scan run's limit (default 7200).
- ``SCAN2QA_DATASET_RUN_MAX_SECONDS``: a dataset-wide run's limit (default 21600).

Read when the code location loads, like ``assets.deployment``'s switches.
"""

from __future__ import annotations

from assets.env_values import env_seconds

MAX_RUNTIME_TAG = "dagster/max_runtime"
MAX_RETRIES_TAG = "dagster/max_retries"
SCAN_MAX_SECONDS_VARIABLE = "SCAN2QA_SCAN_RUN_MAX_SECONDS"
DATASET_MAX_SECONDS_VARIABLE = "SCAN2QA_DATASET_RUN_MAX_SECONDS"
DEFAULT_SCAN_MAX_SECONDS = 2 * 3600
DEFAULT_DATASET_MAX_SECONDS = 6 * 3600
# A lost dataset run is rebuilt once: it is the most expensive run, and a second loss in a row is a broken
# deployment to look at, not a blink. Scan runs take the instance's run_retries.max_retries.
DATASET_MAX_RETRIES = 1


def scan_run_tags() -> dict[str, str]:
    return {MAX_RUNTIME_TAG: str(env_seconds(SCAN_MAX_SECONDS_VARIABLE, DEFAULT_SCAN_MAX_SECONDS))}


def dataset_run_tags() -> dict[str, str]:
    return {
        MAX_RUNTIME_TAG: str(env_seconds(DATASET_MAX_SECONDS_VARIABLE, DEFAULT_DATASET_MAX_SECONDS)),
        MAX_RETRIES_TAG: str(DATASET_MAX_RETRIES),
    }
