"""The Celery app workers run: ``celery -A runs.celery_worker worker --concurrency 1 --loglevel INFO``.

It is dagster-celery's own step task (``dagster_celery.tasks.create_task``) on
an app configured exactly as ``assets.celery`` configures the executor, so the
worker listens on the broker the runs send to and acknowledges a step only
after it ran; its ``OrphanRestorer`` hands back the steps of workers that died
holding them (``assets.celery_orphans``). A worker needs the environment of the deployment: the broker
(``SCAN2QA_CELERY_BROKER``), storage (``SCAN2QA_SCANS``, ``SCAN2QA_OUT``,
``SCAN2QA_STORAGE_OPTIONS``), the Dagster instance's database
(``DAGSTER_PG_*``; ``DAGSTER_HOME`` with ``deploy/dagster.yaml``) and, where
several workers share a machine, ``SCAN2QA_THREADS`` = cores / workers.
"""

from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from assets.celery import backend_url, broker_url, celery_settings
from assets.celery_orphans import OrphanRestorer
from pipeline.threads import apply_thread_limit

apply_thread_limit()

app = make_app(
    CeleryExecutor.for_cli(broker=broker_url(), backend=backend_url(), config_source=celery_settings()).app_args()
)
app.steps["worker"].add(OrphanRestorer)
execute_plan = create_task(app)
