"""What follows a change upstream: Dagster's declarative automation, for every dataset-wide asset.

A release must follow whatever changed its inputs, whoever launched the change:
a scan materialized by ``scan_discovery``, a partition rerun from an asset's
page, a backfill, the weekly schedule or a Celery deployment — and a scan
whose rerun *failed*, which must leave the next release. So each dataset-wide
asset is requested when, since it was last requested,

- any upstream partition was materialized (or observed with a new data version:
  the reviewer verdicts), or an upstream dataset-wide asset is requested in the
  same tick (``any_deps_updated``), or
- any upstream partition's latest run newly failed (``execution_failed``),

and such a change stays pending until the asset is requested again (not merely
materialized: that run may have read its inputs before the change),

and it waits while any upstream partition or the asset itself is still being
built, so a backfill of a thousand scans leads to one release at its end, not
a thousand, and while a dataset-wide table it reads was never built (the
release alone, after a verdict edit before the first build, has nothing to
release). The automation condition sensor (``automation_sensor``) evaluates
this every ``SCAN2QA_SENSOR_INTERVAL`` seconds (default 30), the same setting
as ``scan_discovery``; its runs carry the dataset phase tag, so the run queue
keeps one dataset-wide run at a time.
"""

from __future__ import annotations

import dagster as dg

from assets.deployment import automation_running, sensor_interval
from assets.run_policy import dataset_run_tags

DATASET_TAGS = {"scan2qa/phase": "dataset"}
AUTOMATION_INTERVAL = 30  # default seconds between evaluations


# The dataset-wide tables; a dataset-wide step waits until those it reads exist (before the first scan is built
# there is nothing to release). Per-scan inputs are never waited for: a scan that never built is left out.
DATASET_TABLES = ("scan_membership", "pinpoint_qa", "pinpoint_qa_drops", "qa", "qa_distribution_drops")


def dataset_automation() -> dg.AutomationCondition:
    changed = (
        dg.AutomationCondition.any_deps_updated()
        | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.execution_failed().newly_true())
    )
    requested = dg.AutomationCondition.newly_requested()
    start = dg.AutomationCondition.initial_evaluation()
    # A change stays pending until the asset is requested again: not until it is materialized, as Dagster's
    # since_last_handled has it, because the run that materializes it may have read its inputs before the change
    # (a scan built or a verdict observed while the dataset run ran). Its own run's updates are no trigger
    # (any_deps_updated ignores parents updated by a run that also executed this asset), so nothing loops.
    pending = changed.since(requested | start)
    # A change first seen in the tick right after a request loses to that reset inside ``since`` (an ``|`` of
    # conditions carries no timing to tell which came later), so it is remembered on its own until the next request
    # that nothing new accompanies.
    pending_after_request = (changed & requested).since((requested & ~changed) | start)
    return (
        (pending | pending_after_request)
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
        & ~dg.AutomationCondition.any_deps_missing().allow(dg.AssetSelection.assets(*DATASET_TABLES))
    ).with_label("release follows any upstream change")


def automation_sensor() -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        name="dataset_automation",
        target=dg.AssetSelection.all(include_sources=True),
        minimum_interval_seconds=sensor_interval(AUTOMATION_INTERVAL),
        run_tags={**DATASET_TAGS, **dataset_run_tags()},  # one at a time in the queue; run-time limit, retries
        default_status=dg.DefaultSensorStatus.RUNNING if automation_running() else dg.DefaultSensorStatus.STOPPED,
        description="Rebuilds the dataset-wide assets (membership, questions, release) after any upstream change "
        "or failure, once no scan is being built.",
    )
