"""``scan2qa backfill --wait``'s reading of Dagster's run records, and its patience with a database that went away.

No deployment here: run records are built by hand the way the instance stores
them (the tags the retry daemon writes are Dagster's own constants), and the
database errors are the ones SQLAlchemy and psycopg2 raise when Postgres is
down.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
import sqlalchemy.exc

import dagster as dg
from dagster._core.storage.tags import (
    AUTO_RETRY_RUN_ID_TAG,
    PARENT_RUN_ID_TAG,
    PARTITION_NAME_TAG,
    RETRY_NUMBER_TAG,
    ROOT_RUN_ID_TAG,
    WILL_RETRY_TAG,
)

from runs.backfill_progress import DECISION_GRACE_S, RunChains, judge
from runs.instance_calls import DatabaseGone, Patience, is_unreachable, reason

NOW = 1_700_000_000.0
KEY = "synthetic/synth0000_00"


def record(run_id: str, status: dg.DagsterRunStatus, storage_id: int, *, updated: float = NOW, **tags: str):
    """A ``RunRecord``'s fields as the driver reads them (a real ``DagsterRun`` that is queued needs a code origin)."""
    run = SimpleNamespace(job_name="scan_job", run_id=run_id, status=status, tags={PARTITION_NAME_TAG: KEY, **tags})
    stamp = datetime.fromtimestamp(updated, tz=timezone.utc)
    return SimpleNamespace(storage_id=storage_id, dagster_run=run, create_timestamp=stamp, update_timestamp=stamp,
                           start_time=None, end_time=None)


def state_of(records, retries_enabled=True, backfill_ended=False, now=NOW):
    chains = RunChains([KEY])
    chains.absorb(records)
    return judge(KEY, chains.latest.get(KEY), now=now, retries_enabled=retries_enabled, backfill_ended=backfill_ended)


def test_a_scan_is_done_only_when_its_newest_run_ended_and_no_retry_is_coming():
    failed = record("a", dg.DagsterRunStatus.FAILURE, 1, **{WILL_RETRY_TAG: "true"})
    assert not state_of([failed]).done and state_of([failed]).state == "retrying"
    launched = record("a", dg.DagsterRunStatus.FAILURE, 1, **{WILL_RETRY_TAG: "true", AUTO_RETRY_RUN_ID_TAG: "b"})
    assert not state_of([launched]).done
    retry = {PARENT_RUN_ID_TAG: "a", ROOT_RUN_ID_TAG: "a", RETRY_NUMBER_TAG: "1"}
    queued = record("b", dg.DagsterRunStatus.QUEUED, 2, **retry)
    assert state_of([launched, queued]).state == "in_progress"
    # Records arrive in any order and again when updated: the newest run of the chain decides.
    succeeded = record("b", dg.DagsterRunStatus.SUCCESS, 2, **retry)
    state = state_of([queued, launched, succeeded, failed])
    assert state.done and state.ok and state.retries == 1 and state.run_id == "b"
    last = record("c", dg.DagsterRunStatus.FAILURE, 3, **{**retry, RETRY_NUMBER_TAG: "2", WILL_RETRY_TAG: "false"})
    state = state_of([failed, succeeded, last])
    assert state.done and state.state == "failed" and state.retries == 2


def test_a_failed_run_waits_for_the_retry_daemons_decision_only_while_retries_are_on():
    undecided = record("a", dg.DagsterRunStatus.FAILURE, 1)
    assert not state_of([undecided]).done
    assert state_of([undecided], now=NOW + DECISION_GRACE_S + 1).done
    assert state_of([undecided], retries_enabled=False).done
    assert state_of([record("a", dg.DagsterRunStatus.CANCELED, 1)]).done


def test_a_run_the_daemon_will_not_retry_because_its_backfill_ended_is_failed():
    # Dagster marks a job backfill completed once none of its runs is in progress, and its retry daemon does not
    # retry runs of a completed backfill: such a run keeps will_retry=true forever.
    orphan = record("a", dg.DagsterRunStatus.FAILURE, 1, **{WILL_RETRY_TAG: "true"})
    assert not state_of([orphan], backfill_ended=True).done
    state = state_of([orphan], backfill_ended=True, now=NOW + DECISION_GRACE_S + 1)
    assert state.done and state.state == "failed" and "backfill had ended" in state.note


def test_a_partition_without_a_run_is_not_built_once_the_backfill_ended():
    assert not judge(KEY, None, now=NOW, retries_enabled=True, backfill_ended=False).done
    state = judge(KEY, None, now=NOW, retries_enabled=True, backfill_ended=True, backfill_note="backfill FAILED: x")
    assert state.done and state.state == "not_built" and state.note == "backfill FAILED: x"


def refused() -> sqlalchemy.exc.OperationalError:
    import psycopg2

    orig = psycopg2.OperationalError('connection to server at "127.0.0.1", port 5 failed: Connection refused\n'
                                     "\tIs the server running on that host and accepting TCP/IP connections?\n")
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, orig)


def test_patience_retries_an_unreachable_database_with_backoff_in_one_line_each():
    lines, pauses, failures = [], [], [refused(), refused(), refused()]

    def call():
        if failures:
            raise failures.pop()
        return "runs"

    patience = Patience(60, say=lines.append, sleep=pauses.append, clock=lambda: NOW + sum(pauses))
    assert patience.call(call) == "runs"
    assert pauses == [1, 2, 4]
    assert lines[0] == ('instance database unreachable (connection to server at "127.0.0.1", port 5 failed: '
                        "Connection refused Is the server running on that host and accepting TCP/IP connections?), "
                        "retrying in 1 s")
    assert len(lines) == 4 and lines[-1].startswith("instance database reachable again")


def test_patience_gives_up_in_one_line_and_lets_other_errors_through():
    def down():
        raise refused()

    patience = Patience(10, say=lambda line: None, sleep=lambda s: None, clock=iter(range(0, 1000, 4)).__next__)
    with pytest.raises(DatabaseGone, match=r"unreachable for \d+ s \(connection to server .*; giving up"):
        patience.call(down, "read the runs")

    def broken():
        raise sqlalchemy.exc.ProgrammingError("SELECT nope", {}, Exception("syntax error"))

    with pytest.raises(sqlalchemy.exc.ProgrammingError):
        patience.call(broken)
    assert is_unreachable(refused()) and "Connection refused" in reason(refused())


class Runs:
    """Runs of one backfill batch in an ephemeral instance, with the tags the backfill daemon and the retry daemon
    give them (Dagster's own constants)."""

    def __init__(self, instance):
        self.instance = instance

    def add(self, key: str, status: dg.DagsterRunStatus, **tags: str) -> str:
        from dagster._core.storage.dagster_run import DagsterRun
        from dagster._core.utils import make_new_run_id

        from runs.backfill import BATCH_TAG

        run_id = make_new_run_id()
        self.instance.add_run(DagsterRun(job_name="scan_job", run_id=run_id, status=status,
                                         tags={BATCH_TAG: "b1", PARTITION_NAME_TAG: key, **tags}))
        return run_id

    def end(self, run_id: str, event_type: dg.DagsterEventType) -> None:
        run = self.instance.get_run_by_id(run_id)
        self.instance.report_dagster_event(dg.DagsterEvent(event_type.value, job_name=run.job_name), run_id=run_id)


def test_a_retry_launched_after_the_backfill_ended_is_followed_and_a_refused_one_named(capsys):
    """Dagster's retry daemon and backfill daemon race: a retry decided just before the backfill was marked
    completed is launched after it, without the backfill's tags; the driver must follow it even if it had judged
    the scan failed meanwhile. A retry the daemon refused is failed at once, with the daemon's reason."""
    from runs.backfill import BATCH_TAG, Follower
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    late, refused, built = (f"synthetic/synth000{i}_00" for i in range(3))
    with dg.instance_for_test() as instance:
        runs = Runs(instance)
        gone = {BACKFILL_ID_TAG: "ended", WILL_RETRY_TAG: "true"}  # no such backfill: ended, for the driver
        first = runs.add(late, dg.DagsterRunStatus.FAILURE, **gone)
        declined = runs.add(refused, dg.DagsterRunStatus.FAILURE, **gone)
        instance.report_engine_event("Not retrying run since it is part of a backfill that is in a terminal state "
                                     "(completed_failed).", instance.get_run_by_id(declined))
        runs.add(built, dg.DagsterRunStatus.SUCCESS)
        clock = [time.time()]
        scans = Follower(instance, Patience(30), {BATCH_TAG: "b1"}, [late, refused, built], "ended",
                         clock=lambda: clock[0])

        done = {s.key: s for s in scans.poll()}
        assert set(done) == {refused, built} and done[built].ok
        assert "terminal state (completed_failed)" in done[refused].note
        assert scans.states[late].state == "retrying" and not scans.states[late].done
        clock[0] += DECISION_GRACE_S + 1  # the daemon said nothing for a minute: failed, for now
        assert [s.key for s in scans.poll()] == [late] and scans.states[late].state == "failed"

        retry = runs.add(late, dg.DagsterRunStatus.STARTED, **{PARENT_RUN_ID_TAG: first, ROOT_RUN_ID_TAG: first,
                                                                RETRY_NUMBER_TAG: "1"})
        instance.add_run_tags(first, {AUTO_RETRY_RUN_ID_TAG: retry})
        assert scans.poll() == [] and scans.reopened == [late]
        assert not scans.states[late].done and scans.states[late].run_id == retry
        runs.end(retry, dg.DagsterEventType.RUN_SUCCESS)
        assert scans.follow(time.monotonic() + 60)
        assert scans.states[late].ok and scans.states[late].retries == 1
        assert scans.states[refused].state == "failed"
    printed = capsys.readouterr().out
    assert f"{late}: retried after all (run {retry[:8]}): following it" in printed
    assert f"[3/3] {late} ... ok" in printed and "after 1 retry" in printed


def test_a_run_over_a_range_counts_for_each_scan_of_it_and_its_reruns_take_over():
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG as END
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_START_TAG as START

    from runs.backfill_progress import FAILED, OK, RERUN_GRACE_S, RETRYING

    ordered = [f"d/s{i}" for i in range(6)]

    def ranged(run_id, status, storage_id, first, last, updated=NOW):
        made = record(run_id, status, storage_id, updated=updated, **{START: first, END: last})
        del made.dagster_run.tags[PARTITION_NAME_TAG]
        return made

    chains = RunChains(ordered[1:5], ordered)  # the batch: s1..s4; s0 and s5 belong to no one here
    chains.absorb([ranged("a", dg.DagsterRunStatus.FAILURE, 1, "d/s0", "d/s2"),
                   ranged("b", dg.DagsterRunStatus.SUCCESS, 2, "d/s3", "d/s5")])
    assert {k: r.dagster_run.run_id for k, r in chains.latest.items()} == {
        "d/s1": "a", "d/s2": "a", "d/s3": "b", "d/s4": "b"}

    failed = {"d/s2": "mesh.ply: truncated"}
    bad = judge("d/s2", chains.latest["d/s2"], now=NOW, retries_enabled=True, backfill_ended=True, batch_failed=failed)
    assert bad.state == FAILED and bad.done
    waiting = judge("d/s1", chains.latest["d/s1"], now=NOW + 5, retries_enabled=True, backfill_ended=True,
                    batch_failed=failed)
    assert waiting.state == RETRYING and not waiting.done and "waiting for their rerun" in waiting.note
    given_up = judge("d/s1", chains.latest["d/s1"], now=NOW + RERUN_GRACE_S + 1, retries_enabled=True,
                     backfill_ended=True, batch_failed=failed)
    assert given_up.state == FAILED and given_up.done and "rerun_batch_survivors" in given_up.note

    chains.absorb([ranged("c", dg.DagsterRunStatus.SUCCESS, 3, "d/s1", "d/s1")])  # the sensor's rerun
    assert chains.latest["d/s1"].dagster_run.run_id == "c" and chains.latest["d/s2"].dagster_run.run_id == "a"
    assert judge("d/s1", chains.latest["d/s1"], now=NOW, retries_enabled=True, backfill_ended=True).state == OK
