"""``scan2qa backfill``: every discovered scan as one Dagster backfill on a deployment, then the release.

``scan2qa build`` runs the graph in this process (or its worker pool); a
deployment runs it in the daemon's queue: partitions are registered in the
instance (Postgres) in batches through Dagster's Python API, and one
``PartitionBackfill`` of the job over those partitions is added to the
instance, exactly as the UI's "Launch backfill" does. The daemon's backfill
loop creates the scan runs from it (no partition key ever passes through a
command line, so 10,000 scans are as easy as 4) and its
``QueuedRunCoordinator`` starts them as its concurrency limit allows, each
run's steps going to the Celery workers when the job is ``scan_job_celery``.
With run retries on, the daemon retries a failed run; the backfill stays open
while runs are in flight, which is what lets it (``runs.backfill_progress``).

With ``--wait`` the command follows every scan's newest run until it has
ended and no retry of it is coming, printing a line per scan, then queues the
dataset-wide job, follows it the same way and checks the release it wrote
against the batch: a release missing any scan of the batch, or a scan that
failed, is a non-zero exit with one line per missing scan naming its key and
its error. Every instance call survives the database being unreachable for
``--db-patience`` seconds (``runs.instance_calls``). Nothing here schedules
or retries anything itself: kill this command and the queued runs go on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import dagster as dg

from runs.backfill_progress import (
    AUTO_RETRY_RUN_ID_TAG,
    WILL_RETRY_TAG,
    DATASET_WIDE,
    FAILED,
    OK,
    RETRYING,
    RunChains,
    ScanState,
    can_gain_a_retry,
    judge,
    retry_refusal,
    run_range,
)
from assets.celery import DATASET_JOB_CELERY, SCAN_JOB_CELERY
from runs.instance_calls import DEFAULT_PATIENCE_S, DatabaseGone, Patience
from assets.jobs import DATASET_JOB, SCAN_JOB
from assets.run_errors import batch_failed_scans, scan_line, stored_run_failure
from assets.run_policy import MAX_RUNTIME_TAG, scan_run_tags
from pipeline.scene.discovery import discover_scans

BATCH_TAG = "scan2qa/batch"
DATASET_JOBS = {SCAN_JOB: DATASET_JOB, SCAN_JOB_CELERY: DATASET_JOB_CELERY}
REGISTER_BATCH = 1000  # partition keys per add_dynamic_partitions call
POLL_S = 3.0
FULL_REREAD_S = 300.0  # besides the incremental reads (runs updated lately), every run is read again this often
UPDATE_OVERLAP = timedelta(seconds=30)  # incremental reads go back this far past the newest update seen


class BackfillError(RuntimeError):
    """Something the user can act on, in one line (no traceback)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job", default=SCAN_JOB_CELERY, choices=sorted(DATASET_JOBS),
                        help=f"the partitioned job to backfill (default: {SCAN_JOB_CELERY})")
    parser.add_argument("--scans", help="scans root (default: SCAN2QA_SCANS or the config)")
    parser.add_argument("--config", help="YAML run configuration (default: SCAN2QA_CONFIG or ./scan2qa.yaml)")
    parser.add_argument("--workspace", default="workspace.yaml",
                        help="the workspace file the daemon loads (default: ./workspace.yaml)")
    parser.add_argument("--wait", action="store_true",
                        help="follow the runs to the end, then launch the dataset-wide job and check the release")
    parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds --wait waits at most (default 6 h)")
    parser.add_argument("--db-patience", type=float, default=DEFAULT_PATIENCE_S,
                        help="seconds of instance database outage to ride out before giving up "
                             f"(default {DEFAULT_PATIENCE_S:.0f})")


def say(line: str) -> None:
    print(line, flush=True)


# --- registering and launching ---------------------------------------------------------------------------------------


def register_partitions(instance: dg.DagsterInstance, patience: Patience, name: str, keys: list[str]) -> int:
    """Add the keys the instance does not have yet, ``REGISTER_BATCH`` per call; returns how many were new."""
    existing = set(patience.call(lambda: instance.get_dynamic_partitions(name), "read the registered scans"))
    missing = [key for key in dict.fromkeys(keys) if key not in existing]
    for start in range(0, len(missing), REGISTER_BATCH):
        batch = missing[start:start + REGISTER_BATCH]
        # Repeatable: the instance skips keys it has (a batch that went in before the connection broke).
        patience.call(lambda: instance.add_dynamic_partitions(name, batch), "register scans")
    return len(missing)


@contextmanager
def open_workspace(instance: dg.DagsterInstance, workspace_file: str) -> Iterator[object]:
    """The workspace the daemon loads, loaded here too (its code server is a child process, stopped on exit)."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[workspace_file]), version=dg.__version__) as ctx:
        yield ctx.create_request_context()


def find_job(workspace, job_name: str):
    """(code location, repository, remote job) of ``job_name`` in the workspace; a load error is one line."""
    errors = []
    for name in workspace.code_location_names:
        if workspace.has_code_location_error(name):
            error = workspace.get_code_location_error(name)
            errors.append(f"code location {name}: {error.message.strip().splitlines()[-1] if error else 'failed'}")
            continue
        location = workspace.get_code_location(name)
        for repo in location.get_repositories().values():
            if repo.has_job(job_name):
                return location, repo, repo.get_full_job(job_name)
    raise BackfillError(f"job {job_name} is not in the workspace{': ' + '; '.join(errors) if errors else ''}")


def add_job_backfill(instance: dg.DagsterInstance, patience: Patience, workspace, job_name: str, keys: list[str],
                     tags: dict[str, str]) -> str:
    """One ``PartitionBackfill`` of ``job_name`` over ``keys``, for the daemon's backfill loop to create the runs."""
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    _, repo, _ = find_job(workspace, job_name)
    partition_set = next((p for p in repo.get_partition_sets() if p.job_name == job_name), None)
    if partition_set is None:
        raise BackfillError(f"job {job_name} is not partitioned")
    backfill = PartitionBackfill(
        backfill_id=make_new_backfill_id(),
        partition_set_origin=partition_set.get_remote_origin(),
        status=BulkActionStatus.REQUESTED,
        partition_names=keys,
        from_failure=False,
        reexecution_steps=None,
        tags=tags,
        backfill_timestamp=time.time(),
        title=f"scan2qa backfill {tags.get(BATCH_TAG, '')}".strip(),
    )

    def add() -> None:
        if instance.get_backfill(backfill.backfill_id) is None:
            instance.add_backfill(backfill)

    patience.call(add, "add the backfill")
    return backfill.backfill_id


def per_scan_nodes(workspace) -> list:
    """The workspace's materializable assets partitioned by scan, as the code location defines them."""
    from assets.partitions import scan_partitions

    return [node for node in workspace.asset_graph.asset_nodes
            if node.is_materializable and getattr(node.partitions_def, "name", None) == scan_partitions.name]


def scans_per_run_of(workspace) -> int:
    """How many scans the code location's per-scan assets take per backfill run (``SCAN2QA_SCANS_PER_RUN`` where
    the code location runs: the daemon's code server, not this command)."""
    sizes = {node.backfill_policy.max_partitions_per_run or 0
             for node in per_scan_nodes(workspace) if node.backfill_policy is not None}
    return max(sizes, default=1)


def add_asset_backfill(instance: dg.DagsterInstance, patience: Patience, workspace, keys: list[str],
                       tags: dict[str, str]) -> str:
    """One asset backfill of every per-scan asset over ``keys``: the daemon makes one run per range of scans, as
    the assets' ``BackfillPolicy`` says (``assets.scan_batches``), with the code location's default executor."""
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from assets.jobs import SCAN_TAGS  # every per-scan asset: its updates are no partial rerun (assets.automation)

    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(), asset_graph=workspace.asset_graph, partition_names=keys,
        asset_selection=sorted(node.key for node in per_scan_nodes(workspace)),
        backfill_timestamp=time.time(), tags={**SCAN_TAGS, **tags}, dynamic_partitions_store=instance,
        all_partitions=False,
        title=f"scan2qa backfill {tags.get(BATCH_TAG, '')}".strip(), description=None, run_config=None,
    )

    def add() -> None:
        if instance.get_backfill(backfill.backfill_id) is None:
            instance.add_backfill(backfill)

    patience.call(add, "add the backfill")
    return backfill.backfill_id


def launch_job(instance: dg.DagsterInstance, patience: Patience, workspace, job_name: str, tags: dict[str, str]) -> str:
    """Queue one run of an unpartitioned job, as ``dagster job launch`` does; repeatable after an outage."""
    location, repo, remote_job = find_job(workspace, job_name)
    plan = location.get_execution_plan(remote_job, {}, step_keys_to_execute=None, known_state=None, instance=instance)
    run_id = str(uuid.uuid4())  # a run id is a UUID4 (what Dagster's own make_new_run_id returns)

    def create_and_submit() -> None:
        run = instance.get_run_by_id(run_id)
        if run is None:
            run = instance.create_run(
                job_name=remote_job.name, run_id=run_id, run_config={}, resolved_op_selection=None,
                step_keys_to_execute=None, op_selection=None, status=dg.DagsterRunStatus.NOT_STARTED,
                root_run_id=None, parent_run_id=None, tags={**remote_job.tags, **tags},
                job_snapshot=remote_job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
                parent_job_snapshot=remote_job.parent_job_snapshot, remote_job_origin=remote_job.get_remote_origin(),
                job_code_origin=remote_job.get_python_origin(), asset_selection=None, asset_check_selection=None,
                asset_graph=repo.asset_graph,
            )
        if run.status == dg.DagsterRunStatus.NOT_STARTED:
            instance.submit_run(run_id, workspace)

    patience.call(create_and_submit, f"queue {job_name}")
    return run_id


# --- following the runs ------------------------------------------------------------------------------------------------


class Follower:
    """Follows the newest run of each key among the runs tagged ``tags`` until every key is done."""

    def __init__(self, instance: dg.DagsterInstance, patience: Patience, tags: dict[str, str], keys: list[str],
                 backfill_id: str | None = None, clock=time.time, ordered: list[str] | None = None):
        """``ordered``: every registered scan in partition order, to place runs over a range of scans."""
        self.instance, self.patience, self.tags, self.keys = instance, patience, tags, keys
        self.backfill_id = backfill_id
        self.clock = clock
        self.refusals: dict[str, str] = {}  # run id -> the retry daemon's reason for not retrying it
        self.batch_failures: dict[str, dict[str, str] | None] = {}  # failed run over a range -> its failed scans
        self.chains = RunChains(keys, ordered)
        self.states: dict[str, ScanState] = {}
        self.errors: dict[str, str] = {}
        self.reported_failures: set[str] = set()
        self.reopened: list[str] = []  # keys judged failed whose retry came after all
        self.retries_enabled = instance.run_retries_enabled
        self.last_full_read = 0.0

    def _read(self) -> tuple[bool, str]:
        from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES

        full = time.monotonic() - self.last_full_read > FULL_REREAD_S or self.chains.newest_update is None
        since = None if full else self.chains.newest_update - UPDATE_OVERLAP
        records = list(self.instance.get_run_records(filters=dg.RunsFilter(tags=self.tags, updated_after=since)))
        unsettled = self.chains.unsettled_run_ids()
        if unsettled:
            records += self.instance.get_run_records(filters=dg.RunsFilter(run_ids=unsettled))
        self.chains.absorb(records)
        if full:
            self.last_full_read = time.monotonic()
        if self.backfill_id is None:
            return False, ""
        backfill = self.instance.get_backfill(self.backfill_id)
        if backfill is None:
            return True, f"backfill {self.backfill_id} was deleted"
        note = ""
        if backfill.error is not None:
            note = f"backfill {backfill.status.value}: {backfill.error.message.strip().splitlines()[0]}"
        return backfill.status in BULK_ACTION_TERMINAL_STATUSES, note

    def refusal(self, record, ended: bool) -> str:
        """The retry daemon's refusal to retry the record's run, read once the backfill ended (its usual cause)."""
        if record is None or not ended:
            return ""
        run = record.dagster_run
        if run.status != dg.DagsterRunStatus.FAILURE or run.tags.get(WILL_RETRY_TAG) != "true" or run.tags.get(
                AUTO_RETRY_RUN_ID_TAG):
            return ""
        if run.run_id not in self.refusals:
            found = self.patience.call(lambda: retry_refusal(self.instance, run.run_id), "read a run's retry decision")
            if not found:
                return ""
            self.refusals[run.run_id] = found
        return self.refusals[run.run_id]

    def batch_failed(self, record) -> dict[str, str] | None:
        """The scans a failed run over a range failed on (read once per run); None for any other run."""
        if record is None or record.dagster_run.status != dg.DagsterRunStatus.FAILURE or run_range(record) is None:
            return None
        run_id = record.dagster_run.run_id
        if run_id not in self.batch_failures:
            self.batch_failures[run_id] = self.patience.call(
                lambda: batch_failed_scans(self.instance, run_id), "read a run's failed scans")
        return self.batch_failures[run_id]

    def settled(self, key: str) -> bool:
        """Done for good: built, canceled, or failed with no retry that could still come (nor one already read)."""
        state, record = self.states.get(key), self.chains.latest.get(key)
        if state is None or not state.done:
            return False
        if record is not None and record.dagster_run.run_id != state.run_id:
            return False  # a newer run of the key came in since it was judged
        return not can_gain_a_retry(state, record)

    def poll(self) -> list[ScanState]:
        """Read the runs once; returns the keys that became done, in the order they became so. A key judged
        failed while its run could still gain a retry is judged again: if the retry came after all, it is not
        done any more (``reopened``) and is followed to its end."""
        ended, note = self.patience.call(self._read, "read the runs")
        now = self.clock()
        newly_done = []
        for key in self.keys:
            if self.settled(key):
                continue
            previous = self.states.get(key)
            record = self.chains.latest.get(key)
            state = judge(key, record, now=now, retries_enabled=self.retries_enabled,
                          backfill_ended=ended, backfill_note=note, refusal=self.refusal(record, ended),
                          batch_failed=self.batch_failed(record))
            if previous is not None and previous.done:
                if state.run_id == previous.run_id:
                    self.states[key] = state  # the same run's verdict, perhaps with the daemon's reason now
                    continue
                self.reopened.append(key)
                say(f"  {key}: retried after all (run {(state.run_id or '?')[:8]})"
                    + ("" if state.done else ": following it"))
            if state.run_id and state.state in (FAILED, RETRYING) and state.run_id not in self.errors:
                run_id = state.run_id
                self.errors[run_id] = self.patience.call(lambda: stored_run_failure(self.instance, run_id), "read a run's error")
            if state.state == RETRYING and state.run_id not in self.reported_failures and state.note != (
                    "waiting for the retry daemon's decision"):
                self.reported_failures.add(state.run_id)
                say(f"  {key}: run {state.run_id[:8]} failed ({self.errors[state.run_id]}); {state.note}")
            self.states[key] = state
            if state.done:
                newly_done.append(state)
        return newly_done

    def error_of(self, state: ScanState) -> str:
        if state.state == OK:
            return ""
        error = self.errors.get(state.run_id or "", "") if state.state == FAILED else ""
        failed = self.batch_failures.get(state.run_id or "")
        if state.state == FAILED and failed:  # a run over a range: the words the release's membership uses
            error = scan_line(state.key, failed)
        parts = [error, state.note]
        return "; ".join(p for p in parts if p) or state.state

    def describe(self, state: ScanState) -> str:
        record = self.chains.latest.get(state.key)
        after = f" after {state.retries} {'retry' if state.retries == 1 else 'retries'}" if state.retries else ""
        if state.ok:
            seconds = ((record.end_time or 0) - (record.start_time or record.end_time or 0)) if record else 0
            return f"ok ({seconds:.1f} s){after}"
        return f"{state.state.upper().replace('_', ' ')}{after}: {self.error_of(state)}"

    def follow(self, deadline: float, label=lambda key: key) -> bool:
        """Print a line per key as it becomes done; False when ``deadline`` (monotonic) came first."""
        while True:
            newly_done = self.poll()
            done = sum(s.done for s in self.states.values()) - len(newly_done)  # before this read's lines
            for state in newly_done:
                done += 1
                say(f"[{done}/{len(self.keys)}] {label(state.key)} ... {self.describe(state)}")
            if len(self.states) == len(self.keys) and all(s.done for s in self.states.values()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)


# --- the release check -------------------------------------------------------------------------------------------------


def latest_release(config) -> tuple[str, set[str], dict[str, dict]] | None:
    """(version, scan keys in its ``scans`` table, manifest's failed_scans by key) of the latest release, if any."""
    from pipeline.storage import read_table, upath

    releases = upath(config.releases_root, config.storage_options)
    pointer = releases / "LATEST"
    if not pointer.exists():
        return None
    version = pointer.read_text().strip()
    release = releases / version
    manifest = json.loads((release / "manifest.json").read_text())
    scans_table = release / "tables" / "scans.parquet"
    keys = set(read_table(scans_table, "scans")["key"].to_list()) if scans_table.exists() else set()
    excluded = (manifest.get("checks") or {}).get("excluded_scans") or {}
    failed = {e["key"]: e for e in (excluded.get("failed_scans") or []) if isinstance(e, dict) and "key" in e}
    return version, keys, failed


def missing_scan_lines(keys: list[str], follower: Follower, release) -> list[str]:
    """One line per scan of the batch not in the release: key, state and error (Dagster's, else the manifest's)."""
    version, released, failed = release if release is not None else ("(none)", set(), {})
    lines = []
    for key in keys:
        if key in released:
            continue
        state = follower.states.get(key)
        if state is not None and not state.ok:
            lines.append(f"  missing {key}: {state.state}: {follower.error_of(state)}")
        elif key in failed:
            entry = failed[key]
            lines.append(f"  missing {key}: {entry.get('state', 'failed')}: {entry.get('error') or 'no error recorded'}")
        else:
            lines.append(f"  missing {key}: its run succeeded but release {version} does not contain it")
    return lines


# --- the command ---------------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if not os.environ.get("DAGSTER_HOME"):
        print("scan2qa backfill: DAGSTER_HOME is not set: a backfill runs on a deployment's instance "
              "(deploy/dagster.yaml; see docs/scaling.md)", file=sys.stderr)
        return 1
    if not Path(args.workspace).is_file():
        print(f"scan2qa backfill: {args.workspace}: no such workspace file (the one the daemon loads)", file=sys.stderr)
        return 1
    from resources.storage import StorageResource

    deployment = StorageResource.from_env()
    config = StorageResource(
        scans_root=args.scans or deployment.scans_root,
        output_root=deployment.output_root,
        storage_options=deployment.storage_options,
        config_file=args.config or deployment.config_file,
    ).config()
    scans = discover_scans(config.scans_root, config.storage_options)
    if not scans:
        print(f"no scans found under {config.scans_root}")
        return 1
    keys = list(dict.fromkeys(key for key, _ in scans))
    patience = Patience(args.db_patience)
    try:
        return backfill(args, config, keys, patience)
    except DatabaseGone as exc:
        print(f"scan2qa backfill: {exc}; queued runs go on in the daemon", file=sys.stderr)
        return 1
    except BackfillError as exc:
        print(f"scan2qa backfill: {exc}", file=sys.stderr)
        return 1


def backfill(args: argparse.Namespace, config, keys: list[str], patience: Patience) -> int:
    from runs.build import output_summary
    from assets.partitions import scan_partitions

    batch = uuid.uuid4().hex[:12]
    started = time.monotonic()
    deadline = started + args.timeout
    instance = patience.call(dg.DagsterInstance.get, "open the instance")
    with instance:
        new = register_partitions(instance, patience, scan_partitions.name, keys)
        say(f"backfill of {args.job}: {len(keys)} scans under {config.scans_root} ({new} newly registered; "
            f"batch {batch})")
        with open_workspace(instance, args.workspace) as workspace:
            per_run = scans_per_run_of(workspace)
            if per_run > 1:  # a run of N scans may take N times a scan run's limit (assets.run_policy)
                limit = {MAX_RUNTIME_TAG: str(int(scan_run_tags()[MAX_RUNTIME_TAG]) * per_run)}
                backfill_id = add_asset_backfill(instance, patience, workspace, keys, {BATCH_TAG: batch, **limit})
            else:
                backfill_id = add_job_backfill(instance, patience, workspace, args.job, keys, {BATCH_TAG: batch})
        runs = (f"runs of up to {per_run} scans each (SCAN2QA_SCANS_PER_RUN; the code location's default executor)"
                if per_run > 1 else "its runs")
        say(f"backfill {backfill_id} added; the daemon creates {runs} and starts them as its concurrency limit allows")
        if not args.wait:
            return 0
        ordered = patience.call(lambda: list(instance.get_dynamic_partitions(scan_partitions.name)),
                                "read the registered scans")
        scans = Follower(instance, patience, {BATCH_TAG: batch}, keys, backfill_id, ordered=ordered)
        if not scans.follow(deadline):
            return timed_out(scans, args.timeout)
        ok = [k for k in keys if scans.states[k].ok]
        if not ok:
            say(f"summary: 0 ok, {len(keys)} failed; no dataset-wide run")
            return 1
        dataset_job = DATASET_JOBS[args.job]
        dataset_tags = {BATCH_TAG: f"{batch}-dataset"}
        with open_workspace(instance, args.workspace) as workspace:
            launch_job(instance, patience, workspace, dataset_job, dataset_tags)
        say(f"{dataset_job} queued")
        dataset = Follower(instance, patience, dataset_tags, [DATASET_WIDE])
        if not dataset.follow(deadline):
            return timed_out(dataset, args.timeout, scans)
        dataset_ok = dataset.states[DATASET_WIDE].ok
        late = read_late_retries(scans)
        if late:
            say(f"{len(late)} scan{'s' if len(late) != 1 else ''} judged failed got a retry after the dataset-wide "
                f"run was queued: {', '.join(late[:5])}")
            ok = [k for k in keys if scans.states[k].ok]
    for line in output_summary(config):
        say(line)
    release = latest_release(config) if dataset_ok else None
    missing = missing_scan_lines(keys, scans, release)
    failed = len(keys) - len(ok)
    verdict = f"summary: {len(ok)} ok, {failed} failed"
    if not dataset_ok:
        verdict += f", dataset-wide assets FAILED: {dataset.error_of(dataset.states[DATASET_WIDE])}"
    elif release is None:
        verdict += ", no release found"
    else:
        verdict += f"; release {release[0]} has {len(keys) - len(missing)} of the {len(keys)} scans of this backfill"
    say(verdict)
    if missing:
        say(f"{len(missing)} scan{'s' if len(missing) != 1 else ''} missing from the release:")
        for line in missing:
            say(line)
    return 0 if dataset_ok and not missing and not failed else 1


def read_late_retries(scans: Follower) -> list[str]:
    """Read the scans' runs once more after the dataset-wide run: the keys whose retry came late (see ``poll``),
    so the exit status and the missing lines say where those scans stand now."""
    before = len(scans.reopened)
    scans.poll()
    return scans.reopened[before:]


def timed_out(follower: Follower, timeout: float, scans: Follower | None = None) -> int:
    """--timeout ran out before a release: every scan of the batch is missing from it, each named with its state."""
    scans = scans or follower
    unfinished = [s for s in follower.states.values() if not s.done]
    say(f"--timeout ({timeout:.0f} s) ran out with {len(unfinished)} of {len(follower.keys)} not done; no release "
        f"was built, so all {len(scans.keys)} scans are missing from it (the runs go on in the daemon):")
    for key in scans.keys:
        state = scans.states.get(key)
        if state is None or not state.done:
            note = state.note if state else "not read yet"
            run = f" (run {state.run_id})" if state and state.run_id else ""
            say(f"  missing {key}: {state.state if state else 'in_progress'}: {note}{run}")
        elif state.ok:
            say(f"  missing {key}: ok: built, but no dataset-wide run released it before --timeout")
        else:
            say(f"  missing {key}: {state.state}: {scans.error_of(state)}")
    return 1
