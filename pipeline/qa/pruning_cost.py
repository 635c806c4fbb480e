"""Where the learned adversary and Iterative Bias Pruning spend the qa step's time, for ``scan2qa bench dataset``.

The adversary's fits are the new dataset-wide cost of the qa step (issue 37 asks for it at 2,000 scans beside
the other phases), but they run inside the ``qa`` and ``pinpoint_qa`` steps, among reading, capping and letter
balancing. Each outermost pruning call records its wall-clock span and the process CPU seconds it took; the
bench reads the spans after the run and takes the peak resident memory inside them from its own sampler.
Recording is a few clock reads per (profile, budget, type) group: it stays on outside the bench.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

_spans: list[tuple[float, float, float]] = []  # (wall start, wall end, CPU s) of each outermost recorded call
_state = threading.local()


def recorded(function: Callable) -> Callable:
    """``function`` with its outermost calls recorded (a call made inside another recorded call is counted once)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        start, cpu = time.time(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            _state.depth = depth
            if depth == 0:
                _spans.append((start, time.time(), time.process_time() - cpu))

    return wrapper


def spans() -> list[tuple[float, float, float]]:
    return list(_spans)


def reset() -> None:
    _spans.clear()
