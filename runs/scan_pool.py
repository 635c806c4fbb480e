"""Scan partitions materialized in parallel worker processes, for ``scan2qa build --workers N``.

Each scan is still its own Dagster run (``dagster.materialize`` with its
partition key), exactly as in a serial build, so a bad scan fails only its own
partition and the tables are the same bytes: only where the runs execute
changes. Worker processes are started with ``spawn`` (Open3D and OpenCV keep
threads that do not survive ``fork``), each builds the definitions and opens
the instance once, and each gets ``cores // workers`` library threads
(``pipeline.threads``) so the machine is not oversubscribed. Progress lines
(step started, frames done: ``assets.progress``) are printed by the process
that runs the scan, each prefixed with its scan key; with N workers the lines
of N scans interleave, one whole line at a time.

A worker that dies (out of memory, a crash in native code) breaks the whole
``ProcessPoolExecutor``. At most ``workers`` scans are in flight at a time, so
the scans that were running then are known: each is built again alone, in a
pool of its own, which tells the scan that kills its worker (reported as
failed) from the ones that only shared a pool with it; the scans not yet
started go on in a fresh pool.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from pipeline.config import Config

WORKER_GRACE_SECONDS = 2.0  # for a stopped worker to end its interrupted run before it is killed

@dataclass(frozen=True)
class ScanOutcome:
    key: str
    ok: bool
    error: str
    seconds: float


class ScanRunner:
    """Everything one process needs to materialize scan partitions: definitions, resources, instance."""

    def __init__(self, definitions: list, selection: list, resources: dict, instance):
        self.definitions, self.selection, self.resources, self.instance = definitions, selection, resources, instance

    @classmethod
    def open(cls, config: Config, config_file: str, keys: Iterable[str]) -> ScanRunner:
        from runs.in_process import open_instance, register_partitions
        from assets.definitions import all_asset_checks, all_assets
        from assets.jobs import per_scan_keys
        from resources.defaults import default_resources
        from resources.run_config import RunConfigResource
        from resources.storage import StorageResource

        instance = open_instance()
        register_partitions(instance, list(keys))
        resources = default_resources(StorageResource.from_config(config, config_file), RunConfigResource.from_config(config))
        return cls([*all_assets, *all_asset_checks], per_scan_keys(all_assets), resources, instance)

    def run(self, key: str, uri: str, show_progress: bool = True) -> ScanOutcome:
        from runs.in_process import materialize_quietly
        from assets.jobs import SCAN_JOB
        from assets.partitions import FINGERPRINT_TAG, SOURCE_TAG
        from runs.step_lines import listener, print_line
        from pipeline.scene.discovery import scan_fingerprint

        started = time.perf_counter()
        tags = {SOURCE_TAG: uri}
        try:  # what the discovery sensor compares with, so it does not build this scan again
            tags[FINGERPRINT_TAG] = scan_fingerprint(uri, self.resources["storage"].storage_options or None)
        except OSError:
            pass  # unreadable now: the scan's own steps report why
        on_event = listener(key, print_line) if show_progress else None
        ok, error = materialize_quietly(
            self.definitions, self.selection, self.resources, self.instance, partition_key=key, tags=tags,
            on_event=on_event, job_name=SCAN_JOB,
        )
        return ScanOutcome(key, ok, error, time.perf_counter() - started)


_runner: ScanRunner | None = None


def _start_worker(config: Config, config_file: str, keys: list[str], threads: int) -> None:
    """Pool initializer: thread budget first (libraries read it when loaded), then the definitions."""
    import warnings

    import dagster as dg

    from pipeline.interrupts import exit_quietly_on_signals
    from pipeline.threads import limit_threads

    exit_quietly_on_signals()  # a Ctrl-C reaches the workers too: the parent reports it, once
    limit_threads(threads)
    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)
    global _runner
    _runner = ScanRunner.open(config, config_file, keys)


def stop_workers(pool: ProcessPoolExecutor, grace: float = WORKER_GRACE_SECONDS) -> None:
    """End every worker of ``pool`` now: SIGTERM, then SIGKILL for those still there after ``grace``.

    Leaving it to ``shutdown`` would wait for the scans in flight to finish, and a parent that exits first
    leaves its workers running with no parent. A worker inside a run may not get to end it (Dagster's own
    interrupt is not reliable inside native calls), so the build marks the runs it leaves as canceled
    (``runs.build``). Dagster's log-tailing children of a worker end themselves once it is gone.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(5.0)


def _run_in_worker(key: str, uri: str) -> ScanOutcome:
    assert _runner is not None, "worker process was not initialised"
    return _runner.run(key, uri)


def _pool_round(
    scans: list[tuple[str, str]],
    workers: int,
    initargs: tuple,
    outcomes: dict[str, ScanOutcome],
    on_outcome: Callable[[ScanOutcome], None],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """One pool over ``scans``; returns the scans in flight and the scans not started if a worker died."""
    waiting = list(scans)
    with ProcessPoolExecutor(
        max_workers=min(workers, len(scans)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=initargs,
    ) as pool:
        in_flight: dict[Future, tuple[str, str]] = {}
        try:
            while waiting or in_flight:
                while waiting and len(in_flight) < workers:
                    key, uri = waiting.pop(0)
                    in_flight[pool.submit(_run_in_worker, key, uri)] = (key, uri)
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                broken = False
                for future in sorted(done, key=lambda f: in_flight[f][0]):
                    key, uri = in_flight[future]
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    except Exception as exc:  # a pickling or initializer error: this scan, not the build
                        outcome = ScanOutcome(key, False, f"{type(exc).__name__}: {exc}".splitlines()[0], 0.0)
                    del in_flight[future]
                    outcomes[key] = outcome
                    on_outcome(outcome)
                if broken:
                    return sorted(in_flight.values()), waiting
        except KeyboardInterrupt:  # SIGINT or SIGTERM (pipeline.interrupts): stop the workers before leaving
            stop_workers(pool)
            raise
    return [], []


def run_scans_in_pool(
    scans: list[tuple[str, str]],
    config: Config,
    config_file: str,
    workers: int,
    threads: int,
    on_outcome: Callable[[ScanOutcome], None],
) -> list[ScanOutcome]:
    """Materialize every scan on ``workers`` processes; ``on_outcome`` is called as each one finishes."""
    initargs = (config, config_file, [key for key, _ in scans], threads)
    outcomes: dict[str, ScanOutcome] = {}
    fresh, suspects = list(scans), []
    while fresh:
        in_flight, fresh = _pool_round(fresh, workers, initargs, outcomes, on_outcome)
        if in_flight:
            print(f"a worker process died; rebuilding alone what it had in flight: "
                  f"{', '.join(key for key, _ in in_flight)}", flush=True)
        suspects += in_flight
    for key, uri in sorted(suspects):
        crashed, _ = _pool_round([(key, uri)], 1, initargs, outcomes, on_outcome)
        if crashed:
            outcome = ScanOutcome(key, False, "the worker process building this scan died (also when built alone)", 0.0)
            outcomes[key] = outcome
            on_outcome(outcome)
    return [outcomes[key] for key in sorted(outcomes)]
