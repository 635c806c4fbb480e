"""Thin Dagster layer over ``pipeline``: one module per group of assets plus partitions, jobs, sensors, schedules."""
