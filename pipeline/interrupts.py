"""SIGINT and SIGTERM as one clean stop of a command, whatever was running when they came.

A command stopped by Ctrl-C or ``kill`` must stop soon, publish nothing and exit
``128 + signal``. Outside a Dagster run the handler installed here raises
``Interrupted`` straight away. Inside one, Dagster swaps in its own SIGINT
handler (and points SIGTERM at it): the signal becomes a failed step and the
run returns as an ordinary failure; a signal landing between two steps is
dropped when the run ends, and one landing in a garbage-collector callback is
swallowed there ("Exception ignored") while the step goes on. So every signal
is also written to a wakeup pipe (``signal.set_wakeup_fd``, filled at C level
whichever Python handler is installed), a watcher thread remembers it and
re-delivers it every second until the command has taken it, and after each
run the caller asks ``raise_if_interrupted``, so an interrupted run is never
mistaken for a bad scan.
"""

from __future__ import annotations

import _thread
import os
import select
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

REDELIVER_SECONDS = 1.0


class _Received:
    """The stop signal seen by the watcher (None: none yet), and whether the command has taken it."""

    signum: int | None = None
    taken = False
    active = False
    pipe: int | None = None  # the wakeup pipe's read end while active


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by ``signum``; it exits ``128 + signum`` as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)
        self.note = ""  # what the stopped command left as it was, said after the signal's name

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise_interrupted(signum: int, _frame) -> None:
    if _Received.taken:
        return  # already stopping: a repeated Ctrl-C or a re-delivery must not break the clean-up
    _Received.signum = _Received.signum or signum
    _Received.taken = True
    raise Interrupted(signum)


def _read_pipe(read_end: int) -> None:
    try:
        received = os.read(read_end, 512)
    except (BlockingIOError, OSError):
        return
    for signum in received:
        if signum in STOP_SIGNALS and _Received.signum is None:
            _Received.signum = signum


def _watch(read_end: int, done: threading.Event) -> None:
    while not done.is_set():
        ready, _, _ = select.select([read_end], [], [], REDELIVER_SECONDS)
        if ready:
            _read_pipe(read_end)
            continue  # a fresh signal was just delivered; re-deliver only after a quiet second
        if _Received.signum is not None and not _Received.taken and not done.is_set():
            _thread.interrupt_main(_Received.signum)


@contextmanager
def stop_on_signals(handler=_raise_interrupted) -> Iterator[None]:
    """SIGINT and SIGTERM call ``handler`` (default: raise ``Interrupted``), and are not lost inside Dagster runs."""
    if threading.current_thread() is not threading.main_thread() or _Received.active:
        yield  # signals are delivered to the main thread only; nested use keeps the outer watcher
        return
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    previous_handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    _Received.signum, _Received.taken, _Received.active, _Received.pipe = None, False, True, read_end
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(read_end, done), name="stop-signal-watcher", daemon=True)
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, handler)
        watcher.start()
        yield
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()
        for signum, previous in previous_handlers.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(previous_fd)
        _Received.active, _Received.pipe = False, None
        os.close(read_end)
        os.close(write_end)


def raise_if_interrupted() -> None:
    """Raise ``Interrupted`` if SIGINT or SIGTERM arrived (say, during a Dagster run, which swallowed it)."""
    if _Received.signum is None and _Received.pipe is not None:
        _read_pipe(_Received.pipe)  # a signal that has just landed, before the watcher saw it
    signum = _Received.signum
    if signum is not None:
        _Received.taken = True
        raise Interrupted(signum)


def exit_quietly_on_signals() -> None:
    """For a worker process: a stop signal while idle ends it at once, with no traceback.

    Its parent stops it with SIGTERM (a terminal's Ctrl-C reaches it too). Inside a run Dagster's handler
    takes the signal and ends the run as interrupted, if the step lets it (a native call holding the
    interpreter, or a signal swallowed in a collector callback, does not): so the parent gives it a short
    grace and then kills it (``runs.scan_pool.stop_workers``).
    """
    def exit_now(signum: int, _frame) -> None:
        os._exit(128 + signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, exit_now)


def die_with_parent(parent: int | None = None) -> None:
    """For a worker process: end when its parent does, even if the parent was killed (SIGKILL) and could not stop it.

    A worker left running with parent PID 1 goes on writing into folders its parent's next run cleans up
    (a synth's staging, a build's tables). Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere a no-op. The
    signal follows the thread that started the worker: the pools here are started from the main thread.
    ``parent``: the PID the worker was started by (default: its parent now).
    """
    parent = os.getppid() if parent is None else parent
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # 1 = PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(128 + signal.SIGKILL)
