"""Keep the gate's garbage collections off the objects that outlive it.

The release gate runs late in a build process that already holds a large heap
(Dagster, the tables, every module the per-scan steps imported: ~300k objects
the collector tracks). Importing Great Expectations and validating creates
another few hundred thousand objects, which triggers full collections, and
each full collection walks the whole heap: measured 0.6-0.7 CPU-s of the
release step in two full collections, nearly all of it spent on objects that
existed before the gate or that GX's import made for good (its modules,
classes and functions), none of which the gate frees.

``older_objects_frozen`` moves every object tracked so far to the permanent
generation (``gc.freeze()``), so the collections during the gate walk only
the objects made since; ``FrozenHeap.freeze_now`` adds the objects made so
far (GX's modules, once imported). On the way out ``gc.unfreeze()`` hands them
all back to the oldest generation, so nothing is kept alive longer than until
the next full collection. A process that froze objects on purpose (a pre-fork
server) or runs with the collector off is left as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


class FrozenHeap:
    def __init__(self, mine: bool):
        self.mine = mine

    def freeze_now(self) -> None:
        """Also freeze every object made since entry (objects that outlive the gate, such as imported modules)."""
        if self.mine:
            gc.freeze()


@contextmanager
def older_objects_frozen() -> Iterator[FrozenHeap]:
    heap = FrozenHeap(gc.isenabled() and gc.get_freeze_count() == 0)
    if heap.mine:
        gc.freeze()
    try:
        yield heap
    finally:
        if heap.mine:
            gc.unfreeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside (an import makes modules, classes and functions: cycles, but none of them garbage)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
