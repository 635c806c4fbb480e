"""A lost service is retried, a bad scan is not: the classification, the step's failure, and the run's retry mark.

Offline: the exceptions are built by hand (same class names as psycopg2, redis
and botocore raise), the step runs in-process on an ephemeral instance, and the
orphaned-step check runs against a fake broker channel.
"""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.storage.tags import RETRY_ON_ASSET_OR_OP_FAILURE_TAG

from assets import celery_orphans
from assets import infrastructure_errors
from assets.infrastructure_errors import infrastructure_cause, retry_run_after_infrastructure_failure
from assets.run_errors import scan_failure
from pipeline.errors import ScanError, StorageUnreachable


def named(name: str, base: type[BaseException] = Exception) -> type[BaseException]:
    return type(name, (base,), {})


@pytest.mark.parametrize("exc", [
    named("OperationalError")("server closed the connection unexpectedly"),
    named("DagsterPostgresException")("too many retries for DB connection"),
    named("ConnectionError")("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    named("EndpointConnectionError")("Could not connect to the endpoint URL"),
    StorageUnreachable("s3://bucket/scans", "connection refused"),
    ConnectionRefusedError(111, "Connection refused"),
])
def test_a_lost_service_is_infrastructure_anywhere_in_the_chain(exc):
    assert infrastructure_cause(exc) is exc
    try:
        try:
            raise exc
        except Exception as inner:
            raise RuntimeError("while writing the scene table") from inner
    except RuntimeError as outer:
        assert infrastructure_cause(outer) is exc


@pytest.mark.parametrize("exc", [
    ScanError("synthetic/s0", "mesh.ply", "truncated: 12 of 40 faces"),
    ValueError("cannot reshape array"),
    KeyError("label"),
])
def test_a_scans_own_error_is_not_infrastructure(exc):
    assert infrastructure_cause(exc) is None


def test_scan_failure_never_retries_a_scan_error_and_leaves_other_errors_as_raised():
    with pytest.raises(dg.Failure) as failed:
        with scan_failure():
            raise ScanError("synthetic/s0", "mesh.ply", "truncated")
    assert not failed.value.allow_retries and failed.value.description == "synthetic/s0: mesh.ply: truncated"

    with pytest.raises(ValueError, match="cannot reshape"):
        with scan_failure():
            raise ValueError("cannot reshape array")


def run_step(error: BaseException, instance: dg.DagsterInstance) -> tuple[dg.DagsterRun, int]:
    attempts = []

    @dg.op
    def step():
        attempts.append(1)
        with scan_failure():
            raise error

    @dg.job(hooks={retry_run_after_infrastructure_failure})
    def job():
        step()

    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    run = instance.get_run_by_id(result.run_id)
    return run, len(attempts)


def test_a_step_that_lost_a_service_is_retried_then_marks_its_run_for_the_daemons_retry(monkeypatch):
    monkeypatch.setattr(infrastructure_errors, "STEP_RETRY_DELAY_S", 0)
    with dg.instance_for_test() as instance:
        run, attempts = run_step(named("OperationalError")("server closed the connection"), instance)
        assert attempts == 1 + infrastructure_errors.STEP_MAX_RETRIES
        assert run.tags.get(RETRY_ON_ASSET_OR_OP_FAILURE_TAG) == "true"


def test_a_bad_scan_fails_once_and_its_run_is_not_marked_for_retry():
    with dg.instance_for_test() as instance:
        run, attempts = run_step(ScanError("synthetic/s0", "mesh.ply", "truncated"), instance)
        assert attempts == 1
        assert RETRY_ON_ASSET_OR_OP_FAILURE_TAG not in run.tags


def test_other_step_errors_are_not_retried_either():
    with dg.instance_for_test() as instance:
        run, attempts = run_step(ValueError("cannot reshape array"), instance)
        assert attempts == 1 and RETRY_ON_ASSET_OR_OP_FAILURE_TAG not in run.tags


def test_step_retries_back_off_within_a_bound():
    from dagster._core.definitions.policy import calculate_delay

    waits = [calculate_delay(n, dg.Backoff.EXPONENTIAL, None, infrastructure_errors.STEP_RETRY_DELAY_S)
             for n in range(1, infrastructure_errors.STEP_MAX_RETRIES + 1)]
    assert waits == sorted(waits) and 60 <= sum(waits) <= 300, waits


class FakeRedis:
    """The few Redis calls the orphan check makes, over kombu's two ``unacked`` keys."""

    def __init__(self, unacked: dict[str, tuple[str, float]]):
        self.unacked = unacked  # delivery tag -> (task id, time taken)

    def zrangebyscore(self, key, low, high):
        return [tag for tag, (_, taken) in self.unacked.items() if low <= taken <= high]

    def hget(self, key, tag):
        import json

        return json.dumps([{"headers": {"id": self.unacked[tag][0]}}, "", "dagster"]) if tag in self.unacked else None


class FakeChannel:
    unacked_key, unacked_index_key = "unacked", "unacked_index"

    def __init__(self, client):
        self.client = client
        self.restored = []
        self.qos = self

    def restore_by_tag(self, tag, leftmost=False):
        self.restored.append(tag)
        self.client.unacked.pop(tag)


class FakeApp:
    def __init__(self, channel, held):
        self.channel, self.held = channel, held

    def connection_for_write(self):
        from contextlib import nullcontext
        from types import SimpleNamespace

        return nullcontext(SimpleNamespace(default_channel=self.channel))


def test_a_step_no_live_worker_holds_is_restored_on_the_second_check_only(monkeypatch):
    import time

    old = time.time() - 10 * celery_orphans.GRACE_S
    client = FakeRedis({"tag-dead": ("task-dead", old), "tag-live": ("task-live", old),
                        "tag-new": ("task-new", time.time())})
    channel = FakeChannel(client)
    app = FakeApp(channel, None)
    monkeypatch.setattr(celery_orphans, "held_task_ids", lambda _: {"task-live"})
    orphans = celery_orphans.Orphans()
    assert orphans.check(app) == []  # seen once: could be a slow inspect reply
    assert orphans.check(app) == ["task-dead"]
    assert channel.restored == ["tag-dead"]
    assert orphans.check(app) == []

    monkeypatch.setattr(celery_orphans, "held_task_ids", lambda _: None)  # nobody answered: nothing can be told
    client.unacked["tag-other"] = ("task-other", old)
    assert orphans.check(app) == [] and orphans.check(app) == []


def test_dagster_postgres_rides_out_a_database_restart_of_tens_of_seconds():
    from dagster._core.definitions.policy import calculate_delay
    from dagster_postgres import utils

    import assets  # noqa: F401 - the package makes every process of the deployment patient

    retries, base = utils.retry_pg_connection_fn.__defaults__
    waited = sum(calculate_delay(n, dg.Backoff.EXPONENTIAL, None, base) for n in range(1, retries + 1))
    assert 30 <= waited <= 120, waited
