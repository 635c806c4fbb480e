"""Per-job pod resources on Kubernetes: the ``dagster-k8s/config`` tag K8sRunLauncher reads (a proposal).

With the Helm chart's ``K8sRunLauncher`` every run is one pod, sized by
``runLauncher.config.k8sRunLauncher.resources`` unless the run's job carries
this tag. A scan run is one scan's chain of steps (ray casting and video
encoding use the pod's cores through ``SCAN2QA_THREADS``); a dataset run reads
every scan's tables, so it needs memory more than cores.

Not wired into the jobs yet: to use it, merge ``scan_k8s_tags()`` /
``dataset_k8s_tags()`` into the tags ``assets.jobs.build_jobs`` gives the
in-process ``scan_job`` / ``dataset_job`` (off Kubernetes the tag is inert).
The container's ``SCAN2QA_THREADS`` is set with the CPU request, so one change
sizes both.
"""

from __future__ import annotations

K8S_CONFIG_TAG = "dagster-k8s/config"

SCAN_RUN_CPU = 2
SCAN_RUN_RESOURCES = {"requests": {"cpu": str(SCAN_RUN_CPU), "memory": "8Gi"}, "limits": {"memory": "12Gi"}}
DATASET_RUN_CPU = 2
DATASET_RUN_RESOURCES = {"requests": {"cpu": str(DATASET_RUN_CPU), "memory": "16Gi"}, "limits": {"memory": "24Gi"}}


def _tags(resources: dict, cpu: int) -> dict[str, dict]:
    return {K8S_CONFIG_TAG: {"container_config": {
        "resources": resources,
        "env": [{"name": "SCAN2QA_THREADS", "value": str(cpu)}],
    }}}


def scan_k8s_tags() -> dict[str, dict]:
    return _tags(SCAN_RUN_RESOURCES, SCAN_RUN_CPU)


def dataset_k8s_tags() -> dict[str, dict]:
    return _tags(DATASET_RUN_RESOURCES, DATASET_RUN_CPU)
