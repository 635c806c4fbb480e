"""Hand a dead worker's step back to the queue within a minute or two, not after the visibility timeout.

With ``task_acks_late`` a step stays in Redis's ``unacked`` set while a worker
runs it. A worker whose process group is killed (or whose machine is lost)
never acknowledges nor rejects it, and Redis gives it out again only when the
visibility timeout has passed since it was taken, which must stay above the
longest step (else a step still running is handed to a second worker). So
every worker also runs ``OrphanRestorer``: every ``CHECK_S`` seconds it asks
all workers which steps they hold (``inspect active/reserved``), and a step
unacked for over ``GRACE_S`` seconds that no answering worker holds, seen so
on two checks in a row, is put back at the head of its queue with kombu's own
``restore_by_tag`` (a Redis transaction: two workers restoring the same step
put it back once). The step then runs on a live worker and the run worker,
still polling the same task id, gets its result.

Nothing is restored when no worker answers (the check cannot tell). Only for
the Redis broker (the deployment's); other transports are left alone.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import bootsteps

CHECK_S = 30
GRACE_S = 60
INSPECT_TIMEOUT_S = 10

logger = logging.getLogger(__name__)


def held_task_ids(app) -> set[str] | None:
    """Task ids every answering worker is running or holds prefetched; None when no worker answered."""
    inspect = app.control.inspect(timeout=INSPECT_TIMEOUT_S)
    active, reserved = inspect.active(), inspect.reserved()
    if not active:
        return None
    return {task["id"] for replies in (active, reserved or {}) for tasks in replies.values() for task in tasks or []}


def unacked_task_ids(channel, older_than: float) -> dict[str, str]:
    """Delivery tag -> task id of the steps taken before ``older_than`` (epoch seconds) and not acknowledged."""
    from kombu.utils.json import loads

    client = channel.client
    found = {}
    for tag in client.zrangebyscore(channel.unacked_index_key, 0, older_than):
        raw = client.hget(channel.unacked_key, tag)
        if raw is None:
            continue
        message = loads(raw if isinstance(raw, str) else raw.decode())[0]
        tag = tag if isinstance(tag, str) else tag.decode()
        found[tag] = (message.get("headers") or {}).get("id") or ""
    return found


class Orphans:
    """Orphaned steps seen on the previous check, so one slow inspect reply cannot get a live step restored."""

    def __init__(self) -> None:
        self.suspects: set[str] = set()

    def check(self, app) -> list[str]:
        """Restore the steps orphaned on this and the previous check; returns their task ids."""
        held = held_task_ids(app)
        if held is None:
            return []
        with app.connection_for_write() as connection:
            channel = connection.default_channel
            if not hasattr(channel, "unacked_index_key"):
                return []  # not the Redis transport
            orphaned = {tag: task for tag, task in unacked_task_ids(channel, time.time() - GRACE_S).items()
                        if task not in held}
            restored = []
            for tag, task in orphaned.items():
                if tag in self.suspects:
                    channel.qos.restore_by_tag(tag, leftmost=True)
                    restored.append(task)
                    logger.warning("step task %s was taken by a worker that is gone: handed back to the queue", task)
            self.suspects = set(orphaned) - set(restored)
        return restored


class OrphanRestorer(bootsteps.StartStopStep):
    """Worker bootstep: ``Orphans.check`` on a thread of its own (an inspect waits for replies, and the worker's
    own event loop must stay free to answer it)."""

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker):
        self.thread = threading.Thread(target=self.loop, args=(worker.app,), name="orphan-restorer", daemon=True)
        self.thread.start()

    def loop(self, app) -> None:
        orphans = Orphans()
        while not self.stopping.wait(CHECK_S):
            try:
                orphans.check(app)
            except Exception:  # noqa: BLE001 - the broker may be down; the next check tries again
                logger.warning("orphaned step check failed; trying again in %s s", CHECK_S, exc_info=True)

    def stop(self, worker):
        self.stopping.set()
