"""Dagster's ``DefaultRunLauncher`` with the run worker health check its run monitoring lacks.

With ``DefaultRunLauncher`` a run worker is a process the code server spawns,
and the code server is a child of the daemon (``dagster-daemon run -w
workspace.yaml``). Dagster 1.13's launcher says ``supports_check_run_worker_health
= False``, so the monitoring daemon only applies start/cancel timeouts and
``dagster/max_runtime`` to it: when the daemon's machine is lost, its runs stay
STARTED, hold their run-queue slots, and the queued runs never start. (When
only the run worker dies, the code server that spawned it notices and fails the
run itself; a lost machine takes the code server too.)

The check here asks the code server that launched the run (its address is the
run's ``dagster/grpc_info`` tag, which ``DefaultRunLauncher`` writes) whether
it still runs that run: a server that does not answer, or answers without the
run, means its worker is gone, and the monitoring daemon fails the run (which
frees its slot; run retries then launch it again). Nothing here resumes a run:
``max_resume_run_attempts`` stays 0, as ``DefaultRunLauncher`` cannot resume.

A launch that meets an infrastructure failure (the instance's Postgres
restarting under the daemon: ``DagsterPostgresException``, ``OperationalError``)
is reported to the run coordinator as an unreachable code server, the one
launch error it puts the run back in the queue for (``max_user_code_failure_retries``
in ``deploy/dagster.yaml``) instead of failing and dropping it.

Only for code servers the daemon reaches on its own machine (``python_module``
in ``workspace.yaml``, docs/scaling.md's bare-metal deployment): a remote code server
behind a flaky network would make a healthy run look dead. On Kubernetes the
chart's ``K8sRunLauncher`` does this check itself, against the run's pod.
"""

from __future__ import annotations

import json

from dagster import DagsterRun, DefaultRunLauncher, deserialize_value
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
from dagster._core.storage.tags import GRPC_INFO_TAG

from assets.infrastructure_errors import patient_postgres_connections

patient_postgres_connections()  # the daemon loads this module with the instance: it rides out a database restart

# Seconds a live code server has to list its runs; it answers from memory, so only a dead or wedged one takes long.
CODE_SERVER_TIMEOUT = 20


class MonitoredRunLauncher(DefaultRunLauncher):
    """``DefaultRunLauncher``, and a run whose code server no longer runs it is reported FAILED to run monitoring."""

    def launch_run(self, context) -> None:
        from dagster._core.errors import DagsterUserCodeUnreachableError

        from assets.infrastructure_errors import infrastructure_cause

        try:
            super().launch_run(context)
        except DagsterUserCodeUnreachableError:
            raise
        except Exception as exc:
            cause = infrastructure_cause(exc)
            if cause is None:
                raise
            raise DagsterUserCodeUnreachableError(
                f"run {context.dagster_run.run_id} not launched: {type(cause).__name__}: "
                f"{str(cause).strip().splitlines()[0] if str(cause).strip() else ''}; back in the queue"
            ) from exc

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        from dagster._core.errors import DagsterUserCodeUnreachableError
        from dagster._grpc.__generated__ import dagster_api_pb2
        from dagster._grpc.client import DagsterGrpcClient
        from dagster._grpc.types import GetCurrentRunsResult

        raw = run.tags.get(GRPC_INFO_TAG)
        if not raw:
            # Launched before the tag was written (or not by this launcher): nothing to ask, nothing to conclude.
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, f"run has no {GRPC_INFO_TAG} tag")
        info = json.loads(raw)
        where = info.get("socket") or f"{info.get('host')}:{info.get('port')}"
        client = DagsterGrpcClient(port=info.get("port"), socket=info.get("socket"), host=info.get("host", "localhost"),
                                   use_ssl=bool(info.get("use_ssl", False)))
        try:
            reply = client._query("GetCurrentRuns", dagster_api_pb2.Empty, timeout=CODE_SERVER_TIMEOUT)  # noqa: SLF001
        except DagsterUserCodeUnreachableError:
            return CheckRunHealthResult(WorkerStatus.FAILED, f"the code server that launched the run ({where}) "
                                        "does not answer: its machine or process is gone, and the run worker with it")
        current = deserialize_value(reply.serialized_current_runs, GetCurrentRunsResult).current_runs
        if run.run_id in current:
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the code server at {where} runs no worker for this run "
                                    "(it was restarted, or its worker process ended without reporting an end)")

