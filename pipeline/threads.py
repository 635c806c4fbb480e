"""How many threads one worker process may use, so parallel workers share the machine instead of fighting over it.

``scan2qa build --workers N`` and Celery workers run several pipeline processes
on one machine. Open3D's ray caster, OpenCV and the BLAS libraries each default
to one thread per core, so N processes would start N x cores threads and spend
their time switching. Each worker process is given ``cores // N`` threads
(at least one) through ``SCAN2QA_THREADS``; the ray caster reads it on every
cast and OpenCV is told once per process. ``0`` (the default, or the variable
unset) leaves every library to use all cores, as a single process should.
"""

from __future__ import annotations

import os

THREADS_VARIABLE = "SCAN2QA_THREADS"
# Libraries that read their thread count from the environment when they are first loaded.
LIBRARY_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    return max(1, (cores or available_cores()) // max(1, workers))


def worker_threads() -> int:
    """The thread budget of this process; 0 means no budget (use every core)."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    try:
        return max(0, int(value)) if value else 0
    except ValueError:
        return 0


def limit_threads(threads: int) -> None:
    """Give this process (and the processes it starts) ``threads`` threads; call before heavy imports."""
    os.environ[THREADS_VARIABLE] = str(threads)
    for name in LIBRARY_VARIABLES:
        os.environ[name] = str(threads)
    apply_thread_limit()


def apply_thread_limit() -> None:
    """Tell already-loaded libraries about the budget in ``SCAN2QA_THREADS`` (a no-op without one)."""
    threads = worker_threads()
    if not threads:
        return
    import cv2

    cv2.setNumThreads(threads)
