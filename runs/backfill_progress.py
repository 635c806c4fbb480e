"""Where each scan of a backfill stands, read from Dagster's own run records.

A scan's partition can have several runs: the backfill's run and, with run
retries on (``run_retries`` in ``deploy/dagster.yaml``), the retries the
daemon launches when it fails. A retry run is a re-execution carrying the
failed run's tags (so the backfill's and the batch's tags too) plus
``dagster/parent_run_id``, ``dagster/root_run_id`` and
``dagster/retry_number``; the failed run gets ``dagster/will_retry`` when it
fails (``true`` when the daemon is going to retry it) and
``dagster/auto_retry_run_id`` once the retry exists. So the scan's state is
the state of the newest run of its partition, and a scan is done only when
that run has ended and no retry of it is coming.

One gap of Dagster's own: a job backfill is marked completed as soon as none
of its runs is in progress, and the retry daemon does not retry runs of a
completed backfill. A run that failed last, while its retry was not yet
launched, is therefore never retried although it says ``will_retry=true``;
``judge`` calls it failed once the backfill has ended and the retry daemon
said so (its "Not retrying run ..." engine event on the run, ``retry_refusal``),
or, if the daemon never got to it, once it had ``DECISION_GRACE_S`` to act.
The two daemons race, though: a retry the daemon decided on just before the
backfill was marked completed is launched after it (without the backfill's
tags, with ours), so a failed state is never final while the run can still
gain a retry: the driver judges such scans again on every read
(``can_gain_a_retry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dagster import DagsterRunStatus, RunRecord

from assets.partitions import keys_between, partition_range

# Run tags Dagster writes, by the names its UI shows: it exports no constant for them (tests/test_public_dagster_api.py
# checks these against its own).
PARTITION_NAME_TAG = "dagster/partition"
RETRY_NUMBER_TAG = "dagster/retry_number"  # on a retry: how many came before it
WILL_RETRY_TAG = "dagster/will_retry"  # on a failed run: whether the retry daemon will launch a retry
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"  # on a failed run: the retry the daemon launched

ENDED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
# Seconds the retry daemon (it looks for failed runs every 5 s) gets to tag or retry a failed run.
DECISION_GRACE_S = 60.0
# Seconds the rerun_batch_survivors sensor (every 15 s, on the daemon's sensor loop) gets to rerun the scans of a
# range whose run failed on other scans (``assets.batch_rerun``).
RERUN_GRACE_S = 180.0
DATASET_WIDE = "dataset-wide"

# Scan states, as the release manifest's checks.excluded_scans.failed_scans names them where they overlap.
OK, FAILED, CANCELED, IN_PROGRESS, RETRYING, NOT_BUILT = "ok", "failed", "canceled", "in_progress", "retrying", "not_built"


@dataclass(frozen=True)
class ScanState:
    key: str
    state: str
    done: bool
    run_id: str | None = None
    retries: int = 0
    note: str = ""  # why a failed scan was not retried, what an unfinished one waits for

    @property
    def ok(self) -> bool:
        return self.state == OK


def run_key(record: RunRecord) -> str:
    """The scan a run belongs to: its partition (the dataset-wide run has none)."""
    return record.dagster_run.tags.get(PARTITION_NAME_TAG, DATASET_WIDE)


def run_range(record: RunRecord) -> tuple[str, str] | None:
    return partition_range(record.dagster_run.tags)


def retries_of(record: RunRecord) -> int:
    try:
        return int(record.dagster_run.tags.get(RETRY_NUMBER_TAG, "0"))
    except ValueError:
        return 0


class RunChains:
    """The newest run of each key among the runs seen so far (records may arrive again, updated, or out of order).

    ``ordered``: every registered scan in the partitions' order, so a run over a range counts for each scan of it.
    """

    def __init__(self, keys: list[str], ordered: list[str] | None = None):
        self.keys = set(keys)
        self.ordered = list(ordered or keys)
        self.latest: dict[str, RunRecord] = {}
        self.newest_update: datetime | None = None

    def keys_of(self, record: RunRecord) -> list[str]:
        bounds = run_range(record)
        return [run_key(record)] if bounds is None else keys_between(self.ordered, *bounds)

    def absorb(self, records: list[RunRecord]) -> None:
        for record in records:
            if self.newest_update is None or record.update_timestamp > self.newest_update:
                self.newest_update = record.update_timestamp
            for key in self.keys_of(record):
                if key not in self.keys:
                    continue
                current = self.latest.get(key)
                # storage_id grows with every run created: a retry always comes after the run it retries.
                if current is None or current.dagster_run.run_id == record.dagster_run.run_id or (
                    record.storage_id > current.storage_id
                ):
                    self.latest[key] = record

    def unsettled_run_ids(self) -> list[str]:
        """Failed runs whose retry is still to come: their tags change without a new run, so they are re-read."""
        return [r.dagster_run.run_id for r in self.latest.values() if r.dagster_run.status == DagsterRunStatus.FAILURE
                and r.dagster_run.tags.get(WILL_RETRY_TAG) != "false"]


def retry_refusal(instance, run_id: str) -> str:
    """The retry daemon's reason for not retrying a run it had marked ``will_retry=true`` ("" when it gave none):
    it records it as an engine event on the run (Dagster 1.13, ``auto_run_reexecution.should_retry``)."""
    from dagster import DagsterEventType

    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT).records
    for entry in (r.event_log_entry for r in records):
        message = (entry.dagster_event.message if entry.dagster_event else None) or entry.user_message or ""
        if message.startswith(REFUSAL_PREFIX):
            return message.removeprefix(REFUSAL_PREFIX).strip().rstrip(".")
    return ""


REFUSAL_PREFIX = "Not retrying run since it"


def can_gain_a_retry(state: ScanState, record: RunRecord | None) -> bool:
    """A failed scan whose run said ``will_retry=true``: the daemon may still launch its retry (see the module)."""
    return (state.state == FAILED and record is not None
            and record.dagster_run.tags.get(WILL_RETRY_TAG) == "true")


def judge(key: str, record: RunRecord | None, *, now: float, retries_enabled: bool, backfill_ended: bool,
          backfill_note: str = "", refusal: str = "", batch_failed: dict[str, str] | None = None) -> ScanState:
    """The state of one scan from its newest run; ``now`` is a Unix time comparable with the record's update time;
    ``refusal`` is the retry daemon's stated reason for not retrying that run (``retry_refusal``);
    ``batch_failed``: the scans a failed run over a range failed on (``assets.run_errors.batch_failed_scans``)."""
    if record is None:
        if backfill_ended:
            return ScanState(key, NOT_BUILT, True, note=backfill_note or "the backfill created no run for it")
        return ScanState(key, IN_PROGRESS, False, note="no run yet")
    run = record.dagster_run
    retries = retries_of(record)
    if run.status == DagsterRunStatus.SUCCESS:
        return ScanState(key, OK, True, run.run_id, retries)
    if run.status == DagsterRunStatus.CANCELED:
        return ScanState(key, CANCELED, True, run.run_id, retries, "run canceled")
    if run.status != DagsterRunStatus.FAILURE:
        return ScanState(key, IN_PROGRESS, False, run.run_id, retries, f"run {run.status.value}")
    will_retry = run.tags.get(WILL_RETRY_TAG)
    waited = now - record.update_timestamp.timestamp()
    if batch_failed is not None:  # its steps raised (never retried): the sensor reruns the scans that did not fail
        if key in batch_failed:
            return ScanState(key, FAILED, True, run.run_id, retries)
        if waited <= RERUN_GRACE_S:
            return ScanState(key, RETRYING, False, run.run_id, retries,
                             "its run failed on other scans of its range: waiting for their rerun")
        return ScanState(key, FAILED, True, run.run_id, retries,
                         f"its run failed on other scans and no rerun came in {RERUN_GRACE_S:.0f} s "
                         "(is the rerun_batch_survivors sensor running?)")
    if run.tags.get(AUTO_RETRY_RUN_ID_TAG):
        return ScanState(key, RETRYING, False, run.run_id, retries, "its retry run was launched")
    if will_retry == "true":
        if refusal:
            return ScanState(key, FAILED, True, run.run_id, retries, f"not retried: it {refusal}")
        if backfill_ended and waited > DECISION_GRACE_S:
            return ScanState(key, FAILED, True, run.run_id, retries,
                             "not retried: the backfill had ended before the retry daemon acted")
        return ScanState(key, RETRYING, False, run.run_id, retries, "the daemon retries it")
    if will_retry is None and retries_enabled and waited <= DECISION_GRACE_S:
        return ScanState(key, RETRYING, False, run.run_id, retries, "waiting for the retry daemon's decision")
    return ScanState(key, FAILED, True, run.run_id, retries)
