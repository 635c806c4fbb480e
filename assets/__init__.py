"""Thin Dagster layer over ``pipeline``: one module per group of assets plus partitions, jobs, sensors, schedules."""

from assets.infrastructure_errors import patient_postgres_connections

patient_postgres_connections()
