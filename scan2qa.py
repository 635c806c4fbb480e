"""The ``scan2qa`` command: ``pipeline.cli``'s commands plus the ones that drive Dagster.

``pipeline`` is the Dagster-free domain core and imports nothing above it, so the commands that build through
Dagster (``build``, ``backfill``) and the benches of the layers above are registered here, one layer up, and the
frame-sampler checks get the released tables' rules (``expectations``) from here. Modules still load only when
their command runs.
"""

from __future__ import annotations

import sys

from pipeline import cli
from pipeline.cli import Command


def _build():
    from runs import build
    return build


def _backfill():
    from runs import backfill
    return backfill


def _bench():
    from benches import command
    return command


def _decide_suites(*args, **kwargs):
    from expectations.runner import decide_suites
    return decide_suites(*args, **kwargs)


DAGSTER_COMMANDS = {
    "build": Command("discover scans, register partitions and materialize the asset graph", _build),
    "backfill": Command("queue every scan as a Dagster backfill on a deployment (Postgres, Celery)", _backfill),
}
# synth first, then the Dagster commands, then pipeline's in their order, bench with the targets above pipeline.
COMMANDS = {"synth": cli.COMMANDS["synth"], **DAGSTER_COMMANDS, **cli.COMMANDS,
            "bench": Command(cli.COMMANDS["bench"].help, _bench)}


def main(argv: list[str] | None = None) -> int:
    from pipeline.sampling.checker import use_rule_checker

    use_rule_checker(_decide_suites)
    return cli.main(argv, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
