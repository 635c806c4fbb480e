"""The demo's persistent Dagster instance: ``make demo`` builds into it, ``dagster dev`` opens it afterwards.

``python -m runs.demo_instance [DAGSTER_HOME]`` (default ``.dagster_home``)
writes the instance's ``dagster.yaml`` before the demo build, so the runs,
partitions, checks and the release that ``scan2qa build`` records are there
when the UI starts, and runs launched from the UI or by the sensors are
queued: at most ``SCAN2QA_MAX_CONCURRENT_RUNS`` at once (default: half this
machine's cores, at least one, which on 2 cores is one run at a time) and one
dataset-wide run at a time. Each run executes its steps in its own process
(``assets.definitions`` uses the in-process executor), so N queued runs use N
processes; with N > 1 give each ``SCAN2QA_THREADS=cores/N`` library threads.

A ``dagster.yaml`` this module did not write (a user's own instance) is left
untouched; one it wrote is rewritten, so a new limit takes effect.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pipeline.threads import available_cores

MARKER = "# Written by runs/demo_instance.py"
# What a dagster.yaml written before the module left assets/ starts with: still this module's to rewrite.
MARKERS = (MARKER, "# Written by assets/demo_instance.py")
LIMIT_VARIABLE = "SCAN2QA_MAX_CONCURRENT_RUNS"


def default_max_runs(cores: int | None = None) -> int:
    return max(1, (cores or available_cores()) // 2)


def max_concurrent_runs() -> int:
    value = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not value:
        return default_max_runs()
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"{LIMIT_VARIABLE}={value!r}: expected a whole number of at least 1")
    return int(value)


def instance_yaml(max_runs: int) -> str:
    return f"""{MARKER} for `make demo` (docs/operating.md, "Looking at the demo in Dagster").
# Storage is Dagster's default SQLite under this folder. Runs the UI, the sensors or the schedule launch wait
# in a queue; the daemon (started by `dagster dev`) starts them as slots free up.
run_coordinator:
  module: dagster
  class: QueuedRunCoordinator
  config:
    # How many runs at once ({LIMIT_VARIABLE} when `make demo` ran; default: half the cores, at least 1).
    max_concurrent_runs: {max_runs}
    tag_concurrency_limits:
      # One dataset-wide rebuild at a time: each reads every scan's tables and writes the release.
      - key: scan2qa/phase
        value: dataset
        limit: 1

telemetry:
  enabled: false
"""


def write_demo_instance(home: Path, max_runs: int) -> str:
    """Write ``home/dagster.yaml`` unless a file not written here is there; returns what was done."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if path.exists() and not path.read_text().startswith(MARKERS):
        return f"{path}: kept (not written by scan2qa; the demo uses it as it is)"
    text = instance_yaml(max_runs)
    if path.exists() and path.read_text() == text:
        return f"{path}: up to date (at most {max_runs} queued run{'s' if max_runs != 1 else ''} at once)"
    path.write_text(text)
    return f"{path}: written (at most {max_runs} queued run{'s' if max_runs != 1 else ''} at once)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    home = Path(argv[0] if argv else os.environ.get("DAGSTER_HOME") or ".dagster_home").resolve()
    print(f"Dagster instance: {write_demo_instance(home, max_concurrent_runs())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
