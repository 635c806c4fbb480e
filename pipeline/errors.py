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
