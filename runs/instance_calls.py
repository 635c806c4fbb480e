"""Instance calls that outlive a restart of the instance's database.

``scan2qa backfill --wait`` follows a deployment's runs for hours; the
database behind the instance (Postgres) is restarted in that time for
upgrades, failovers or a lost machine. dagster-postgres retries a failed
connection for about a second and then raises, so every call the driver makes
goes through ``Patience.call``: a database that cannot be reached is one line
("instance database unreachable (...), retrying in N s") and another attempt
after a growing pause, never a traceback, until the outage has lasted longer
than the patience allows. Only connection failures are retried: a query the
database rejects is a bug and raises at once.

A call retried after an outage may have taken effect before the connection
broke, so calls that write are written to be repeatable (look first, then
write) by their callers.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy.exc

T = TypeVar("T")

DEFAULT_PATIENCE_S = 600.0
MAX_PAUSE_S = 15.0


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        sqlalchemy.exc.OperationalError,  # connection refused, server closed the connection, admin shutdown
        sqlalchemy.exc.InterfaceError,  # a connection object the server dropped
        sqlalchemy.exc.TimeoutError,  # no connection from the pool in time
    ]
    try:
        import psycopg2

        errors += [psycopg2.OperationalError, psycopg2.InterfaceError]
    except ImportError:
        pass
    try:
        from dagster_postgres.utils import DagsterPostgresException

        errors.append(DagsterPostgresException)  # "too many retries for DB connection", after its own retries
    except ImportError:
        pass
    return tuple(errors)


UNREACHABLE = _unreachable_errors()


class DatabaseGone(RuntimeError):
    """The instance database stayed unreachable for longer than the patience; the message is one line."""


def is_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, UNREACHABLE):
        # DagsterPostgresException is also raised for failed table creation: only its connection form is an outage.
        return not (type(exc).__name__ == "DagsterPostgresException" and "connection" not in str(exc))
    return False


def reason(exc: BaseException) -> str:
    """The innermost cause's first line: what the driver would have said ('Connection refused')."""
    inner = exc
    while inner.__cause__ is not None or (inner.__context__ is not None and not inner.__suppress_context__):
        inner = inner.__cause__ or inner.__context__
    if isinstance(inner, sqlalchemy.exc.StatementError) and inner.orig is not None:
        inner = inner.orig
    text = " ".join(str(inner).split()) or type(inner).__name__
    return text if len(text) <= 160 else text[:157] + "..."


class _QuietConnectionRetries(logging.Filter):
    """dagster-postgres logs each of its own retries as a multi-line root warning; ours says it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Retrying failed database connection", "Retrying failed database creation"))


def quiet_connection_retries() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _QuietConnectionRetries) for f in root.filters):
        root.addFilter(_QuietConnectionRetries())


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Patience:
    """Retries instance calls while the database is unreachable, for at most ``budget_s`` seconds of outage."""

    def __init__(self, budget_s: float = DEFAULT_PATIENCE_S, say: Callable[[str], None] = _say,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.budget_s = budget_s
        self.say, self.sleep, self.clock = say, sleep, clock
        quiet_connection_retries()

    def call(self, fn: Callable[[], T], what: str = "") -> T:
        down_since: float | None = None
        pause = 1.0
        while True:
            try:
                result = fn()
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                now = self.clock()
                down_since = now if down_since is None else down_since
                if now - down_since + pause > self.budget_s:
                    raise DatabaseGone(
                        f"instance database unreachable for {now - down_since:.0f} s ({reason(exc)})"
                        f"{' while trying to ' + what if what else ''}; giving up"
                    ) from None
                self.say(f"instance database unreachable ({reason(exc)}), retrying in {pause:.0f} s")
                self.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_S)
                continue
            if down_since is not None:
                self.say(f"instance database reachable again after {self.clock() - down_since:.0f} s")
            return result
