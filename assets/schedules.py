"""Weekly full rebuild: re-run every registered scan partition.

Run keys carry the scheduled time so each week's rebuild is distinct; the
dataset-wide assets follow through the ``dataset_automation`` sensor once the scan
runs have finished. ``SCAN2QA_EXECUTOR=celery`` makes it request the Celery job (``assets.deployment``).
"""

import dagster as dg

from assets.deployment import schedule_status, sensor_scan_job
from assets.partitions import scan_partitions


@dg.schedule(
    name="weekly_full_rebuild",
    cron_schedule="0 3 * * 0",
    job_name=sensor_scan_job(),
    default_status=schedule_status(),
    description="Every Sunday 03:00 UTC: rebuild all scan partitions.",
)
def weekly_full_rebuild(context: dg.ScheduleEvaluationContext):
    keys = sorted(context.instance.get_dynamic_partitions(scan_partitions.name))
    if not keys:
        return dg.SkipReason("no scan partitions registered yet")
    stamp = context.scheduled_execution_time.isoformat()
    return [dg.RunRequest(partition_key=key, run_key=f"{key}@{stamp}", tags={"scan2qa/trigger": "weekly"}) for key in keys]
