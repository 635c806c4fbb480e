"""Bad input to a reader: one ScanError, on one line."""

from __future__ import annotations

import json

import pytest

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers import read_scan


def scan_error(folder, config: Config | None = None) -> str:
    """The message of the ScanError ``read_scan`` raises for ``folder``; it must be a single line."""
    with pytest.raises(ScanError) as info:
        read_scan(str(folder), config or Config())
    message = str(info.value)
    assert "\n" not in message
    return message


def edit_json(path, change) -> None:
    """Rewrite a JSON file after ``change(data)`` mutates it in place."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
