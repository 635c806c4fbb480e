"""``scan2qa`` command line.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; modules are imported only when their command runs, so
``scan2qa synth`` never pays for Dagster or Great Expectations imports.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from pipeline.errors import (
    ConfigError, OutputUnwritable, ScanError, StorageUnreachable, TableError, unreachable_reason,
)
from pipeline.interrupts import Interrupted, stop_on_signals

# Plain text: argparse prints help verbatim, so no reStructuredText/Markdown markup here.
DESCRIPTION = "scan2qa: 3D indoor scans to video spatial-reasoning benchmarks (ReVSI, VSI-Bench, PinpointQA)."

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "synth": ("pipeline.synth.command", "write synthetic scans in a native dataset layout"),
    "build": ("assets.build", "discover scans, register partitions and materialize the asset graph"),
    "backfill": ("assets.backfill", "queue every scan as a Dagster backfill on a deployment (Postgres, Celery)"),
    "bench": ("pipeline.bench.command", "measure throughput against a baseline measured in the same run"),
    "generate": ("pipeline.qa.generate_command", "questions from ReVSI/VSI-Bench annotation files, without scans"),
    "answers": ("pipeline.sampling.command", "a benchmark answered for exactly the frames a frame sampler takes"),
    "stats": ("pipeline.qa.stats", "question counts, answer distributions and baselines per type and budget"),
    "export": ("pipeline.exports.command", "write a released benchmark in a harness layout"),
    "eval": ("pipeline.scoring.command", "score a predictions file against a release"),
    "baseline": ("pipeline.scoring.baselines", "write random/frequency/black/blind baseline predictions"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scan2qa", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def os_error_line(exc: OSError) -> str:
    """``<path>: <cause>`` (``No space left on device``, ``Read-only file system``, ...), whatever raised it."""
    where = exc.filename if exc.filename is not None else ""
    if exc.filename2 is not None:
        where = f"{where} -> {exc.filename2}"
    cause = exc.strerror or str(exc) or type(exc).__name__
    return f"{where}: {cause}" if where else cause


def object_store_uris(args: argparse.Namespace) -> list[str]:
    """The ``s3://``-style URIs a command was given, to name when a store they point at did not answer."""
    values = []
    for value in vars(args).values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and "://" in item and item not in values:
                values.append(item)
    return values


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser = build_parser()
        if argv and argv[0] not in ("-h", "--help"):
            parser.print_usage(sys.stderr)
            print(f"scan2qa: unknown command {argv[0]!r}", file=sys.stderr)
            return 2
        parser.print_help()
        return 0
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"scan2qa {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        with stop_on_signals():
            return int(module.run(args) or 0)
    except (ScanError, ConfigError, TableError, StorageUnreachable, OutputUnwritable, FileNotFoundError) as exc:
        print(f"scan2qa {name}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        # The store did not answer (refused, no route, no credentials) somewhere a command did not name the URI
        # itself (``storage.reaching``): one line naming the URIs it was given, never botocore's traceback.
        reason = unreachable_reason(exc)
        if reason is not None:
            where = ", ".join(object_store_uris(args)) or "the object store"
            print(f"scan2qa {name}: error: {where}: cannot reach the object store ({reason})", file=sys.stderr)
            return 1
        if not isinstance(exc, OSError):
            raise
        # Out of space, read-only, permission, a file where a folder must be: one line.
        print(f"scan2qa {name}: error: {os_error_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Interrupted (SIGINT/SIGTERM), or a KeyboardInterrupt raised by a library
        stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        print(f"scan2qa {name}: stopped by {stopped.signal_name}{stopped.note}", file=sys.stderr, flush=True)
        if from_command_line:  # the process is this command: leave now, not after a full interpreter teardown
            sys.stdout.flush()
            os._exit(stopped.exit_status)
        return stopped.exit_status


if __name__ == "__main__":
    sys.exit(main())
