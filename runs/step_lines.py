"""What ``scan2qa build`` prints while a run executes, read from the run's events as they are stored.

The steps log their progress through Dagster (``assets.progress``); this is the other end, in the process that
drives the run, so the code location holds only the logging side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assets.progress import MARK


def print_line(line: str) -> None:
    """One line in one write, so the lines of scans built in parallel processes never run into each other."""
    import sys

    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def is_check_step(step_key: str) -> bool:
    return step_key.endswith("_expectations")


def listener(label: str, write: Callable[[str], None]) -> Callable[[Any], None]:
    """An instance event listener that writes ``<label>: <step>`` per step start and each progress message
    (a message that already names the scan ``label`` is not prefixed twice)."""

    def on_event(entry) -> None:
        event = entry.dagster_event
        step = (event.step_key if event is not None else None) or entry.step_key or ""
        if event is not None:
            if event.event_type_value == "STEP_START" and not is_check_step(step):
                write(f"  {label}: {step}")
            return
        message = entry.user_message or ""
        at = message.find(MARK)
        if at >= 0:
            text = message[at + len(MARK):]
            write(f"  {label}: {text.removeprefix(f'{label}: ')}")

    return on_event
