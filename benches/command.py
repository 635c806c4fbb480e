"""``scan2qa bench``: the domain core's targets plus the ones that drive Dagster, the gate or a deployment.

Importing this module registers those targets; the ``scan2qa`` entry point loads it for ``bench``. The deploy
targets import their module only when they run (they need Dagster and a loopback deployment).
"""

from __future__ import annotations

from types import ModuleType

from benches import answers as answers_bench
from benches import build as build_bench
from benches import dataset as dataset_bench
from pipeline.bench.command import BENCHES, Bench, add_arguments, register, run

__all__ = ["BENCHES", "add_arguments", "run"]


def _scaling_bench() -> ModuleType:
    from deploy import scaling_bench
    return scaling_bench


def _latency_bench() -> ModuleType:
    from deploy import latency_bench
    return latency_bench


def _when_run(load, attribute: str):
    return lambda *args: getattr(load(), attribute)(*args)


register(
    "dataset",
    Bench(
        help="the dataset-wide assets (qa, gate, release, report) over replicas of a few built scans (default 2000)",
        add_arguments=dataset_bench.add_arguments,
        run=dataset_bench.run_dataset_bench,
        format=dataset_bench.format_result,
    ),
)

register(
    "scaling",
    Bench(
        help="per-scan phase: serial vs --workers N vs 1 and 2 Celery workers on a loopback deployment",
        add_arguments=_when_run(_scaling_bench, "add_arguments"),
        run=_when_run(_scaling_bench, "run_scaling_bench"),
        format=_when_run(_scaling_bench, "format_result"),
    ),
)

register(
    "latency",
    Bench(
        help="the demo instance under dagster-daemon: seconds from a new scan, and from a verdicts edit, to the "
             "release, split into building and waiting",
        add_arguments=_when_run(_latency_bench, "add_arguments"),
        run=_when_run(_latency_bench, "run_latency_bench"),
        format=_when_run(_latency_bench, "format_result"),
    ),
)

register(
    "build",
    Bench(
        help="the same synthetic scans built with visibility.cast full and adaptive: CPU-s per scan and per frame, "
        "dataset-wide CPU-s, and identical decisions and questions",
        add_arguments=build_bench.add_arguments,
        run=build_bench.run_build_bench,
        format=build_bench.format_result,
    ),
)

register(
    "answers",
    Bench(
        help="CPU-s to answer one frame sampler on a built release (read, decide, generate, check, write, videos), "
        "against the release's 64-frame budget through the same path",
        add_arguments=answers_bench.add_arguments,
        run=answers_bench.run_answers_bench,
        format=answers_bench.format_result,
    ),
)
