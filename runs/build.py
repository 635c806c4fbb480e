"""``scan2qa build``: discover scans, register their partitions and materialize the graph in-process.

The same assets, IO manager and partitions as the Dagster code location, run
without a daemon: each scan partition is materialized on its own so a bad scan
fails only its own partition, then the dataset-wide assets are built from the
partitions that succeeded. With ``--workers N`` (default: every core) the scan
partitions run in N worker processes (``runs.scan_pool``); ``--workers 1``
keeps them in this process. Runs are recorded in the ``DAGSTER_HOME`` instance
when that variable is set (``make demo`` sets it to ``.dagster_home``, so
``dagster dev`` afterwards shows every partition, check and the release run),
else in an ephemeral one. Each scan's run carries the discovery fingerprint
of its folder, so the ``scan_discovery`` sensor does not rebuild it, and a later
build does not either: scans (and a release) built from the same files, code
and config are said to be up to date and left as they are (``runs.up_to_date``).
A write the output disk refuses (no space) stops the build with one line.

While a scan builds, the step running and the frames done in the long steps
are printed as they happen (``assets.progress``), then one line per scan when
it finishes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import os
import re
import shutil
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from pipeline.config import Config, load_config
from pipeline.errors import ConfigError
from pipeline.output_paths import output_root_problem
from pipeline.interrupts import Interrupted, raise_if_interrupted
from pipeline.scene.discovery import discover, discover_scans
from pipeline.scene.scan_notes import (
    SKIPPED_FILE, excluded_lines, read_scan_warnings, read_skipped, warning_lines, write_skipped,
)
from pipeline.errors import OutputUnwritable, StorageUnreachable, unreachable_reason
from pipeline.storage import reaching, upath
from pipeline.threads import available_cores, threads_per_worker
from runs.in_process import QUIET_RUN_CONFIG, materialize_quietly, register_partitions, run_failure
from runs.up_to_date import latest_release

DEMO_SCENES = 8
DEMO_FRAMES = 300
WORKERS_VARIABLE = "SCAN2QA_WORKERS"
# errno values saying the output takes no more writes: every later scan would fail the same way, so the build stops
OUTPUT_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\] ([^:]+)(?:: '([^']*)')?")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", help="scans root, local path or s3://bucket/prefix "
                        "(default: $SCAN2QA_SCANS, else the config, else data/scans)")
    parser.add_argument("--out", help="output root, local path or s3://bucket/prefix "
                        "(default: $SCAN2QA_OUT, else the config, else data/out)")
    parser.add_argument("--config", help="YAML run configuration (default: ./scan2qa.yaml if present)")
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help=f"scan partitions built in parallel processes (default: ${WORKERS_VARIABLE}, else this machine's cores, "
        f"{available_cores()})",
    )


def default_workers() -> int:
    """``SCAN2QA_WORKERS`` when set (a shared machine, a test suite), else one worker per core."""
    value = os.environ.get(WORKERS_VARIABLE, "").strip()
    try:
        return positive_int(value) if value else available_cores()
    except (ValueError, argparse.ArgumentTypeError):
        raise ConfigError(f"{WORKERS_VARIABLE}={value!r}: expected a whole number of at least 1") from None


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text}")
    return value


@dataclass
class BuildReport:
    ok: list[str] = field(default_factory=list)  # partition keys that materialized
    failed: dict[str, str] = field(default_factory=dict)  # partition key -> one-line error
    dataset_wide_error: str | None = None
    skipped: list[str] = field(default_factory=list)  # folders under the scans root not taken, and why
    up_to_date: list[str] = field(default_factory=list)  # keys in ``ok`` not built again (``runs.up_to_date``)
    release_up_to_date: str | None = None  # the latest release, when the dataset-wide assets were not built again
    left_out: dict[str, str] = field(default_factory=dict)  # keys in ``ok`` the release still left out -> why


def generate_demo_scans(config: Config) -> str | None:
    """Write the synthetic demo scans into the scans root; returns why not, or None on success."""
    try:
        from pipeline.synth import command as synth_command
    except ModuleNotFoundError:
        return "the synthetic generator is not installed"
    parser = argparse.ArgumentParser(prog="scan2qa synth")
    synth_command.add_arguments(parser)
    argv = ["--out", config.scans_root, "--scenes", str(DEMO_SCENES), "--frames", str(DEMO_FRAMES), "--seed", str(config.seed)]
    print(f"no scans under {config.scans_root}: generating {DEMO_SCENES} synthetic scans with {DEMO_FRAMES} frames", flush=True)
    status = int(synth_command.run(parser.parse_args(argv)) or 0)
    return f"scan2qa synth exited with status {status}" if status else None


def finish_interrupted_synth(config: Config) -> str | None:
    """Finish the synth an interrupted ``make demo`` (or ``scan2qa synth``) left under the scans root, if any.

    Without this the scans it had finished would look like the whole demo and be built alone. Returns why it
    could not be finished, or None (finished, or nothing to finish).
    """
    if "://" in config.scans_root:
        return None
    try:
        from pipeline.synth import command as synth_command
    except ModuleNotFoundError:
        return None
    request = synth_command.unfinished_request(config.scans_root)
    if request is None:
        return None
    print(f"an interrupted scan2qa synth left {config.scans_root} unfinished: writing the rest of its "
          f"{request['scenes']} scans", flush=True)
    parser = argparse.ArgumentParser(prog="scan2qa synth")
    synth_command.add_arguments(parser)
    argv = ["--out", config.scans_root, "--scenes", str(request["scenes"]), "--start", str(request["start"]),
            "--frames", str(request["frames"]),
            "--seed", str(request["seed"]), "--format", str(request["format"]),
            "--sky-direction", str(request["sky_direction"]), *(["--sens"] if request["sens"] else [])]
    status = int(synth_command.run(parser.parse_args(argv)) or 0)
    return f"scan2qa synth exited with status {status}" if status else None


@contextmanager
def build_instance():
    """The instance every run of this build is recorded in, shared by its worker processes.

    The release decides which scans it holds from the instance's record of each partition
    (``assets.membership``), so the scan runs of the worker processes and the dataset-wide run must write to one
    instance: ``DAGSTER_HOME``'s when set (``make demo``), else a temporary one for this build alone, removed
    afterwards (what an ephemeral instance was, but visible to the workers).
    """
    if os.environ.get("DAGSTER_HOME"):
        with dg.DagsterInstance.get() as instance:
            yield instance
        return
    home = tempfile.mkdtemp(prefix="scan2qa-instance-")
    Path(home, "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = home
    try:
        with dg.DagsterInstance.get() as instance:
            yield instance
    finally:
        os.environ.pop("DAGSTER_HOME", None)
        shutil.rmtree(home, ignore_errors=True)


def remove_gone_partitions(instance: dg.DagsterInstance, found: list[str], complete: bool) -> list[str]:
    """Remove the partitions of scans a complete discovery of the root no longer found (returned): a build releases
    what is under ``--scans`` now, on a persistent instance (``make demo``'s) as on a temporary one. A removed
    partition keeps its history: registered again, its runs and materializations count again."""
    from assets.partitions import gone_from_root, scan_partitions

    gone = gone_from_root(instance.get_dynamic_partitions(scan_partitions.name), found, complete)
    for key in gone:
        instance.delete_dynamic_partition(scan_partitions.name, key)
    return gone


def output_summary(config: Config) -> list[str]:
    """Where every output went: the tables root with per-table file counts, and the videos folder."""
    tables = upath(config.tables_root, config.storage_options)
    lines = [f"tables: {tables}"]
    if tables.exists():
        for entry in sorted(tables.iterdir(), key=lambda p: p.name):
            if entry.is_dir():
                count = sum(1 for p in entry.rglob("*.parquet") if not p.name.startswith("."))
                lines.append(f"  {entry.name}/: {count} file{'s' if count != 1 else ''}")
            elif entry.name.endswith(".parquet"):
                lines.append(f"  {entry.name}")
    videos = upath(f"{config.output_root.rstrip('/')}/videos", config.storage_options)
    if videos.exists():
        count = sum(1 for _ in videos.rglob("*.mp4"))
        lines.append(f"videos: {videos} ({count} mp4 files)")
    lines += release_summary(config)
    # Anything else an asset writes under the output root is listed too; the skipped-folders note only when it
    # names a folder (it is always written, and "(1 file)" for an empty list read as if something was skipped).
    root = upath(config.output_root, config.storage_options)
    if root.exists():
        skipped = read_skipped(config.output_root, config.storage_options)
        for entry in sorted(root.iterdir(), key=lambda p: p.name):
            if entry.name == SKIPPED_FILE:
                if skipped:
                    lines.append(f"{entry.name}: {entry} ({len(skipped)} skipped folder{'s' if len(skipped) != 1 else ''})")
            elif entry.name not in ("tables", "videos", "releases") and not entry.name.startswith("."):
                count = sum(1 for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else 1
                lines.append(f"{entry.name}: {entry} ({count} file{'s' if count != 1 else ''})")
    return lines


def output_inside_scans_line(config: Config) -> str:
    """What a build says when its output root lies below its scans root (discovery leaves it out)."""
    return (
        f"the output root {config.output_root} is inside the scans root {config.scans_root}: "
        "discovery leaves it out (it holds this build's output, not scans)"
    )


def release_summary(config: Config) -> list[str]:
    """The latest release and the files a reviewer opens: manifest, report, Data Docs."""
    releases = upath(config.releases_root, config.storage_options)
    pointer = releases / "LATEST"
    if not pointer.exists():
        return []
    release = releases / pointer.read_text().strip()
    return [
        f"release: {release} (latest)",
        *churn_lines(release),
        f"  manifest:  {release / 'manifest.json'}",
        f"  report:    {release / 'report' / 'index.html'}",
        f"  data docs: {release / 'data_docs' / 'index.html'}",
    ]


def manifest_checks(release) -> dict:
    """The ``checks`` of a release folder's manifest; empty when it cannot be read."""
    import json

    try:
        return json.loads((release / "manifest.json").read_text()).get("checks", {})
    except (OSError, ValueError):
        return {}


def churn_lines(release) -> list[str]:
    """The release's churn by cause (its manifest's ``checks.churn``), when it follows another release."""
    from pipeline.release.churn import churn_line

    record = manifest_checks(release).get("churn")
    return [f"  questions {churn_line(record['totals'], record['previous_release'])}"] if record else []


def build(config: Config, config_file: str = "", workers: int = 1, dataset_wide: bool = True) -> BuildReport:
    """Materialize every discovered scan, then (unless told not to) the dataset-wide assets; prints progress."""
    from assets.definitions import all_asset_checks, all_assets
    from resources.defaults import default_resources
    from resources.run_config import RunConfigResource
    from resources.storage import StorageResource

    report = BuildReport()
    with reaching(config.scans_root):  # an unreachable bucket is one line naming it, not "no scans found"
        found = discover(
            config.scans_root, config.storage_options,
            allow_links_outside_root=config.allow_links_outside_root, exclude=config.output_root,
        )
    scans, report.skipped = found.scans, found.skipped
    if found.excluded is not None:
        print(output_inside_scans_line(config), flush=True)
    for line in report.skipped:
        print(f"skipped under the scans root: {line}", flush=True)
    if not scans:
        return report
    definitions = [*all_assets, *all_asset_checks]
    resources = default_resources(StorageResource.from_config(config, config_file), RunConfigResource.from_config(config))
    with build_instance() as instance:
        keys = [key for key, _ in scans]
        register_partitions(instance, keys)
        gone = remove_gone_partitions(instance, keys, found.complete)
        if gone:
            print(f"{len(gone)} scan{'s' if len(gone) != 1 else ''} no longer under {config.scans_root}, left out of "
                  f"the release (their partitions removed): {', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}",
                  flush=True)
        _build_in(instance, report, scans, definitions, resources, config, config_file, workers, dataset_wide)
    return report


def _build_in(instance, report, scans, definitions, resources, config, config_file, workers, dataset_wide) -> None:
    from assets.definitions import all_assets
    from assets.jobs import DATASET_JOB, dataset_wide_keys
    from runs.up_to_date import dataset_wide_up_to_date, up_to_date_scans

    fresh = up_to_date_scans(instance, scans, definitions, resources, config)
    if fresh:
        print(f"up to date: {len(fresh)} of {len(scans)} scans were built from the same files, code and config "
              f"(not built again)", flush=True)
    to_build = [(key, uri) for key, uri in scans if key not in fresh]
    started = datetime.datetime.now(datetime.timezone.utc)
    try:
        outcomes = _build_scans(instance, to_build, definitions, resources, config, config_file, workers) if to_build else []
    except KeyboardInterrupt:  # stopped by a signal (pipeline.interrupts): no run of this build left "started"
        cancel_unfinished_runs(instance, started)
        raise
    for outcome in sorted(outcomes, key=lambda o: o.key):
        if not outcome.ok:  # the workers' scans: no release from a build that ran out of space
            stop_if_output_full(outcome.error, outcome.key)
    report.up_to_date = sorted(fresh)
    for outcome in sorted(outcomes, key=lambda o: o.key):
        if outcome.ok:
            report.ok.append(outcome.key)
        else:
            report.failed[outcome.key] = outcome.error
    report.ok = sorted([*report.ok, *fresh])
    dataset_selection = dataset_wide_keys(all_assets)
    releasing = bool(dataset_wide and dataset_selection and report.ok)
    release = None
    if releasing:
        observe_verdicts(all_assets, resources, instance)  # a changed verdicts file makes the release stale
        if not to_build:  # nothing built now: the release may be current too (asked before the notes change)
            release = dataset_wide_up_to_date(instance, definitions, resources, config, report.skipped)
    with reaching(config.output_root):
        write_skipped(config.output_root, config.storage_options, report.skipped)  # for the manifest's notes
    if release is not None:
        report.release_up_to_date = release
        print(f"up to date: the dataset-wide assets and release {release} (latest) were built from these scans, "
              f"code and config (not built again)", flush=True)
    elif releasing:
        from runs.step_lines import listener, print_line

        started = time.perf_counter()
        names = ", ".join(k.to_user_string() for k in dataset_selection)
        print(f"dataset-wide ({names})", flush=True)
        details: list[str] = []
        ok, error = materialize_quietly(
            definitions, dataset_selection, resources, instance,
            on_event=listener("dataset-wide", print_line), details=details, job_name=DATASET_JOB,
        )
        if ok:
            print(f"dataset-wide ({names}) ... ok ({time.perf_counter() - started:.1f} s)", flush=True)
        else:
            stop_if_output_full(error, "the dataset-wide assets")
            report.dataset_wide_error = error
            print(f"dataset-wide ({names}) ... FAILED: {error}", flush=True)
            for line in details:
                print(f"  {line}", flush=True)
    if releasing and report.dataset_wide_error is None:  # a release was published, or the latest is current
        report.left_out = left_out_of_release(config, report.ok)


def left_out_of_release(config: Config, built: list[str]) -> dict[str, str]:
    """Scans this build counts as built that the latest release nevertheless left out, and why (its manifest's
    ``checks.excluded_scans``).

    The release decides from the instance's record, not from this build's runs: a scan built by other code than
    the release's (the code or config on disk changed while the build ran, and worker processes loaded the new one),
    or one a run elsewhere was rebuilding at the time, is left out as stale or in progress. Such a build made a
    partial release, and must not say it succeeded.
    """
    version = latest_release(config)
    if version is None:
        return {}
    excluded = manifest_checks(upath(config.releases_root, config.storage_options) / version).get("excluded_scans") or {}
    wanted = set(built)
    return {entry["key"]: f"{entry['state']}: {entry['error']}" for entry in excluded.get("failed_scans", [])
            if entry.get("key") in wanted}


def _build_scans(instance, scans, definitions, resources, config, config_file, workers) -> list:
    """Every scan partition, each its own run, in this process or on ``workers`` processes; prints progress."""
    from assets.definitions import all_assets
    from assets.jobs import per_scan_keys
    from runs.scan_pool import ScanOutcome, ScanRunner, run_scans_in_pool

    finished = 0

    def show(outcome: ScanOutcome) -> None:
        nonlocal finished
        finished += 1
        status = f"ok ({outcome.seconds:.1f} s)" if outcome.ok else f"FAILED: {outcome.error}"
        print(f"[{finished}/{len(scans)}] {outcome.key} ... {status}", flush=True)

    workers = min(workers, len(scans))
    if workers > 1:
        print(f"building {len(scans)} scans on {workers} worker processes", flush=True)
        return run_scans_in_pool(scans, config, config_file, workers, threads_per_worker(workers), show)
    runner = ScanRunner(definitions, per_scan_keys(all_assets), resources, instance)
    outcomes = []
    for key, uri in scans:
        print(f"[{finished + 1}/{len(scans)}] {key}", flush=True)
        outcome = runner.run(key, uri)
        outcomes.append(outcome)
        show(outcome)
        if not outcome.ok:
            stop_if_output_full(outcome.error, key)
    return outcomes


def output_full_line(error: str) -> str | None:
    """``<path>: No space left on device`` if a run's one-line error says the output stopped taking writes."""
    found = _ERRNO_TEXT.search(error)
    if found is None or int(found[1]) not in OUTPUT_FULL_ERRNOS:
        return None
    return f"{found[3]}: {found[2]}" if found[3] else found[2]


def stop_if_output_full(error: str, where: str) -> None:
    line = output_full_line(error)
    if line is not None:
        raise OutputUnwritable(f"{line} (building {where}); the build stopped")


def cancel_unfinished_runs(instance: dg.DagsterInstance, since: datetime.datetime) -> None:
    """Mark the runs this build started and did not finish (a killed worker's) as canceled in the instance."""
    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    try:
        for run in instance.get_runs(dg.RunsFilter(statuses=unfinished, created_after=since)):
            instance.report_run_canceled(run, message="scan2qa build was stopped by a signal")
    except Exception:  # noqa: BLE001 - the build is stopping; its one line matters more than this record
        pass


def scan_notes_lines(config: Config, report: BuildReport) -> list[str]:
    """Per-scan warnings of the scans built, then what the release leaves out (``pipeline.scene.scan_notes``)."""
    warnings = read_scan_warnings(config.tables_root, report.ok, config.storage_options)
    return warning_lines(warnings) + excluded_lines(report.failed, report.skipped)


def observe_verdicts(assets, resources, instance) -> None:
    """Record the reviewer verdicts' version before a release, so the catalog knows what the release used."""
    observable = [a for a in assets if isinstance(a, (dg.SourceAsset, dg.AssetsDefinition)) and a.is_observable]
    if observable:  # what dagster.observe does, which the public API does not export
        job = dg.define_asset_job("in_process_observation_job", selection=dg.AssetSelection.all(include_sources=True))
        defs = dg.Definitions(assets=observable, jobs=[job], resources=resources)
        defs.resolve_job_def(job.name).execute_in_process(
            run_config=QUIET_RUN_CONFIG, instance=instance, raise_on_error=False
        )
        raise_if_interrupted()


def no_scans_line(config: Config) -> str:
    """Why a build found nothing: the scans root is missing, is a file, or holds no scan."""
    try:
        root = upath(config.scans_root, config.storage_options)
        if not root.exists():
            return f"the scans root {config.scans_root} does not exist"
        if not root.is_dir():
            return f"the scans root {config.scans_root} is a file, not a folder of scans"
    except OSError as exc:
        return f"the scans root {config.scans_root} cannot be read ({exc.strerror or exc})"
    except Exception as exc:  # noqa: BLE001 - an object store that stopped answering since discovery
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        return f"the scans root {config.scans_root}: cannot reach the object store ({reason})"
    return f"no scans found under {config.scans_root}"


def interrupt_note(config: Config, latest_before: str | None) -> str:
    """What a stopped build left: nothing published, unless the release was published before the signal."""
    return published_note(config, latest_before, "; the next build starts again")


def published_note(config: Config, latest_before: str | None, then: str = "") -> str:
    """``: nothing published, latest unchanged`` (or which release did get published) for a build that stopped."""
    try:
        latest = latest_release(config)
    except StorageUnreachable:
        latest = latest_before
    if latest is not None and latest != latest_before:
        return f": release {latest} had already been published as latest"
    return f": nothing published, latest unchanged{then}"


def run(args: argparse.Namespace) -> int:
    # The same locations as the code location (resources.storage.StorageResource.from_env): flags win.
    args.scans = args.scans or os.environ.get("SCAN2QA_SCANS", "").strip() or None
    args.out = args.out or os.environ.get("SCAN2QA_OUT", "").strip() or None
    # The code versions Dagster records cover the config the assets read (assets.catalog), which they take from
    # SCAN2QA_CONFIG: for this command's runs that is --config.
    previous = os.environ.get("SCAN2QA_CONFIG")
    if args.config:
        os.environ["SCAN2QA_CONFIG"] = str(Path(args.config).resolve())
    try:
        config = load_config(args.config, scans_root=args.scans, output_root=args.out)
        latest_before = latest_release(config)
        try:
            return _run(args, config)
        except Interrupted as stop:
            stop.note = interrupt_note(config, latest_before)
            raise
        except OutputUnwritable as full:
            raise OutputUnwritable(f"{full}{published_note(config, latest_before)}") from None
        except OSError as exc:  # this process's own writes (the skipped-folders note, the summary)
            if exc.errno not in OUTPUT_FULL_ERRNOS or exc.filename is None:
                raise
            note = published_note(config, latest_before)
            raise OutputUnwritable(f"{exc.filename}: {exc.strerror}; the build stopped{note}") from None
    finally:
        if previous is None:
            os.environ.pop("SCAN2QA_CONFIG", None)
        else:
            os.environ["SCAN2QA_CONFIG"] = previous


def _found_scans(config: Config) -> bool:
    with reaching(config.scans_root):
        return bool(discover_scans(config.scans_root, config.storage_options))


def _run(args: argparse.Namespace, config: Config) -> int:
    # Progress lines are the interface here; Dagster's notes about beta APIs are for developers, not for builds.
    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)
    problem = output_root_problem(config.output_root)
    if problem:
        raise ConfigError(problem)
    demo = not (args.scans or args.config)
    problem = finish_interrupted_synth(config) if demo else None
    if problem:
        print(f"the interrupted synth under {config.scans_root} could not be finished: {problem}")
        return 1
    if demo and not _found_scans(config):
        problem = generate_demo_scans(config)
        if problem:
            print(f"no scans under {config.scans_root} and no synthetic demo: {problem}")
            return 1
    workers = args.workers or default_workers()
    report = build(config, args.config or "", workers=workers)
    if not report.ok and not report.failed:
        print(no_scans_line(config))
        return 1
    with reaching(config.output_root):
        for line in [*output_summary(config), *scan_notes_lines(config, report)]:
            print(line)
    dataset_wide = "" if report.dataset_wide_error is None else ", dataset-wide assets FAILED"
    left_out = f", {len(report.left_out)} built but left out of the release" if report.left_out else ""
    print(f"summary: {len(report.ok)} ok, {len(report.failed)} failed{dataset_wide}{left_out}")
    for key, error in report.failed.items():
        print(f"  FAILED {key}: {error}")
    if report.dataset_wide_error is not None:
        print(f"  FAILED dataset-wide: {report.dataset_wide_error}")
    for key, why in sorted(report.left_out.items()):
        print(f"  LEFT OUT {key} ({why}); build again to release it")
    # Failed partitions are reported but do not fail the build; no release (a blocked gate), or a release that left
    # out scans this build built, does.
    return 0 if report.ok and report.dataset_wide_error is None and not report.left_out else 1
