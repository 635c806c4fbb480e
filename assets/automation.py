"""What follows a change upstream: Dagster's declarative automation, for the per-scan and dataset-wide assets.

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

Each per-scan asset carries ``scan_automation()``: after a partial rerun of a
partition (one asset from its page, a subset, a failed step's retry), the
assets downstream of what it rebuilt, in that partition only, are requested in
the tick that first sees it, in one run, so the scan's tables belong together
again and the next release holds it instead of leaving it out as stale. A
run's own updates are no trigger: none of a run that
builds every per-scan asset: a scan job's, or a backfill of them all
(``SCAN_TAGS``, checked per partition: ``partial_rerun_update``); a run that
fails on an asset hands it back to whoever retries it (its failure counts as handled: a corrupt scan is not retried by automation). So ordinary
scan runs, even those spanning a tick, lead to no other run. ``will_be_requested``
never holds from a partitioned asset to an unpartitioned one, so the release
learns of a heal only once its run exists: the dataset-wide assets wait one tick
after a per-scan table is updated, by which time the heal's run is queued and
its partition is in progress. Each dataset-wide asset looks two levels up
for both (through ``scan_membership``, every per-scan asset), so a scan run that
ends its steps one by one leads to one dataset-wide run, not one per asset.
"""

from __future__ import annotations

import dagster as dg

from assets.deployment import automation_running, sensor_interval
from assets.jobs import SCAN_TAGS
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
    # The tick that first sees a per-scan table updated by some other run is the tick that requests its partition's
    # heal, if it needs one; the dataset-wide assets wait for the next, when that run is queued and in progress.
    updated_elsewhere = dg.AutomationCondition.newly_updated() & ~dg.AutomationCondition.executed_with_root_target()
    scan_tick = _upstream(updated_elsewhere).with_label("a table upstream updated this tick by another run")
    return (
        (pending | pending_after_request)
        & ~scan_tick
        & ~_upstream(dg.AutomationCondition.in_progress()).with_label("anything upstream in progress")
        & ~dg.AutomationCondition.in_progress()
        & ~dg.AutomationCondition.any_deps_missing().allow(dg.AssetSelection.assets(*DATASET_TABLES))
    ).with_label("release follows any upstream change")


def _upstream(condition: dg.AutomationCondition) -> dg.AutomationCondition:
    """``condition`` true of a dependency or of a dependency's dependency (sources left out).

    Every dataset-wide asset reads ``scan_membership``, whose inputs are all the per-scan assets: looking two levels
    up, each waits while any scan is being built, not only the scans' tables it reads itself, so one scan run ending
    its steps one by one (a heal ends ``pinpoint_qa_candidates`` before ``qa_candidates``) leads to one dataset run,
    not one per dataset-wide asset.
    """
    direct = dg.AutomationCondition.any_deps_match(condition).allow(dg.AssetSelection.all())
    return direct | dg.AutomationCondition.any_deps_match(direct).allow(dg.AssetSelection.all())


def partial_rerun_update() -> dg.AutomationCondition:
    """A per-scan table newly updated, not only by runs over every per-scan asset of its partitions.

    Dagster's ``any_deps_updated`` leaves out a parent updated by a run that also targets the child
    (``executed_with_root_target``, kept here), but it reads the run of the asset's newest materialization of any
    partition, so with scans built side by side (Celery) it answered no for every other partition; and a job run
    over all its assets has no asset selection at all. Whether the child is still in progress cannot stand in for it either: the
    tick reads updates once and statuses later, so a child built by the same run during a slow tick was neither
    newly updated nor in progress, and was requested again while its run went on. The scan jobs' runs, and the
    asset backfills of every per-scan asset, carry ``SCAN_TAGS``; ``all_new_updates_have_run_tags`` checks the run
    of each new materialization, partition by partition.
    """
    return (
        dg.AutomationCondition.newly_updated()
        & ~dg.AutomationCondition.executed_with_root_target()
        & ~dg.AutomationCondition.all_new_updates_have_run_tags(tag_values=SCAN_TAGS)
    ).with_label("updated by a run that did not build every per-scan asset")


def scan_automation() -> dg.AutomationCondition:
    """A per-scan asset follows a partial rerun of its own partition (Dagster's ``eager`` made of its parts)."""
    rerun_upstream = dg.AutomationCondition.any_deps_match(
        partial_rerun_update() | dg.AutomationCondition.will_be_requested()
    ).with_label("an input rebuilt by a partial rerun, or requested with it")
    handled = (
        dg.AutomationCondition.newly_requested()
        | dg.AutomationCondition.newly_updated()
        | dg.AutomationCondition.execution_failed().newly_true()
        | dg.AutomationCondition.initial_evaluation()
    ).with_label("requested, built or failed")
    return (
        rerun_upstream.since(handled)
        & ~dg.AutomationCondition.any_deps_missing()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("partition follows a partial rerun")


def with_scan_automation(assets: list, partitions_def: dg.PartitionsDefinition) -> list:
    """The asset definitions with every asset partitioned by ``partitions_def`` carrying ``scan_automation()``."""
    condition = scan_automation()

    def automated(spec: dg.AssetSpec) -> dg.AssetSpec:
        return spec.replace_attributes(automation_condition=condition)

    return [
        a.map_asset_specs(automated)
        if isinstance(a, dg.AssetsDefinition) and a.is_materializable and a.partitions_def == partitions_def else a
        for a in assets
    ]


def automation_sensor() -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        name="dataset_automation",
        target=dg.AssetSelection.all(include_sources=True),
        minimum_interval_seconds=sensor_interval(AUTOMATION_INTERVAL),
        run_tags={**DATASET_TAGS, **dataset_run_tags()},  # one at a time in the queue; run-time limit, retries
        default_status=dg.DefaultSensorStatus.RUNNING if automation_running() else dg.DefaultSensorStatus.STOPPED,
        description="Rebuilds a scan's per-scan assets downstream of a partial rerun of its partition, and the "
        "dataset-wide assets (membership, questions, release) after any upstream change or failure, once no scan is "
        "being built.",
    )
