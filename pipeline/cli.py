"""``scan2qa`` command line: the commands of the domain core.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; modules are imported only when their command runs, so
``scan2qa synth`` never pays for Dagster or Great Expectations imports. The
commands that drive Dagster (``build``, ``backfill``) and the benches above
``pipeline`` are added by the entry point one layer up (``scan2qa.py``), which
calls ``main`` with the full table: this module imports nothing above ``pipeline``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

from pipeline.errors import (
    ConfigError, OutputUnwritable, ScanError, StorageUnreachable, TableError, unreachable_reason,
)
from pipeline.interrupts import Interrupted, stop_on_signals

# Plain text: argparse prints help verbatim, so no reStructuredText/Markdown markup here.
DESCRIPTION = "scan2qa: 3D indoor scans to video spatial-reasoning benchmarks (ReVSI, VSI-Bench, PinpointQA)."


@dataclass(frozen=True)
class Command:
    help: str
    load: Callable[[], ModuleType]  # the module with add_arguments and run, imported when the command runs


def _synth():
    from pipeline.synth import command
    return command


def _bench():
    from pipeline.bench import command
    return command


def _generate():
    from pipeline.qa import generate_command
    return generate_command


def _answers():
    from pipeline.sampling import command
    return command


def _stats():
    from pipeline.qa import stats
    return stats


def _export():
    from pipeline.exports import command
    return command


def _eval():
    from pipeline.scoring import command
    return command


def _baseline():
    from pipeline.scoring import baselines
    return baselines


COMMANDS: dict[str, Command] = {
    "synth": Command("write synthetic scans in a native dataset layout", _synth),
    "bench": Command("measure throughput against a baseline measured in the same run", _bench),
    "generate": Command("questions from ReVSI/VSI-Bench annotation files, without scans", _generate),
    "answers": Command("a benchmark answered for exactly the frames a frame sampler takes", _answers),
    "stats": Command("question counts, answer distributions and baselines per type and budget", _stats),
    "export": Command("write a released benchmark in a harness layout", _export),
    "eval": Command("score a predictions file against a release", _eval),
    "baseline": Command("write random/frequency/black/blind baseline predictions", _baseline),
}
# Commands the entry point above pipeline adds; named here only to point a caller of ``python -m pipeline.cli`` there.
ENTRY_POINT_COMMANDS = ("build", "backfill")


def build_parser(commands: Mapping[str, Command] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scan2qa", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in commands.items():
        sub.add_parser(name, help=command.help, add_help=False)
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


def main(argv: list[str] | None = None, commands: Mapping[str, Command] = COMMANDS) -> int:
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        parser = build_parser(commands)
        if argv and argv[0] not in ("-h", "--help"):
            parser.print_usage(sys.stderr)
            hint = f" (it drives Dagster: run `scan2qa {argv[0]}`)" if argv[0] in ENTRY_POINT_COMMANDS else ""
            print(f"scan2qa: unknown command {argv[0]!r}{hint}", file=sys.stderr)
            return 2
        parser.print_help()
        return 0
    name = argv[0]
    module = commands[name].load()
    parser = argparse.ArgumentParser(prog=f"scan2qa {name}", description=commands[name].help)
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
