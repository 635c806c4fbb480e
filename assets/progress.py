"""Progress of a scan's run while it happens: which step is running and, in the long steps, frames done.

Steps report frames through their Dagster log (``context.log``), so the same
lines appear in the run's event log in the UI; ``scan2qa build`` listens to
the run's events (``listener``) and prints one line when a step starts and
one per quarter of the frames of a long step (the scan videos, the
visibility ray cast), each prefixed with the scan: a 300-frame scan prints
about twenty lines, and with ``--workers N`` the lines of different scans
interleave but stay readable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MARK = "progress: "
QUARTERS = 4


class FrameCounter:
    """Counts frames done in a step and logs at each quarter of ``total`` (and at the end)."""

    def __init__(self, context, what: str, total: int):
        self.context, self.what, self.total, self.done = context, what, max(int(total), 0), 0
        self._next = 1

    def add(self, count: int = 1) -> None:
        self.done = min(self.done + count, self.total)
        if self.total and self.done * QUARTERS >= self._next * self.total:
            while self.done * QUARTERS >= self._next * self.total:
                self._next += 1
            self.context.log.info(f"{MARK}{self.what} {self.done}/{self.total} frames")


def counting_loader(counter: FrameCounter, load: Callable[[int], Any] | None) -> Callable[[int], Any] | None:
    """``load`` (a frame image loader) that counts each frame it returns."""
    if load is None:
        return None

    def counted(index: int):
        image = load(index)
        counter.add()
        return image

    return counted


class CountingRaycaster:
    """A ray caster that counts one frame per ``cast_triangle_ids`` call; every other attribute is the caster's."""

    def __init__(self, counter: FrameCounter, raycaster):
        self._counter, self._raycaster = counter, raycaster

    def cast_triangle_ids(self, *args, **kwargs):
        result = self._raycaster.cast_triangle_ids(*args, **kwargs)
        self._counter.add()
        return result

    def __getattr__(self, name: str):
        return getattr(self._raycaster, name)


def print_line(line: str) -> None:
    """One line in one write, so the lines of scans built in parallel processes never run into each other."""
    import sys

    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def is_check_step(step_key: str) -> bool:
    return step_key.endswith("_expectations")


def listener(label: str, write: Callable[[str], None]) -> Callable[[Any], None]:
    """An instance event listener that writes ``<label>: <step>`` per step start and each progress message."""

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
            write(f"  {label}: {message[at + len(MARK):]}")

    return on_event
