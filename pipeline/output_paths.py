"""Whether a local output root can be written at all, said in one line before any work starts.

A build or export that finds out at its first write that ``--out`` is a file, lies under a file, or sits on a
read-only or forbidden folder fails deep in a step (and used to blame a scan, or print a traceback).
"""

from __future__ import annotations

import os
from pathlib import Path


def output_root_problem(out: str, flag: str = "--out") -> str | None:
    """``"<flag> <out>: <why it cannot be written>"``, or None if it can (object-store roots are not checked)."""
    if "://" in out:
        return None
    path = Path(out)
    if path.exists() and not path.is_dir():
        return f"{flag} {out}: is a file, not a folder"
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                return f"{flag} {out}: {folder} is a file, not a folder"
            if not os.access(folder, os.W_OK | os.X_OK):
                why = "read-only file system" if _read_only(folder) else "permission denied"
                return f"{flag} {out}: {folder} cannot be written ({why})"
            return None
    return None


def refuse_object_store_uris(command: str, **paths: str | list[str] | None) -> None:
    """``ConfigError`` for the first of ``paths`` (flag name -> value) that is an ``s3://``-style URI.

    Commands that read and write local files only would take ``s3://bucket/x`` as the local folder
    ``s3:/bucket/x`` and report it missing; say instead that the URI is not taken, before any work.
    """
    from pipeline.errors import ConfigError

    for flag, values in paths.items():
        for value in values if isinstance(values, list) else [values]:
            if value is None or "://" not in str(value):
                continue
            name = "--" + flag.replace("_", "-")
            raise ConfigError(f"{name} {value}: scan2qa {command} takes local paths only, not object-store "
                              f"URIs (copy it to a local folder first)")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
