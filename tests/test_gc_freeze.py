"""The gate's collections skip the objects made before it, and the process's collector is left as it was."""

from __future__ import annotations

import gc
import weakref

from expectations.gc_freeze import older_objects_frozen


def test_objects_made_before_are_frozen_inside_and_handed_back_after():
    before = [object() for _ in range(3)]  # noqa: F841 (tracked by the collector)
    assert gc.get_freeze_count() == 0
    with older_objects_frozen():
        assert gc.get_freeze_count() > 0
        inside = gc.get_freeze_count()

        class Cycle:
            pass

        made_inside = Cycle()
        made_inside.self = made_inside
        ref = weakref.ref(made_inside)
        del made_inside
        gc.collect()
        assert ref() is None  # made inside: not frozen, collected as usual
        # The count itself may drop meanwhile (a frozen object freed by its refcount, say on another thread),
        # never rise: nothing made inside joined the frozen objects.
        assert gc.get_freeze_count() <= inside
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_objects_itself_is_left_alone():
    gc.freeze()
    try:
        # The count itself may drop while we look (a frozen object freed by its refcount), so check the
        # behaviour: the gate neither freezes on top of the process's freeze nor unfreezes it on the way out.
        frozen = gc.get_freeze_count()
        with older_objects_frozen() as heap:
            assert not heap.mine
            heap.freeze_now()
            assert gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_garbage_made_before_is_collected_after():
    class Cycle:
        pass

    a = Cycle()
    a.self = a
    freed = []
    import weakref

    ref = weakref.ref(a, lambda _: freed.append(True))
    with older_objects_frozen():
        del a
        gc.collect()
        assert ref() is not None  # frozen: not collected inside
    gc.collect()
    assert ref() is None and freed


def test_freeze_now_adds_the_objects_made_since_entry():
    with older_objects_frozen() as heap:
        first = gc.get_freeze_count()
        kept = [[] for _ in range(1000)]  # noqa: F841
        heap.freeze_now()
        assert gc.get_freeze_count() >= first + 1000
    assert gc.get_freeze_count() == 0


def test_the_collector_is_paused_inside_and_restored_after():
    from expectations.gc_freeze import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()
