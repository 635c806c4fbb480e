"""Progress of a scan's run while it happens: which step is running and, in the long steps, frames done.

Steps report frames through their Dagster log (``context.log``), so the same
lines appear in the run's event log in the UI, each naming the scan
(``progress: <key>: visibility 1200/6000 frames``); ``scan2qa build`` listens
to the run's events (``runs.step_lines``) and prints one line when a step starts and,
in a long step (the scan videos, the visibility ray cast), one per quarter of
its frames and one whenever ``INTERVAL_S`` seconds passed since the last, each
prefixed with the scan: a 300-frame scan prints about twenty lines, a
6,000-frame ray cast of several minutes a line every few seconds, never
minutes of silence. The scene step, which has no frame loop of its own (the
readers list and read every pose and image header), logs a ``Heartbeat``
every ``INTERVAL_S`` instead. With ``--workers N`` the lines of different
scans interleave but stay readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

MARK = "progress: "
QUARTERS = 4
# Seconds after which a long step logs frames done even between quarters. Half the 10 s a user may wait for a
# line, so a frame that takes a few seconds (a large image cast on a loaded machine) still keeps them under 10 s.
INTERVAL_S = 5.0


def quarter_marks(total: int) -> list[int]:
    """Frames done at which a step of ``total`` frames logs whatever the clock: the first count reaching each
    quarter (and the last frame)."""
    total = max(int(total), 0)
    return sorted({-(-quarter * total // QUARTERS) for quarter in range(1, QUARTERS + 1)}) if total else []


class FrameCounter:
    """Counts frames done in a step and logs at each quarter of ``total`` (and at the end), and between quarters
    once ``interval`` seconds of ``clock`` passed since the last line (``clock`` and ``interval`` are given by
    tests, so no test waits on the wall clock)."""

    def __init__(self, context, what: str, total: int, scene: str = "",
                 clock: Callable[[], float] = time.monotonic, interval: float = INTERVAL_S):
        self.context, self.what, self.total, self.done = context, what, max(int(total), 0), 0
        self.scene, self.clock, self.interval = scene, clock, float(interval)
        self._next = 1
        self._last = clock()

    def add(self, count: int = 1) -> None:
        self.done = min(self.done + count, self.total)
        if not self.total:
            return
        quarter = self.done * QUARTERS >= self._next * self.total
        while self.done * QUARTERS >= self._next * self.total:
            self._next += 1
        now = self.clock()
        if quarter or now - self._last >= self.interval:
            self._last = now
            named = f"{self.scene}: " if self.scene else ""
            self.context.log.info(f"{MARK}{named}{self.what} {self.done}/{self.total} frames")


class Heartbeat:
    """While a step with no frame loop of its own runs, a line every ``interval`` seconds saying what it does and
    for how long (the scene step reads every pose and image header of a scan: about 20 s at 50,000 frames).

    A context manager: a daemon thread logs through the step's Dagster log (which takes lines from any thread)
    and stops when the block ends. ``doing`` may be changed between phases. ``wait`` (default: the stop event's
    ``wait``, True once stopped) and ``clock`` are given by tests, so none sleeps.
    """

    def __init__(self, context, what: str, scene: str = "", doing: str = "", interval: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, wait: Callable[[float], bool] | None = None):
        import threading

        self.context, self.what, self.scene, self.doing = context, what, scene, doing
        self.interval, self.clock = float(interval), clock
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread = threading.Thread(target=self._run, name=f"scan2qa-heartbeat-{what}", daemon=True)
        self.started = clock()

    def beat(self) -> None:
        named = f"{self.scene}: " if self.scene else ""
        doing = f" {self.doing}" if self.doing else ""
        self.context.log.info(f"{MARK}{named}{self.what}{doing}, {self.clock() - self.started:.0f} s")

    def _run(self) -> None:
        while not self._wait(self.interval) and not self._stop.is_set():
            self.beat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


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
