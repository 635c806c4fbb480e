"""Runs that ``scan2qa build`` executes in its own processes, recorded as runs of the code location's jobs.

``dagster.materialize`` / ``execute_in_process`` record a run of an ephemeral
job with no origin, so the UI can show it but not re-execute it (its launchpad
has no code location to send the run to). ``scan2qa build`` runs the code
location's own ``scan_job`` and ``dataset_job`` selections, and this module
stamps each run with the origin the workspace (``workspace.yaml``: the module
``assets.definitions``, location ``scan2qa``) gives its jobs, so "Re-execute"
on a build's run page launches the same job from the loaded code location, as
for a run launched from the UI. Only the origin is added: the run executes in
this process exactly as before.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

LOCATION_NAME = "scan2qa"  # workspace.yaml's location_name; pyproject's [tool.dagster] code_location_name
DEFINITIONS_MODULE = "assets.definitions"
REPOSITORY_NAME = "__repository__"  # the repository a Definitions object is loaded as
REPO_ROOT = Path(__file__).resolve().parents[1]


def job_origin(job_name: str):
    """The origin of ``job_name`` as ``dagster dev -w workspace.yaml`` loads the code location."""
    from dagster._core.remote_origin import (
        ManagedGrpcPythonEnvCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    target = LoadableTargetOrigin(
        executable_path=sys.executable, module_name=DEFINITIONS_MODULE, working_directory=str(REPO_ROOT)
    )
    location = ManagedGrpcPythonEnvCodeLocationOrigin(loadable_target_origin=target, location_name=LOCATION_NAME)
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY_NAME), job_name)


@contextmanager
def runs_from_code_location(instance: dg.DagsterInstance, job_name: str):
    """While inside, runs this process creates on ``instance`` carry ``job_name``'s origin in the code location."""
    origin = job_origin(job_name)
    create = instance.create_run_for_job

    def create_with_origin(*args, **kwargs):
        kwargs.setdefault("remote_job_origin", origin)
        return create(*args, **kwargs)

    instance.create_run_for_job = create_with_origin  # this object only; the class keeps its method
    try:
        yield
    finally:
        del instance.create_run_for_job
