"""Errors that name the scan, the file and the problem on one line.

A bad scan must fail only its own partition, with a message a benchmark
builder can act on without reading a traceback.
"""

from __future__ import annotations


class ScanError(Exception):
    """Bad input for one scan: ``"<key>: <file>: <problem>"``."""

    def __init__(self, key: str, file: str, problem: str):
        self.key = key
        self.file = file
        self.problem = problem
        super().__init__(f"{key}: {file}: {problem}")


class ConfigError(Exception):
    """A configuration value that cannot be used."""


class TableError(Exception):
    """A stored table that cannot be read or does not match its schema: ``"<path>: <problem>"``."""


class StorageUnreachable(Exception):
    """The object store behind a URI did not answer: ``"<uri>: cannot reach the object store (<why>)"``.

    Kept apart from a missing or damaged file so that a worker with a wrong endpoint or no network fails
    its step saying so, instead of reporting every scan as absent.
    """

    def __init__(self, uri: str, reason: str):
        self.uri = uri
        super().__init__(f"{uri}: cannot reach the object store ({reason})")


class OutputUnwritable(Exception):
    """The output root stopped taking writes (no space left, quota, read-only): ``"<path>: <cause>..."``.

    Not a bad scan: every scan after it would fail the same way, so a build stops at the first and
    publishes nothing.
    """


# Exception class names, anywhere in an error's chain, that mean the store did not answer at all (botocore and
# aiohttp name them; matching names keeps those libraries out of this module's imports). NoCredentialsError: the
# request could not even be signed, so the store was never asked.
UNREACHABLE = frozenset({
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ClientConnectorError", "ServerDisconnectedError", "ConnectionRefusedError", "ConnectionResetError",
    "NoCredentialsError",
})


def unreachable_reason(exc: BaseException) -> str | None:
    """Why the store did not answer, if that is what ``exc`` (or anything that caused it) says; else None."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ in UNREACHABLE:
            return (str(error).strip().splitlines() or [type(error).__name__])[0]
        error = error.__cause__ or error.__context__
    return None
